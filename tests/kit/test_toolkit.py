"""The adapter toolkit in core (``anyagentd.adapters.attachments``, ``anyagentd.adapters.connection``): what the
adapters compose instead of copying."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import anyio
import pytest

from anyagentd.adapters.attachments import IMAGE_TYPES, MAX_IMAGE_BYTES, classify
from anyagentd.adapters.connection import ProcessConnection, short_lived
from anyagentd.adapters.interface import AdapterLink, Exited
from anyagentd.adapters.process import AgentProcess

pytestmark = pytest.mark.timeout(30)


def test_classify_images_urls_and_mentions(tmp_path: Path) -> None:
    png = tmp_path / "a.png"
    png.write_bytes(b"\x89PNG")
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    items = [str(png), str(notes), "https://x.test/cat.jpg?size=2", "https://x.test/page", str(tmp_path / "gone.png")]
    kinds = [(a.kind, a.media) for a in classify(items)]
    assert kinds == [
        ("image_file", "image/png"),
        ("mention", "text/plain"),
        ("image_url", "image/jpeg"),
        ("mention", None),
        ("mention", "image/png"),
    ]
    assert classify([str(png)])[0].base64_data() == base64.b64encode(b"\x89PNG").decode()
    assert "image/webp" in IMAGE_TYPES


def test_inline_data_is_none_for_what_cannot_be_inlined(tmp_path: Path) -> None:
    png = tmp_path / "a.png"
    png.write_bytes(b"\x89PNG")
    image = classify([str(png)])[0]
    assert image.inline_data() == base64.b64encode(b"\x89PNG").decode()
    png.unlink()  # gone between classification and rendering: mentioned instead
    assert image.inline_data() is None
    assert classify(["https://x.test/a.png"])[0].inline_data() is None


def test_classify_by_what_the_agent_takes(tmp_path: Path) -> None:
    png = tmp_path / "a.png"
    png.write_bytes(b"\x89PNG")
    assert [a.kind for a in classify([str(png), "https://x.test/a.png"], images=False)] == ["mention", "mention"]
    assert classify(["https://x.test/a.png"], image_urls=False)[0].kind == "mention"
    assert classify([png.as_uri()])[0].kind == "mention" and classify([png.as_uri()])[0].is_url
    big = tmp_path / "big.png"
    with open(big, "wb") as fh:
        fh.truncate(MAX_IMAGE_BYTES + 1)
    assert classify([str(big)])[0].kind == "mention"
    assert classify([str(big)], max_image_bytes=None)[0].kind == "image_file"


ECHO = "import sys\nfor line in sys.stdin:\n    print(line.strip(), flush=True)\n"


class Echo(ProcessConnection):
    """A connection to a line-echoing python: the smallest ProcessConnection."""

    async def start_turn(self, turn_id, prompt):  # type: ignore[no-untyped-def]
        await self.process.write_line(prompt.text)

    async def answer(self, request_id, answer):  # type: ignore[no-untyped-def]
        pass

    async def cancel(self) -> None:
        pass

    async def pump(self) -> None:
        try:
            async for _ in self.process.lines():
                pass
        finally:
            await self.output_ended()


async def _echo(link: AdapterLink) -> Echo:
    conn = Echo(await AgentProcess.start([sys.executable, "-c", ECHO]), link)
    link.start_soon(conn.pump)
    return conn


@pytest.mark.anyio
async def test_the_end_of_the_output_is_reported_once_with_the_status_unless_closing() -> None:
    send, recv = anyio.create_memory_object_stream[object](16)
    async with anyio.create_task_group() as tg:
        conn = await _echo(AdapterLink(send, tg.start_soon))
        await conn.process.kill()
        with anyio.fail_after(5):
            report = await recv.receive()
        assert report == Exited("signal: 9 (SIGKILL)", "") and conn.output_done
        assert conn.exit_status == "signal: 9 (SIGKILL)"

        closing = await _echo(AdapterLink(send, tg.start_soon))
        await closing.close()
        with anyio.fail_after(5):
            await closing.wait_output_done()
        await anyio.sleep(0.1)
        assert closing.closing and closing.exit_status is not None
        with pytest.raises(anyio.WouldBlock):
            recv.receive_nowait()  # a close is no news


@pytest.mark.anyio
async def test_short_lived_stops_the_process_and_raises_the_body_error_as_itself() -> None:
    seen: list[Echo] = []

    async def body(conn: Echo) -> str:
        seen.append(conn)
        return "answer"

    assert await short_lived(_echo, body) == "answer"
    assert seen[0].closing and seen[0].process.returncode is not None

    async def failing(conn: Echo) -> str:
        seen.append(conn)
        raise LookupError("from the body")

    with pytest.raises(LookupError, match="from the body"):
        await short_lived(_echo, failing)
    assert seen[1].process.returncode is not None


@pytest.mark.anyio
async def test_writing_to_an_agent_whose_input_is_closed_is_input_closed() -> None:
    from anyagentd.adapters.process import InputClosed

    process = await AgentProcess.start([sys.executable, "-c", "import sys; sys.stdin.close()"])
    await process.wait()
    with pytest.raises(InputClosed):
        for _ in range(100):  # the pipe breaks at the first write the closed end refuses
            await process.write_line("x" * 65536)
    await process.close_stdin()
    with pytest.raises(InputClosed):
        await process.write_line("after close")
    assert issubclass(InputClosed, ConnectionError)
    await process.kill()


@pytest.mark.anyio
async def test_a_handshake_that_runs_out_abandons_the_agent_with_handshake_timeout() -> None:
    from anyagentd.errors import HandshakeTimeout

    async with anyio.create_task_group() as tg:
        conn = await _echo(AdapterLink(anyio.create_memory_object_stream[object](16)[0], tg.start_soon))
        with pytest.raises(HandshakeTimeout, match="the echo's hello did not complete within 0.2 s"):
            await conn.complete_handshake(anyio.sleep_forever, 0.2, "the echo's hello")
        assert conn.closing and conn.process.returncode is not None
        with pytest.raises(LookupError):
            other = await _echo(AdapterLink(anyio.create_memory_object_stream[object](16)[0], tg.start_soon))

            async def failing() -> None:
                raise LookupError("refused")

            await other.complete_handshake(failing, 5, "x")
        assert other.process.returncode is not None
