"""The daemon's log ring (anyagentd_a2a.logring): bounded, cursor reads, filters, cumulative drops, secrets
redacted before anything is kept or written."""

from __future__ import annotations

import io
import json

from anyagentd_a2a.logring import LogRing, secret_redactor


def test_ring_keeps_the_newest_and_counts_drops() -> None:
    ring = LogRing(3, stream=None)
    for i in range(5):
        ring.emit("task.started", task=f"t{i}")
    page = ring.read()
    assert [e["task"] for e in page.events] == ["t2", "t3", "t4"]
    assert (page.oldest_seq, page.newest_seq, page.dropped) == (3, 5, 2)


def test_cursor_limit_and_filters() -> None:
    ring = LogRing(100, stream=None)
    ring.emit("task.started")
    ring.emit("auth.failed", "warning")
    ring.emit("task.ended")
    assert [e["seq"] for e in ring.read(after=1).events] == [2, 3]
    assert [e["seq"] for e in ring.read(limit=1).events] == [1]
    assert [e["event"] for e in ring.read(prefix="task.").events] == ["task.started", "task.ended"]
    assert [e["event"] for e in ring.read(level="warning").events] == ["auth.failed"]
    assert ring.read(after=3).events == []


def test_empty_ring() -> None:
    page = LogRing(4, stream=None).read()
    assert (page.events, page.oldest_seq, page.newest_seq, page.dropped) == ([], 0, 0, 0)


def test_secrets_never_reach_the_ring_or_the_stream() -> None:
    out = io.StringIO()
    redact = secret_redactor({"s3cr3t-operator-token": "{{secret:OPERATOR}}", "abc": "{{secret:SHORT}}"})
    ring = LogRing(10, stream=out, redact=redact)
    ring.emit("auth.failed", detail="bearer s3cr3t-operator-token refused", nested={"k": ["s3cr3t-operator-token"]})
    record = ring.read().events[0]
    assert "s3cr3t" not in json.dumps(record) and "s3cr3t" not in out.getvalue()
    assert record["detail"] == "bearer {{secret:OPERATOR}} refused"
    assert json.loads(out.getvalue())["nested"] == {"k": ["{{secret:OPERATOR}}"]}
