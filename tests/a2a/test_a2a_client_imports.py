"""The client (``anyagentd a2a login|send|status|op|tasks|runs``) loads what a client needs and nothing of the
daemon's: no SQLAlchemy (the device grant's store), no op machinery (``anyagentd.ops``), no event model
(``anyagentd.model``). Each of those cost a CLI call about 0.1 s of CPU (measured: 0.73 s → 0.40 s user+sys for
``anyagentd a2a status`` of a closed port), and the suite makes hundreds of such calls."""

from __future__ import annotations

import subprocess
import sys

DAEMON_ONLY = ("sqlalchemy", "anyagentd.ops", "anyagentd.model", "anyagentd_a2a.auth.sessions", "uvicorn")


def test_the_client_and_its_cli_load_none_of_the_daemons_modules() -> None:
    code = (
        "import sys, anyagentd_a2a.client, anyagentd_a2a.cli, a2a.client; "
        f"print(sorted(m for m in {DAEMON_ONLY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_clients_constants_are_the_extensions_and_the_grants() -> None:
    from anyagentd_a2a.auth.device import GRANT_TYPE
    from anyagentd_a2a.client import COMMAND_URI, DATA_PART_KEY, RESULT_MEDIA_TYPE
    from anyagentd_a2a.command import envelope

    assert (COMMAND_URI, DATA_PART_KEY, RESULT_MEDIA_TYPE) == (
        envelope.COMMAND_URI,
        envelope.DATA_PART_KEY,
        envelope.RESULT_MEDIA_TYPE,
    )
    assert GRANT_TYPE == "urn:ietf:params:oauth:grant-type:device_code"  # RFC 8628 §3.4
