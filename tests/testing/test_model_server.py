"""The scripted model server, driven through the official ``anthropic`` and ``openai`` SDKs and raw HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import anthropic
import httpx
import openai
import pytest

from anyagentd_testing.model_script import EXHAUSTED_TEXT, Script, minimal_instance
from anyagentd_testing.model_server import ModelServer

pytest_plugins = ("pytester",)

TOOLS = [
    {"name": "Write", "description": "write a file", "input_schema": {"type": "object"}},
    {"name": "Bash", "description": "run a command", "input_schema": {"type": "object"}},
]
RESPONSES_TOOLS = [
    {
        "type": "function",
        "name": "exec_command",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
    {"type": "custom", "name": "apply_patch", "description": "freeform patch"},
]
LONG_TEXT = "Hello there: this reply is long enough to be streamed as several text deltas, not one."


def claude(srv: ModelServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=srv.url, api_key="sk-ant-test", max_retries=0)


def codex(srv: ModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.url + "/v1", api_key="sk-test", max_retries=0)


def user(text: str = "hi") -> dict:
    return {"role": "user", "content": text}


# -- Anthropic Messages ------------------------------------------------------------------------------


def test_anthropic_streaming_text(model_server):
    srv = model_server({"turns": [{"text": LONG_TEXT, "usage": {"input_tokens": 7, "output_tokens": 3}}]})
    with claude(srv).messages.stream(model="claude-test", max_tokens=1000, tools=TOOLS, messages=[user()]) as stream:
        deltas = [e.delta.text for e in stream if e.type == "content_block_delta"]
        message = stream.get_final_message()
    assert len(deltas) > 1 and "".join(deltas) == LONG_TEXT
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == LONG_TEXT
    assert message.stop_reason == "end_turn"
    assert message.model == "claude-test"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (7, 3)


def test_anthropic_non_streaming_text(model_server):
    srv = model_server({"turns": [{"text": "plain reply"}]})
    message = claude(srv).messages.create(model="claude-test", max_tokens=1000, tools=TOOLS, messages=[user()])
    assert message.content[0].text == "plain reply"
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens > 0
    assert srv.requests[0]["stream"] is False


def test_anthropic_thinking_and_tool_use(model_server):
    tool_input = {
        "file_path": "{{cwd}}/hello.txt",
        "content": 'héllo\n"quoted"\n',
        "nested": {"n": [1, 2.5, None, True]},
    }
    srv = model_server(
        {
            "turns": [
                {
                    "thinking": "I should write the file now.",
                    "text": "Writing.",
                    "tools": [{"name": "Write", "input": tool_input}],
                }
            ]
        }
    )
    system = "You are Claude Code.\n - Primary working directory: /work/proj\n - Is a git repository: false"
    with claude(srv).messages.stream(
        model="claude-test", max_tokens=1000, system=system, tools=TOOLS, messages=[user()]
    ) as stream:
        raw_deltas = [e.delta.type for e in stream if e.type == "content_block_delta"]
        message = stream.get_final_message()
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    thinking, text, tool = message.content
    assert thinking.thinking == "I should write the file now." and thinking.signature
    assert text.text == "Writing."
    assert tool.name == "Write"
    assert tool.input == {**tool_input, "file_path": "/work/proj/hello.txt"}
    assert tool.id.startswith("toolu_")
    assert message.stop_reason == "tool_use"
    assert raw_deltas.count("input_json_delta") > 1 and "signature_delta" in raw_deltas
    assert srv.requests[0]["cwd"] == "/work/proj"


def test_anthropic_count_tokens(model_server):
    srv = model_server({"turns": [{"text": "unused"}]})
    counted = claude(srv).messages.count_tokens(model="claude-test", tools=TOOLS, messages=[user("count me")])
    assert counted.input_tokens > 0
    (entry,) = srv.requests
    assert (entry["kind"], entry["path"], entry["turn"]) == ("count_tokens", "/v1/messages/count_tokens", None)


def test_anthropic_error_turn_returns_its_status_on_every_retry(model_server):
    srv = model_server({"turns": [{"error": {"status": 529, "type": "overloaded_error", "message": "busy now"}}]})
    for _ in range(2):
        with pytest.raises(anthropic.APIStatusError) as caught:
            claude(srv).messages.create(model="claude-test", max_tokens=100, tools=TOOLS, messages=[user()])
        assert caught.value.status_code == 529
        assert caught.value.body == {"type": "error", "error": {"type": "overloaded_error", "message": "busy now"}}
    assert [r["turn"] for r in srv.main_requests()] == [0, 0]


def test_error_times_then_the_rest_of_the_turn(model_server):
    srv = model_server({"turns": [{"error": {"status": 400, "times": 1}, "text": "second try works"}]})
    client = claude(srv)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="claude-test", max_tokens=100, tools=TOOLS, messages=[user()])
    assert caught.value.body["error"] == {"type": "invalid_request_error", "message": "scripted failure"}
    message = client.messages.create(model="claude-test", max_tokens=100, tools=TOOLS, messages=[user()])
    assert message.content[0].text == "second try works"


def test_turn_is_chosen_by_history_and_retries_get_the_same_turn(model_server):
    srv = model_server({"turns": [{"text": "first"}, {"text": "second"}, {"text": "third"}]})
    # Claude Code puts role "system" messages among the messages: they are not model replies.
    body = {
        "model": "claude-test",
        "max_tokens": 1000,
        "tools": TOOLS,
        "messages": [
            user("a"),
            {"role": "system", "content": "agent list"},
            {"role": "assistant", "content": "x"},
            user("b"),
        ],
    }
    url = srv.url + "/v1/messages?beta=true"
    replies = [httpx.post(url, json=body).json()["content"][0]["text"] for _ in range(2)]
    assert replies == ["second", "second"]
    body["messages"] += [
        {"role": "assistant", "content": "y"},
        user("c"),
        {"role": "assistant", "content": "z"},
        user("d"),
    ]
    assert httpx.post(url, json=body).json()["content"][0]["text"] == EXHAUSTED_TEXT
    assert [r["turn"] for r in srv.requests] == [1, 1, 3]
    assert srv.requests[0]["path"] == "/v1/messages?beta=true"


def test_side_requests_do_not_consume_the_script(model_server):
    srv = model_server({"turns": [{"text": "the main reply"}], "side_reply": "side!"})
    client = claude(srv)
    no_tools = client.messages.create(model="claude-test", max_tokens=1000, messages=[user()])
    quota = client.messages.create(model="claude-test", max_tokens=1, tools=TOOLS, messages=[user()])
    forced = client.messages.create(
        model="claude-haiku",
        max_tokens=1000,
        tools=[
            {
                "name": "pick",
                "input_schema": {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]},
            }
        ],
        tool_choice={"type": "tool", "name": "pick"},
        messages=[user()],
    )
    main = client.messages.create(model="claude-test", max_tokens=1000, tools=TOOLS, messages=[user()])
    assert no_tools.content[0].text == "side!"
    assert quota.content[0].text == "side!"
    assert forced.content[0].type == "tool_use" and forced.content[0].input == {"label": "side!"}
    assert main.content[0].text == "the main reply"
    assert [(r["kind"], r["reason"]) for r in srv.side_requests()] == [
        ("side", "no tools"),
        ("side", "max_tokens=1"),
        ("side", "forced single tool"),
    ]
    assert [r["turn"] for r in srv.main_requests()] == [0]


def test_json_schema_side_reply(model_server):
    srv = model_server({"turns": []})
    title_schema = {
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "required": ["title"],
        "additionalProperties": False,
    }
    body = {
        "model": "claude-test",
        "max_tokens": 1000,
        "tools": [],
        "thinking": {"type": "disabled"},
        "system": "Generate a concise, sentence-case title",
        "output_config": {"format": {"type": "json_schema", "schema": title_schema}},
        "messages": [user("<session>make a file</session>")],
    }
    reply = httpx.post(srv.url + "/v1/messages", json=body).json()
    assert json.loads(reply["content"][0]["text"]) == {"title": "ok"}
    response = codex(srv).responses.create(
        model="gpt-5.5",
        input="name it",
        text={"format": {"type": "json_schema", "name": "t", "schema": title_schema, "strict": True}},
    )
    assert json.loads(response.output_text) == {"title": "ok"}
    assert [r["kind"] for r in srv.requests] == ["side", "side"]


def test_request_log_in_memory_and_jsonl(model_server, tmp_path):
    log = tmp_path / "requests.jsonl"
    srv = model_server({"turns": [{"text": "logged"}]}, log_path=log)
    claude(srv).messages.create(model="claude-test", max_tokens=10_000, tools=TOOLS, messages=[user("log me")])
    httpx.get(srv.url + "/v1/models")
    first, models = srv.requests
    assert first["seq"] == 1 and models["seq"] == 2
    assert first["method"] == "POST" and first["path"] == "/v1/messages"
    assert (first["api"], first["kind"], first["turn"], first["model"], first["stream"]) == (
        "anthropic",
        "main",
        0,
        "claude-test",
        False,
    )
    assert first["body"]["messages"] == [user("log me")]
    assert first["reply"] == {"text": "logged"}
    secret = first["headers"].get("x-api-key") or first["headers"]["authorization"]
    assert secret.endswith("…") and "sk-ant-test" not in json.dumps(first["headers"])
    assert first["headers"]["content-type"] == "application/json"
    assert isinstance(first["ts"], float)
    assert (models["api"], models["kind"]) == ("models", "models")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["seq"] for line in lines] == [1, 2]
    assert lines[0]["body"] == first["body"]


def test_models_list(model_server):
    srv = model_server()
    listed = codex(srv).models.list()
    assert "gpt-5.5" in [m.id for m in listed.data]
    assert httpx.get(srv.url + "/v1/models/claude-x").json()["id"] == "claude-x"


# -- OpenAI Responses --------------------------------------------------------------------------------


def test_responses_stream_text_and_function_call(model_server):
    srv = model_server(
        {
            "turns": [
                {
                    "thinking": "Plan: run it.",
                    "text": LONG_TEXT,
                    "tool": {"name": "exec_command", "input": {"cmd": "echo hi > {{cwd}}/out.txt"}},
                    "usage": {"input_tokens": 100, "cached_tokens": 40, "output_tokens": 9, "reasoning_tokens": 2},
                }
            ]
        }
    )
    context = "<environment_context>\n  <cwd>/home/u/proj</cwd>\n  <shell>bash</shell>\n</environment_context>"
    with codex(srv).responses.stream(
        model="gpt-5.5", input=[{"role": "user", "content": context}, user("run it")], tools=RESPONSES_TOOLS
    ) as stream:
        types = [event.type for event in stream]
        response = stream.get_final_response()
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
    assert types.count("response.output_text.delta") > 1
    assert "response.reasoning_summary_text.delta" in types and "response.function_call_arguments.done" in types
    reasoning, message, call = response.output
    assert reasoning.type == "reasoning" and reasoning.summary[0].text == "Plan: run it."
    assert message.type == "message" and message.content[0].text == LONG_TEXT
    assert call.type == "function_call" and call.name == "exec_command"
    assert json.loads(call.arguments) == {"cmd": "echo hi > /home/u/proj/out.txt"}
    usage = response.usage
    assert (usage.input_tokens, usage.input_tokens_details.cached_tokens) == (100, 40)
    assert (usage.output_tokens, usage.output_tokens_details.reasoning_tokens, usage.total_tokens) == (9, 2, 109)
    assert srv.requests[0]["cwd"] == "/home/u/proj"


def test_responses_custom_tool_call_with_history(model_server):
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch\n"
    srv = model_server(
        {"turns": [{"text": "one"}, {"tool": {"name": "apply_patch", "input": patch}}, {"text": "three"}]}
    )
    history = [
        user("go"),
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "one"}]},
        {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
    ]
    events = list(codex(srv).responses.create(model="gpt-5.5", input=history, tools=RESPONSES_TOOLS, stream=True))
    deltas = [e.delta for e in events if e.type == "response.custom_tool_call_input.delta"]
    done = [e for e in events if e.type == "response.output_item.done"]
    assert len(deltas) > 1 and "".join(deltas) == patch
    assert [e.item.type for e in done] == ["custom_tool_call"]
    assert done[0].item.name == "apply_patch" and done[0].item.input == patch
    completed = events[-1]
    assert completed.type == "response.completed" and completed.response.output[0].input == patch
    assert [e.sequence_number for e in events] == list(range(len(events)))
    history += [
        done[0].item.model_dump(),
        {"type": "custom_tool_call_output", "call_id": done[0].item.call_id, "output": "ok"},
    ]
    final = codex(srv).responses.create(model="gpt-5.5", input=history, tools=RESPONSES_TOOLS)
    assert final.output_text == "three"
    assert [r["turn"] for r in srv.requests] == [1, 2]


def test_responses_error_turn(model_server):
    srv = model_server({"turns": [{"error": {"status": 400, "message": "bad scripted request"}}]})
    with pytest.raises(openai.BadRequestError) as caught:
        codex(srv).responses.create(model="gpt-5.5", input="hi", tools=RESPONSES_TOOLS)
    assert caught.value.status_code == 400
    assert caught.value.body["message"] == "bad scripted request"


def test_responses_codex_request_kind_other_than_turn_is_side(model_server):
    srv = model_server({"turns": [{"text": "main"}]})
    metadata = {"x-codex-turn-metadata": json.dumps({"request_kind": "compact"})}
    response = codex(srv).responses.create(model="gpt-5.5", input="hi", tools=RESPONSES_TOOLS, extra_headers=metadata)
    assert response.output_text == "ok"
    assert srv.requests[0]["reason"] == "request_kind=compact"


# -- timing, robustness ------------------------------------------------------------------------------


def test_delay_does_not_block_other_requests(model_server):
    srv = model_server({"turns": [{"text": "slow", "delay": 1.5}]})
    slow: dict = {}

    def call_slow():
        started = time.monotonic()
        slow["text"] = (
            claude(srv).messages.create(model="m", max_tokens=100, tools=TOOLS, messages=[user()]).content[0].text
        )
        slow["took"] = time.monotonic() - started

    thread = threading.Thread(target=call_slow)
    thread.start()
    srv.wait_for_requests(1, timeout=5)
    started = time.monotonic()
    side = claude(srv).messages.create(model="m", max_tokens=100, messages=[user()])
    fast_took = time.monotonic() - started
    thread.join(10)
    assert side.content[0].text == "ok" and fast_took < 0.5
    assert slow["text"] == "slow" and slow["took"] >= 1.4


def test_client_disconnecting_mid_stream_does_not_break_the_server(model_server):
    srv = model_server({"turns": [{"text": LONG_TEXT * 4, "chunk_delay": 0.05}]})
    body = {"model": "m", "max_tokens": 100, "tools": TOOLS, "messages": [user()], "stream": True}
    with httpx.stream("POST", srv.url + "/v1/messages", json=body) as response:
        first = next(response.iter_bytes())
    assert first.startswith(b"event: message_start")
    time.sleep(0.3)  # the server keeps writing into the closed connection meanwhile
    again = claude(srv).messages.create(model="m", max_tokens=100, tools=TOOLS, messages=[user()])
    assert again.content[0].text == LONG_TEXT * 4


def test_exhausted_script(model_server):
    srv = model_server()
    message = claude(srv).messages.create(model="m", max_tokens=100, tools=TOOLS, messages=[user()])
    assert message.content[0].text == EXHAUSTED_TEXT and message.stop_reason == "end_turn"
    assert srv.requests[0]["reason"].startswith("script exhausted")


def test_works_from_async_code(tmp_path):
    async def main() -> str:
        async with ModelServer({"turns": [{"text": "async hello"}]}) as srv:
            client = anthropic.AsyncAnthropic(base_url=srv.url, api_key="k", max_retries=0)
            message = await client.messages.create(model="m", max_tokens=100, tools=TOOLS, messages=[user()])
            return message.content[0].text

    assert asyncio.run(main()) == "async hello"


def test_start_stop_and_restart():
    srv = ModelServer({"turns": [{"text": "x"}]})
    with pytest.raises(RuntimeError):
        srv.url  # noqa: B018 - no port before start
    with srv:
        assert srv.running and httpx.get(srv.url + "/").status_code == 200
        port = srv.port
    assert not srv.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/")


# -- script format -----------------------------------------------------------------------------------


def test_script_loading_and_validation(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": [{"tool": {"name": "Bash", "input": {"command": "ls"}}}], "side_reply": "s"}))
    for source in (path, str(path), path.read_text(), json.loads(path.read_text())):
        script = Script.load(source)
        assert script.side_reply == "s" and script.turns[0].tools[0].name == "Bash"
    for bad in (
        {"turns": [{"txt": "typo"}]},
        {"turns": [{}]},
        {"turns": [{"error": {"status": 200}}]},
        {"turn": []},
        {"turns": [{"error": {"status": 500, "times": 1}}]},
    ):
        with pytest.raises(ValueError):
            Script.load(bad)


def test_minimal_instance():
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "count": {"type": "integer", "minimum": 3},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "kind": {"enum": ["a", "b"]},
            "ref": {"$ref": "#/$defs/flag"},
            "maybe": {"anyOf": [{"type": "null"}, {"type": "number"}]},
            "optional": {"type": "string"},
        },
        "required": ["title", "count", "tags", "kind", "ref", "maybe"],
        "$defs": {"flag": {"type": "boolean"}},
    }
    assert minimal_instance(schema, "x") == {
        "title": "x",
        "count": 3,
        "tags": ["x"],
        "kind": "a",
        "ref": False,
        "maybe": 0,
    }
    assert minimal_instance({"properties": {"title": {"type": "string"}}}) == {"title": "ok"}


# -- CLI and pytest plugin ---------------------------------------------------------------------------


def test_cli_serves_until_interrupted(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "from the cli"}]}))
    log = tmp_path / "log.jsonl"
    code = "from anyagentd_testing.cli import model_server; model_server()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "--script", str(script), "--log", str(log)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
        # SIGINT as a terminal gives it: a test run started in the background (nohup …&) ignores SIGINT, and a
        # child inherits that, so Python would install no KeyboardInterrupt handler and the CLI would never stop
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        printed = ""
        while "Ctrl-C" not in printed:
            line = proc.stderr.readline()
            assert line, f"the CLI exited early: {printed}"
            printed += line
        url = re.search(r"http://127\.0\.0\.1:\d+", printed).group(0)
        assert f"ANTHROPIC_BASE_URL={url}" in printed
        assert f"model_providers.mock.base_url={url}/v1" in printed
        reply = httpx.post(
            url + "/v1/messages", json={"model": "m", "max_tokens": 99, "tools": TOOLS, "messages": [user()]}
        )
        assert reply.json()["content"][0]["text"] == "from the cli"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0  # a bound, not a measure: a loaded machine can take its time to stop
    finally:
        proc.kill()
        proc.wait()
    assert json.loads(log.read_text())["kind"] == "main"


def test_cli_rejects_a_bad_script(tmp_path):
    from click.testing import CliRunner

    from anyagentd_testing.cli import model_server

    script = tmp_path / "bad.json"
    script.write_text(json.dumps({"turns": [{"nope": 1}]}))
    result = CliRunner().invoke(model_server, ["--script", str(script)])
    assert result.exit_code == 2 and "unknown keys" in result.output


def test_plugin_reports_requests_of_a_failing_test(pytester):
    pytester.makepyfile(
        """
        import httpx

        def test_fails(model_server):
            srv = model_server({"turns": [{"text": "scripted hello"}]})
            messages = [{"role": "user", "content": "hi"}]
            body = {"model": "m", "max_tokens": 99, "tools": [{"name": "t"}], "messages": messages}
            httpx.post(srv.url + "/v1/messages", json=body)
            assert False
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*model server requests*", "*#1 POST /v1/messages main turn=0*scripted hello*"])


def test_stop_cuts_a_delayed_reply_short():
    srv = ModelServer({"turns": [{"text": "never", "delay": 30}]}).start()
    got: dict = {}

    def call():
        got["status"] = httpx.post(
            srv.url + "/v1/messages",
            json={"model": "m", "max_tokens": 99, "tools": TOOLS, "messages": [user()]},
            timeout=10,
        ).status_code

    thread = threading.Thread(target=call)
    thread.start()
    srv.wait_for_requests(1)
    started = time.monotonic()
    srv.stop()
    thread.join(5)
    assert time.monotonic() - started < 1.0 and got["status"] == 503


# -- text no UTF-8 encoder takes ---------------------------------------------------------------------

LONE = "half \ud83d of a pair"


def _sse_data(body: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("stream", [True, False])
def test_a_lone_surrogate_is_sent_as_its_json_escape(model_server, tmp_path, stream):
    # What a buggy upstream sends: valid JSON syntax, "\ud83d" on its own. Every reply and the request log survive.
    log = tmp_path / "requests.jsonl"
    srv = model_server({"turns": [{"text": LONE}, {"text": LONE}]}, log_path=log)
    body = {"model": "claude-test", "max_tokens": 100, "messages": [user()], "stream": stream, "tools": TOOLS}
    reply = httpx.post(srv.url + "/v1/messages", json=body, headers={"x-api-key": "k"}, timeout=10)
    assert reply.status_code == 200, reply.text
    assert b"\\ud83d" in reply.content
    if stream:
        deltas = [e["delta"] for e in _sse_data(reply.content) if e["type"] == "content_block_delta"]
        text = "".join(delta.get("text", "") for delta in deltas)
    else:
        text = "".join(b["text"] for b in reply.json()["content"] if b["type"] == "text")
    assert text == LONE
    body = {"model": "gpt-test", "input": "hi", "stream": stream, "tools": RESPONSES_TOOLS}
    reply = httpx.post(srv.url + "/v1/responses", json=body, headers={"authorization": "Bearer k"}, timeout=10)
    assert reply.status_code == 200, reply.text
    assert b"\\ud83d" in reply.content
    assert len(srv.requests) == 2
    assert len(log.read_text().splitlines()) == 2


def test_cli_writes_env_and_url_files_ready_for_a_shell(tmp_path):
    """--env-out and --url-out appear once the server listens; sourcing the env file gives every variable."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "sourced"}]}))
    env_file, url_file = tmp_path / "model.env", tmp_path / "url"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "anyagentd.cli",
            "model-server",
            "--script",
            str(script),
            "--env-out",
            str(env_file),
            "--url-out",
            str(url_file),
            "--print-env",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        printed = [proc.stdout.readline() for _ in range(3)]
        assert all(line.startswith("export ") for line in printed)
        url = url_file.read_text().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        shown = subprocess.run(["bash", "-c", f". {env_file} && env"], capture_output=True, text=True, check=True)
        values = dict(line.split("=", 1) for line in shown.stdout.splitlines() if "=" in line)
        assert values["ANYAGENTD_MODEL_SERVER_URL"] == url and values["ANTHROPIC_BASE_URL"] == url
        assert values["ANTHROPIC_API_KEY"] == "sk-ant-mock" and values["MOCK_API_KEY"] == "sk-mock"
        assert f"model_providers.mock.base_url={url}/v1" in values["ANYAGENTD_CODEX_ARGS"]
        acp = values["ANYAGENTD_CODEX_ACP_ARGS"]
        assert acp.endswith("-c approval_policy=untrusted -c sandbox_mode=workspace-write")
        assert values["ANYAGENTD_CODEX_ACP_ARGS"].startswith(values["ANYAGENTD_CODEX_ARGS"])
        assert "codex-resources" in values["PATH"].split(":")[0]  # Codex's bwrap first on PATH
        opencode = json.loads(values["OPENCODE_CONFIG_CONTENT"])
        assert opencode["provider"]["anthropic"]["options"]["baseURL"] == url + "/v1"
        reply = httpx.post(
            url + "/v1/messages", json={"model": "m", "max_tokens": 99, "tools": TOOLS, "messages": [user()]}
        )
        assert reply.json()["content"][0]["text"] == "sourced"
    finally:
        proc.kill()
        proc.wait()


def test_cli_detach_serves_in_the_background(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "detached"}]}))
    shell = subprocess.run(
        [
            "bash",
            "-c",
            f'eval "$({sys.executable} -m anyagentd.cli model-server --script {script} --detach)" && '
            'echo "$ANYAGENTD_MODEL_SERVER_URL $ANYAGENTD_MODEL_SERVER_PID"',
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shell.returncode == 0, shell.stderr
    url, pid = shell.stdout.split()
    try:
        reply = httpx.post(
            url + "/v1/messages", json={"model": "m", "max_tokens": 99, "tools": TOOLS, "messages": [user()]}
        )
        assert reply.json()["content"][0]["text"] == "detached"
    finally:
        os.kill(int(pid), signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not _alive(int(pid)):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the detached server did not stop")


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs. An exited process this one has become the reaper of (anyagentd makes the test
    process a child subreaper once it has driven an agent) is a zombie until reaped: reap it, it has stopped."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    if state == "Z":
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return True
