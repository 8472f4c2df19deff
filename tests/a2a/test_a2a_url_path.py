"""Issue 26: ``a2a.url`` with a path (``http://host:port/a2a``, the README's form) is served at that path: the card
advertises it, and the client CLI — which follows the card — and raw calls reach every route with the path as with
it stripped (a reverse proxy may do either). A real daemon on a fixed loopback port, the real CLI."""

from __future__ import annotations

import subprocess
from typing import Any

import httpx
import pytest
from a2a_helpers import ANYAGENTD
from test_a2a_child_reports import free_port

pytestmark = pytest.mark.timeout(120)

OP = "op-token-url-path"


def test_a_path_in_the_public_url_is_served_with_and_without_it(a2a_daemon: Any) -> None:
    port = free_port()
    public = f"http://127.0.0.1:{port}/a2a"
    config = f'[a2a]\nbearer = "{{{{secret:OP}}}}"\nurl = "{public}"\n[a2a.device_grant]\nenabled = true\n'
    daemon = a2a_daemon(config=config, env={"OP": OP}, mock="hello", listen=f"127.0.0.1:{port}")
    root = f"http://127.0.0.1:{port}"
    card = httpx.get(f"{public}/.well-known/agent-card.json", timeout=30).json()
    assert card["supportedInterfaces"][0]["url"] == public, card
    assert httpx.get(f"{root}/.well-known/agent-card.json", timeout=30).json() == card  # a proxy that strips it
    schema = next(p for e in card["capabilities"]["extensions"] for p in [e.get("params", {})] if "schema" in p)
    assert httpx.get(schema["schema"], timeout=30).status_code == 200, schema  # the schema URL the card names
    for base in (public, root):
        assert httpx.get(f"{base}/healthz", timeout=30).status_code == 200
        assert httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {OP}"}, timeout=30).status_code == 200
        assert (
            httpx.post(
                f"{base}/oauth2/device_authorization", data={"client_id": "c", "scope": "user"}, timeout=30
            ).status_code
            == 200
        )
    assert httpx.get(f"{root}/a2afoo/healthz", timeout=30).status_code == 404  # only the path itself is stripped
    sent = subprocess.run(
        [ANYAGENTD, "a2a", "send", root, "hi", "--token", OP], capture_output=True, text=True, timeout=60
    )
    assert sent.returncode == 0, sent.stderr
    sent = subprocess.run(
        [ANYAGENTD, "a2a", "send", public, "hi", "--token", OP], capture_output=True, text=True, timeout=60
    )
    assert sent.returncode == 0, sent.stderr
    listed = daemon.rpc("ListTasks", {}, token=OP).json()["result"]["tasks"]
    assert len(listed) == 2 and {t["status"]["state"] for t in listed} == {"TASK_STATE_COMPLETED"}


def test_the_agents_paths_are_served_under_the_public_urls_path(a2a_daemon: Any, tmp_path: Any) -> None:
    """Issue 27: with ``a2a.url`` naming a path, every agent's card, listing and endpoint are under it; the cards'
    interfaces and the device grant's URLs name the daemon's public URL, with its path."""
    port = free_port()
    public = f"http://127.0.0.1:{port}/a2a"
    config = (
        f'[a2a]\nbearer = "{{{{secret:OP}}}}"\nurl = "{public}"\n[a2a.device_grant]\nenabled = true\n'
        '[[agents]]\nid = "a"\nname = "mock"\nmock_script = "hello"\n'
        '[[agents]]\nid = "b"\nname = "mock"\nmock_script = "hello"\n'
    )
    a2a_daemon(config=config, env={"OP": OP}, listen=f"127.0.0.1:{port}")
    listing = httpx.get(f"{public}/agents", timeout=30).json()
    assert [r["url"] for r in listing["agents"]] == [f"{public}/agents/a", f"{public}/agents/b"]
    card = httpx.get(listing["agents"][1]["card"], timeout=30).json()
    assert card["supportedInterfaces"][0]["url"] == f"{public}/agents/b"
    flows = card["securitySchemes"]["device"]["oauth2SecurityScheme"]["flows"]["deviceCode"]
    assert flows["tokenUrl"] == f"{public}/oauth2/token"  # the daemon's route, not the agent's path
    sent = subprocess.run(
        [ANYAGENTD, "a2a", "send", public, "hi", "--agent", "b", "--token", OP],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sent.returncode == 0, sent.stderr
    assert "Hello! I am the scripted agent." in sent.stdout
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    headers = {"Authorization": f"Bearer {OP}", "A2A-Version": "1.0"}
    on_b = httpx.post(f"{public}/agents/b/", json=body, headers=headers, timeout=30).json()["result"]["tasks"]
    on_a = httpx.post(f"{public}/agents/a", json=body, headers=headers, timeout=30).json()["result"].get("tasks", [])
    assert len(on_b) == 1 and on_a == []
