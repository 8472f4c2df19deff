"""``[a2a.tls]`` files are checked with the configuration (``config.check_tls``), against the real ``anyagentd a2a``
command: a cert or key that cannot be read, or a pair that is not one, is refused by ``--check-config`` and by a
start alike — one line naming the key, exit 2, no listener announced, no traceback — where before ``--check-config``
said ok and the start printed a 60-line traceback (or, with ``[[workflows]]``, nothing at all, never listening)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from a2a_helpers import ANYAGENTD, self_signed

WORKFLOW = '[[workflows]]\nname = "done"\n[workflows.steps.a]\nkind = "finish"\noutput = "x"\n'


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ANYAGENTD, "a2a", *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.mark.parametrize("workflows", ["", WORKFLOW], ids=["plain", "with-workflows"])
def test_tls_files_that_cannot_be_loaded_are_refused_by_check_and_start(tmp_path: Path, workflows: str) -> None:
    cert, key = self_signed(tmp_path)
    (tmp_path / "other").mkdir()
    other_cert, _ = self_signed(tmp_path / "other")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    cases = [
        (tmp_path / "missing-cert.pem", key, "a2a.tls.cert", "No such file or directory"),
        (cert, tmp_path / "missing-key.pem", "a2a.tls.key", "No such file or directory"),
        (garbage, key, "a2a.tls", "not a PEM certificate chain"),
        (other_cert, key, "a2a.tls", "not a PEM certificate chain"),  # a key that is not the certificate's
    ]
    for n, (c, k, named, reason) in enumerate(cases):
        config = tmp_path / f"tls{n}.toml"
        config.write_text(f'[a2a.tls]\ncert = "{c}"\nkey = "{k}"\n' + workflows)
        checked = run_cli("--check-config", str(config))
        line = one_line(checked)
        assert checked.returncode == 2 and f"configuration error: {named}:" in line and reason in line, line
        started = run_cli("--config", str(config), "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path / "s"))
        assert started.returncode == 2 and started.stdout == "" and one_line(started) == line
    # the pair that is one passes the check
    config = tmp_path / "good.toml"
    config.write_text(f'[a2a.tls]\ncert = "{cert}"\nkey = "{key}"\n' + workflows)
    checked = run_cli("--check-config", str(config))
    assert checked.returncode == 0 and one_line(checked) == f"{config}: ok"
