"""The adapter link alone: ``AdapterLink.emit`` of one ``TextDelta`` and the engine side's ``receive_nowait``, per
event, the way a flood uses them (256 emits, then the reader drains the 256-report channel).

``.venv/bin/python bench/bench_link.py [--events N]`` prints the CPU time per event (best of 5 rounds). Run it with
another tree first on ``PYTHONPATH`` (and that tree's venv) for a before/after pair. Asserts nothing.
"""

from __future__ import annotations

import argparse
import time

import anyio

from anyagentd.adapters.interface import AdapterLink
from anyagentd.model import TextDelta

BUFFER = 256  # the engine's default report channel size (EngineSettings.adapter_buffer; 64 before issue 31)


async def _rounds(events: int) -> float:
    send, receive = anyio.create_memory_object_stream(BUFFER)
    link = AdapterLink(send, lambda *args: None)
    kind = TextDelta(message_id="m", text="x")
    bursts = events // BUFFER
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(bursts):
            for _ in range(BUFFER):
                await link.emit(kind)
            while True:
                try:
                    receive.receive_nowait()
                except anyio.WouldBlock:
                    break
        best = min(best, time.process_time() - start)
    return best / (bursts * BUFFER)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args()
    per_event = anyio.run(_rounds, args.events)
    print(
        f"AdapterLink.emit + receive_nowait: {per_event * 1e9:.0f} ns per event (CPU, best of 5 rounds of "
        f"{args.events // BUFFER * BUFFER:,})"
    )


if __name__ == "__main__":
    main()
