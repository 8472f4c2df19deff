"""``anyagentd.text``: lone surrogates replaced where agent frames are decoded, error text clipped."""

from __future__ import annotations

import json

import pytest

from anyagentd import text


def test_loads_replaces_lone_surrogates_everywhere_and_keeps_pairs() -> None:
    line = json.dumps({"t": "a \ud83d b", "pair": "\ud83d\ude00", "k\udfff": ["\udc00", 1, None, {"x": "\ud800"}]})
    assert "\\ud83d" in line  # json.dumps escapes what it cannot encode: this is what an agent may write
    value = text.loads(line)
    assert value == {"t": "a \ufffd b", "pair": "😀", "k\ufffd": ["\ufffd", 1, None, {"x": "\ufffd"}]}
    json.dumps(value, ensure_ascii=False).encode()  # now encodable
    assert text.loads(line.encode()) == value


def test_loads_replaces_encoded_and_raw_surrogates_too() -> None:
    # bytes: json.loads itself would decode an encoded surrogate (ED A0 BD) with surrogatepass
    assert "\ud83d" not in text.loads(b'{"a": "\xed\xa0\xbd"}')["a"]
    assert text.loads('{"a": "x\udcff"}') == {"a": "x\ufffd"}  # a str that already holds one


def test_loads_leaves_clean_lines_alone_and_raises_for_non_json() -> None:
    assert text.loads('{"a": "caf\\u00e9", "b": "\\\\ud83d"}') == {"a": "café", "b": "\\ud83d"}
    with pytest.raises(ValueError):
        text.loads("not json")


def test_sanitize_and_find_surrogate() -> None:
    clean = "nothing to do"
    assert text.sanitize(clean) is clean
    assert text.sanitize("x\udbff") == "x\ufffd"
    assert text.clean(["\ud800", {"\ud800": "ok"}]) == ["\ufffd", {"\ufffd": "ok"}]
    frame = {"text": "fine", "answer": {"Question": [{"Text": "\ud800"}]}}
    assert text.find_surrogate(frame) == "answer.Question.0.Text"
    assert text.find_surrogate({"a": {"\udc00": 1}}) == "a.<key>"
    assert text.find_surrogate(["ok", 2]) is None


def test_clip() -> None:
    assert text.clip("short") == "short"
    clipped = text.clip("x" * 10_000, 300)
    assert clipped.startswith("x" * 300) and "9700 more characters" in clipped and len(clipped) < 340
