"""Pure pieces of the A2A face, in process: answers from messages, request texts, prompts from parts, identities,
token buckets, extension header parsing (stop states: ``test_a2a_task_state.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types import Message, Part, Role

from anyagentd.model import (
    REQUEST,
    AnswerPermission,
    AnswerQuestion,
    Choices,
    TextAnswer,
)
from anyagentd_a2a.config import parse
from anyagentd_a2a.front import requested_extensions
from anyagentd_a2a.principals import OPERATOR, Identities, TokenBucket, Unauthenticated
from anyagentd_a2a.translate import answer_of, file_name, prompt_of, request_text

TOOL = {
    "id": "t1",
    "kind": "Edit",
    "title": "Write a.txt",
    "status": "Pending",
    "input": {"Path": "a.txt"},
    "output": None,
    "diffs": [],
    "locations": [],
    "raw": None,
}
PERMISSION = REQUEST.validate_python(
    {"Permission": {"id": "r1", "tool": TOOL, "options": ["AllowOnce", "DenyAlways"], "detail": "new file"}}
)
QUESTION = REQUEST.validate_python(
    {
        "Question": {
            "id": "q1",
            "questions": [
                {
                    "id": "lang",
                    "text": "Which language?",
                    "allows_free_text": False,
                    "choices": [{"id": "en", "label": "English"}, {"id": "fr", "label": "French"}],
                }
            ],
        }
    }
)


def message(*parts: Part) -> Message:
    return Message(message_id="m1", role=Role.ROLE_USER, parts=list(parts))


def data(value: dict) -> Part:
    part = Part()
    part.data.struct_value.update(value)
    return part


@pytest.mark.parametrize(
    "text, expected",
    [
        ("allow", AnswerPermission(value="AllowOnce")),
        ("Yes.", AnswerPermission(value="AllowOnce")),
        ("no", AnswerPermission(value="DenyAlways")),  # only DenyAlways is offered
    ],
)
def test_permission_answers_from_text(text: str, expected: object) -> None:
    assert answer_of(message(Part(text=text)), PERMISSION) == expected


def test_not_an_answer_says_why() -> None:
    assert "reply allow, always or deny" in answer_of(message(Part(text="hmm")), PERMISSION)
    assert "not among the offered options" in answer_of(message(Part(text="always")), PERMISSION)
    assert "no answer" in answer_of(message(), PERMISSION)
    assert "not an Answer" in answer_of(message(data({"Permission": "Sometimes"})), PERMISSION)


def test_data_part_answer_wins_over_text() -> None:
    answer = answer_of(message(Part(text="deny"), data({"Permission": "AllowOnce"})), PERMISSION)
    assert answer == AnswerPermission(value="AllowOnce")
    question = answer_of(message(data({"Question": [{"Text": "Klingon"}]})), QUESTION)
    assert question == AnswerQuestion(value=[TextAnswer(value="Klingon")])


def test_question_answers_by_label_or_id_and_free_text_only_where_allowed() -> None:
    assert answer_of(message(Part(text="french")), QUESTION) == AnswerQuestion(value=[Choices(value=["fr"])])
    assert answer_of(message(Part(text="en")), QUESTION) == AnswerQuestion(value=[Choices(value=["en"])])
    assert "not one of the choices (English, French)" in answer_of(message(Part(text="German")), QUESTION)


def test_request_text_for_a_person() -> None:
    assert request_text(PERMISSION) == "Permission requested: Write a.txt (new file). Reply allow, deny."
    assert request_text(QUESTION) == "Question: Which language? Choices: English, French."


def test_prompt_from_parts(tmp_path: Path) -> None:
    prompt = prompt_of(
        message(Part(text="read this"), data({"a": [1, 2]}), Part(raw=b"x", filename="/etc/passwd")), tmp_path / "files"
    )
    assert prompt.text == 'read this\n{"a": [1.0, 2.0]}'
    (attached,) = prompt.attachments
    assert Path(attached).parent == tmp_path / "files" and attached.endswith("-passwd")
    with pytest.raises(ValueError):
        prompt_of(message(), tmp_path)
    with pytest.raises(ValueError, match="not fetched"):
        prompt_of(message(Part(url="https://example.com/f.txt")), tmp_path)
    assert file_name(Part(url="https://example.com/dir/..%2F.hidden?x=1"), 3)[9:] == "_2F.hidden"
    assert file_name(Part(raw=b"x"), 3).endswith("-part-3")


def test_identities() -> None:
    loaded = parse(
        {
            "a2a": {
                "bearer": "{{secret:OP}}",
                "principals": [{"id": "al", "bearer": "{{secret:AL}}", "methods": ["Get*"]}],
            }
        },
        env={"OP": "op", "AL": "al"},
    )
    ids = Identities(loaded)
    assert ids.identify("Bearer op", "10.0.0.1", None) is OPERATOR
    alice = ids.identify("bearer al", "10.0.0.1", None)
    assert alice.id == "user:al" and alice.may("GetTask") and not alice.may("SendMessage")
    for header in ("Bearer nope", "Basic b3A=", "Bearer "):
        with pytest.raises(Unauthenticated) as err:
            ids.identify(header, "127.0.0.1", None)
        assert err.value.bad_credential
    with pytest.raises(Unauthenticated) as err:
        ids.identify(None, "127.0.0.1", None)  # credentials configured: no implicit operator
    assert not err.value.bad_credential
    open_ids = Identities(parse({}, env={}))
    assert open_ids.identify(None, "127.0.0.1", None) is OPERATOR
    for peer, origin in (("10.0.0.2", None), ("127.0.0.1", "https://a.example")):
        with pytest.raises(Unauthenticated):
            open_ids.identify(None, peer, origin)


def test_token_bucket_refills_over_time() -> None:
    now = [0.0]
    bucket = TokenBucket(2, 10.0, clock=lambda: now[0])
    assert bucket.take("s") == 0.0 and bucket.take("s") == 0.0
    assert bucket.take("s") == pytest.approx(5.0) and bucket.peek("s") == pytest.approx(5.0)
    now[0] = 5.0
    assert bucket.peek("s") == 0.0 and bucket.take("s") == 0.0
    assert bucket.take("other") == 0.0  # per key


def test_requested_extensions_header_parsing() -> None:
    assert requested_extensions(["a, b", " c ,a", ""]) == ["a", "b", "c"]


def test_a_request_reads_back_from_its_event_part_as_written_now_and_as_earlier_daemons_stored_it() -> None:
    """``event_part`` writes a text part holding the wire's JSON; a task stored by a daemon before it holds a DataPart
    (whose numbers came back as doubles). ``parked_request`` reads both the same, so a task left waiting across an
    upgrade is still answerable."""
    import json

    from a2a.types import Task, TaskStatus

    from anyagentd.model import Event
    from anyagentd_a2a.translate import EVENT_MEDIA_TYPE, event_part, parked_request, wire_json

    event = Event.model_validate(
        {
            "sequence": 7,
            "session_id": "s1",
            "turn_info": None,
            "extensions": {},
            "occurred_at": {"secs_since_epoch": 1700000000, "nanos_since_epoch": 5},
            "kind": {"RequestOpened": PERMISSION.model_dump()},
        }
    )
    now = event_part(event)
    assert now.WhichOneof("content") == "text" and now.media_type == EVENT_MEDIA_TYPE
    assert json.loads(now.text) == wire_json(event) and type(json.loads(now.text)["sequence"]) is int
    before = data(wire_json(event))
    before.media_type = EVENT_MEDIA_TYPE
    for part in (now, before):
        task = Task(id="t", context_id="c", status=TaskStatus(message=message(Part(text="Permission"), part)))
        assert parked_request(task) == PERMISSION
    assert parked_request(Task(id="t", context_id="c", status=TaskStatus(message=message(Part(text="x"))))) is None
