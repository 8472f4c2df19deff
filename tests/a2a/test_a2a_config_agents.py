"""One daemon, many agents: the configuration (issue 27). ``[[agents]]`` tables beside ``[agent]``, the one-agent
shorthand (one entry, its id its ``id`` or its name made an id); each entry's ``id``, ``default``, ``description``,
``skills``, ``options`` and ``[agents.pool]``, every value strict and every unknown key refused naming it; both
forms given, an entry without an id, a bad or a duplicate id, two defaults are refused naming the key
(``anyagentd a2a --check-config`` prints each). ``agentspec`` derives the agents served (``agent_specs``,
``default_of``, ``slug``); ``Settings`` holds them and each agent's approval in force; a principal's ``agents``
say which agents it reaches; a SIGHUP names an agent's start-only change and applies its approval. Checked through
``parse`` and ``Settings`` in process, and ``--check-config`` as an operator runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_a2a_preflight import run_cli

from anyagentd_a2a.agentspec import AgentSpec, agent_specs, default_of, slug
from anyagentd_a2a.config import ConfigError, parse
from anyagentd_a2a.principals import OPERATOR, Identities
from anyagentd_a2a.reload import agent_changes
from anyagentd_a2a.settings import Options, Settings, agent_idle_close

ERROR = "anyagentd a2a: configuration error: "


def refused(data: dict[str, Any]) -> list[str]:
    """Every error ``parse`` names for ``data``, ``key: message`` each."""
    with pytest.raises(ConfigError) as err:
        parse(data, env={})
    return [str(each) for each in err.value.all]


def two(**b: Any) -> dict[str, Any]:
    """Two mock agents, ``a`` and ``b`` (``b``'s keys given)."""
    return {"agents": [{"id": "a"}, {"id": "b", **b}]}


# -- the shorthand and the entries -------------------------------------------------------------------------------


def test_the_shorthand_is_one_agent_with_its_name_as_id(tmp_path: Path) -> None:
    (specs,) = agent_specs(parse({}, env={}))
    assert (specs.id, specs.key, specs.ref, specs.label, specs.default) == ("mock", "agent", "mock", "mock", False)
    assert specs.dir == Path(".").resolve() and specs.model == "mock" and specs.max_live == 0
    (spec,) = agent_specs(parse({"agent": {"name": "claude", "dir": str(tmp_path)}}, env={}))
    assert (spec.id, spec.key, spec.dir) == ("claude", "agent", tmp_path.resolve())
    (spec,) = agent_specs(parse({"agent": {"id": "reviewer", "name": "claude"}}, env={}))
    assert spec.id == "reviewer" and spec.label == "claude"
    acp = {"acp": {"name": "Gemini CLI", "path": "/usr/bin/gemini", "args": ["--acp"]}}
    (spec,) = agent_specs(parse({"agent": {"name": acp}}, env={}))
    assert spec.id == "gemini-cli" and spec.ref == acp and spec.label == "Gemini CLI"
    assert parse({}, env={}).config.agents == []


def test_every_key_of_an_entry_is_read(tmp_path: Path) -> None:
    entry = {
        "id": "claude",
        "name": "claude",
        "dir": str(tmp_path),
        "approval": "auto",
        "mock_script": "hello",
        "default": True,
        "description": "Claude Code on the monorepo",
        "skills": [
            {"id": "review", "name": "Review", "description": "reviews a change", "tags": ["code"], "examples": ["x"]},
            {"id": "fix", "name": "Fix"},
        ],
        "options": {"model": "sonnet", "effort": 3, "temperature": 0.5, "thinking": True},
        "pool": {"max_live": 4, "idle_close": 300},
    }
    loaded = parse({"agents": [{"id": "codex-x", "name": "codex"}, entry]}, env={})
    first, second = agent_specs(loaded)
    assert (first.id, first.key, first.ref, first.default, first.options) == ("codex-x", "agents.0", "codex", False, {})
    assert first.max_live == 0 and first.idle_close is None and first.description is None and first.skills == ()
    assert second == AgentSpec(
        id="claude",
        key="agents.1",
        ref="claude",
        label="claude",
        dir=tmp_path.resolve(),
        mock_script="hello",
        options={"model": "sonnet", "effort": 3, "temperature": 0.5, "thinking": True},
        description="Claude Code on the monorepo",
        skills=tuple(loaded.config.agents[1].skills),
        max_live=4,
        idle_close=300.0,
        default=True,
        approval="auto",
    )
    review, fix = second.skills
    assert (review.id, review.name, review.description, review.tags, review.examples) == (
        "review",
        "Review",
        "reviews a change",
        ["code"],
        ["x"],
    )
    assert (fix.description, fix.tags, fix.examples) == ("", [], [])
    assert second.model == "sonnet" and first.model == "codex"
    assert default_of(agent_specs(loaded)) is not None and default_of(agent_specs(loaded)).id == "claude"
    assert [key for key, _ in loaded.config.entries()] == ["agents.0", "agents.1"]
    assert [key for key, _ in parse({}, env={}).config.entries()] == ["agent"]


def test_the_default_is_the_one_marked_else_the_first() -> None:
    assert default_of(agent_specs(parse(two(), env={}))).id == "a"
    assert default_of(agent_specs(parse(two(default=True), env={}))).id == "b"
    with pytest.raises(ValueError):
        default_of(())


def test_mock_on_the_command_line_is_every_agents_script() -> None:
    loaded = parse({"agents": [{"id": "a", "mock_script": "hello"}, {"id": "b"}]}, env={})
    assert [s.mock_script for s in agent_specs(loaded)] == ["hello", None]
    assert [s.mock_script for s in agent_specs(loaded, "permission")] == ["permission", "permission"]
    assert agent_specs(parse({"agent": {"mock_script": "hello"}}, env={}), "echo")[0].mock_script == "echo"


@pytest.mark.parametrize(
    ("label", "made"),
    [
        ("mock", "mock"),
        ("claude", "claude"),
        ("Gemini CLI", "gemini-cli"),
        ("  My_Agent!! v2 ", "my-agent-v2"),
        ("--x--", "x"),
        ("日本", "agent"),
        ("", "agent"),
        ("a" * 40, "a" * 32),
        ("a" * 31 + " b", "a" * 31),
    ],
)
def test_slug_makes_an_agent_id_of_a_name(label: str, made: str) -> None:
    assert slug(label) == made


def test_option_values_are_strings_numbers_or_booleans() -> None:
    loaded = parse(two(options={"model": "gpt-5", "n": 2, "t": 0.2, "on": False}), env={})
    assert agent_specs(loaded)[1].options == {"model": "gpt-5", "n": 2, "t": 0.2, "on": False}
    for value in (["x"], {"a": 1}):
        (line,) = refused(two(options={"model": value}))
        assert line.startswith("agents.1.options.model: Input should be a valid string"), line
    # an option that is no string is no model: the label is
    assert agent_specs(parse(two(options={"model": 5}), env={}))[1].model == "mock"


# -- what is refused ---------------------------------------------------------------------------------------------


def test_unknown_keys_of_an_entry_are_refused_naming_them() -> None:
    assert refused({"agents": [{"id": "a", "pool": {"max_rss_mb": 100}}, {"id": "b", "modle": "x"}]}) == [
        "agents.0.pool.max_rss_mb: unknown key",
        "agents.1.modle: unknown key",
    ]
    assert refused(two(skills=[{"id": "s", "name": "S", "tag": ["x"]}])) == ["agents.1.skills.0.tag: unknown key"]
    assert refused({"agent": {"pool": {"max_live": -1}}}) == [
        "agent.pool.max_live: Input should be greater than or equal to 0"
    ]


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (two(default="yes"), "agents.1.default: Input should be a valid boolean"),
        (two(pool={"max_live": "4"}), "agents.1.pool.max_live: Input should be a valid integer"),
        (two(pool={"idle_close": -1}), "agents.1.pool.idle_close: Input should be greater than or equal to 0"),
        (two(description=3), "agents.1.description: Input should be a valid string"),
        (two(skills=[{"id": "s"}]), "agents.1.skills.0.name: Field required"),
        (two(skills=[{"id": "s", "name": "S", "tags": "x"}]), "agents.1.skills.0.tags: Input should be a valid list"),
        (two(options=[]), "agents.1.options: Input should be a valid dictionary"),
    ],
)
def test_an_entrys_values_are_strict(data: dict[str, Any], line: str) -> None:
    assert refused(data) == [line]


def test_the_shorthand_and_the_entries_are_not_both_given() -> None:
    said = "[agent] and [[agents]] are both given: [agent] is the one-agent shorthand; move it into [[agents]]"
    assert refused({"agent": {"name": "mock"}, "agents": [{"id": "a"}]}) == [f"agents: {said}"]
    assert refused({"agent": {}, "agents": [{"id": "a"}]}) == [f"agents: {said}"]


@pytest.mark.parametrize("bad", ["Claude", "-x", "a_b", "a.b", "a" * 33, "", "a b", "a\n"])
def test_an_id_is_a_sub_path(bad: str) -> None:
    (line,) = refused({"agents": [{"id": bad}]})
    assert line.startswith(f"agents.0.id: {bad!r} is not an agent id: lower-case letters, digits and '-'"), line
    (line,) = refused({"agent": {"id": bad}})
    assert line.startswith("agent.id: "), line
    assert agent_specs(parse({"agents": [{"id": "a" * 32}, {"id": "0-x"}]}, env={}))[1].id == "0-x"


def test_ids_are_required_and_unique_and_one_default_at_most() -> None:
    assert refused({"agents": [{"id": "a"}, {"name": "mock"}]}) == [
        "agents.1.id: required: the agent's sub-path /agents/<id>"
    ]
    assert refused({"agents": [{"id": "a"}, {"id": "b"}, {"id": "a"}]}) == ["agents.2.id: 'a' is configured twice"]
    assert refused({"agents": [{"id": "a", "default": True}, {"id": "b", "default": True}]}) == [
        "agents.1.default: 'a' is the default already"
    ]
    # every one found, in the file's order
    assert refused({"agents": [{"default": True}, {"id": "b", "default": True}, {"id": "b"}]}) == [
        "agents.0.id: required: the agent's sub-path /agents/<id>",
        "agents.1.default: 'agents.0' is the default already",
        "agents.2.id: 'b' is configured twice",
    ]


# -- the settings: the agents served and each one's approval ---------------------------------------------------


def test_the_settings_hold_the_agents_and_the_default_agent(tmp_path: Path) -> None:
    loaded = parse(
        {"agents": [{"id": "a", "dir": str(tmp_path)}, {"id": "b", "default": True, "mock_script": "hello"}]}, env={}
    )
    settings = Settings(loaded, Options(state_dir=tmp_path / "state"))
    assert [s.id for s in settings.specs] == ["a", "b"] and settings.default.id == "b"
    assert settings.spec("a").dir == tmp_path.resolve() and settings.spec("b") is settings.default
    with pytest.raises(KeyError):
        settings.spec("c")
    default = settings.default
    assert (default.ref, default.label, default.dir, default.mock_script) == (
        "mock",
        "mock",
        Path(".").resolve(),
        "hello",
    )
    settings = Settings(loaded, Options(state_dir=tmp_path / "state", mock_script="permission"))
    assert settings.default.mock_script == "permission" and settings.spec("a").mock_script == "permission"


def test_each_agents_approval_is_its_own_and_set_and_reloaded(tmp_path: Path) -> None:
    loaded = parse({"agents": [{"id": "a"}, {"id": "b", "approval": "auto"}]}, env={})
    settings = Settings(loaded, Options(state_dir=tmp_path))
    assert settings.approval_of("a") == "ask" and settings.approval_of("b") == "auto"
    settings.overrides["agents.b.approval"] = "ask"
    assert settings.approval_of("b") == "ask" and settings.approval_of("a") == "ask"
    settings.overrides["agents.a.approval"] = "auto"
    assert settings.approval_of("a") == "auto"
    # a reload: the in-force entry of that id; an agent it removed keeps what it started with; overrides end
    settings.replace(parse({"agents": [{"id": "a", "approval": "auto"}, {"id": "c"}]}, env={}))
    assert settings.approval_of("a") == "auto" and settings.approval_of("b") == "auto"
    with pytest.raises(KeyError):
        settings.approval_of("c")  # not served until the next start
    # the shorthand: its agent's id is its name
    settings = Settings(parse({}, env={}), Options(state_dir=tmp_path))
    settings.overrides["agents.mock.approval"] = "auto"
    assert settings.approval_of("mock") == "auto"


def test_an_agents_idle_close_is_its_own_else_the_pools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANYAGENTD_A2A_IDLE_CLOSE", raising=False)
    loaded = parse({"a2a": {"pool": {"idle_close": 60}}, **two(pool={"idle_close": 5})}, env={})
    a, b = agent_specs(loaded)
    assert agent_idle_close(a, loaded) == 60.0 and agent_idle_close(b, loaded) == 5.0


# -- principals: the agents each reaches --------------------------------------------------------------------------


def test_a_principal_reaches_the_agents_its_patterns_name() -> None:
    principals = [
        {"id": "alice", "bearer": "{{secret:AL}}", "agents": ["claude"]},
        {"id": "bob", "bearer": "{{secret:BO}}"},
        {"id": "carol", "bearer": "{{secret:CA}}", "agents": ["codex-*"]},
    ]
    loaded = parse(
        {"a2a": {"bearer": "{{secret:OP}}", "principals": principals}},
        env={"OP": "op", "AL": "al", "BO": "bo", "CA": "ca"},
    )
    ids = Identities(loaded)
    alice, bob, carol = (ids.identify(f"Bearer {t}", "10.0.0.1", None) for t in ("al", "bo", "ca"))
    assert alice.agents == ("claude",) and alice.reaches("claude") and not alice.reaches("codex-x")
    assert bob.agents == ("*",) and bob.reaches("claude") and bob.reaches("codex-x")
    assert carol.reaches("codex-x") and not carol.reaches("claude") and not carol.reaches("Codex-x")
    assert OPERATOR.reaches("anything")
    for bad in ([], [""]):
        (line,) = refused({"a2a": {"principals": [{"id": "al", "bearer": "{{secret:AL}}", "agents": bad}]}})
        assert line.startswith("a2a.principals.0.agents"), line


# -- a reload: what it names and what it applies ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "changed"),
    [
        (two(), two(approval="auto"), []),
        (two(), {"agents": [{"id": "a", "approval": "auto"}, {"id": "b"}]}, []),
        (two(), two(dir="/"), ["agents.1.dir"]),
        (two(), two(options={"model": "x"}, pool={"max_live": 2}), ["agents.1.options", "agents.1.pool"]),
        (two(), two(skills=[{"id": "s", "name": "S"}], default=True), ["agents.1.default", "agents.1.skills"]),
        (
            two(),
            two(description="d", name="claude", mock_script="hello"),
            [
                "agents.1.name",
                "agents.1.mock_script",
                "agents.1.description",
            ],
        ),
        (two(), {"agents": [{"id": "a"}]}, ["agents.1"]),
        (two(), {"agents": [{"id": "a"}, {"id": "b"}, {"id": "c"}]}, ["agents.2"]),
        (two(), {"agents": [{"id": "b"}, {"id": "a"}]}, ["agents.0", "agents.1"]),
        ({}, {"agent": {"dir": "/", "approval": "auto"}}, ["agent.dir"]),
        ({}, {"agent": {"name": "claude"}}, ["agent.name"]),
        ({}, {"agent": {"id": "x"}}, ["agent.id"]),
        ({}, {"agents": [{"id": "mock"}]}, []),
        ({}, {"agents": [{"id": "a"}]}, ["agents.0"]),
    ],
)
def test_a_reload_names_every_start_only_change_of_the_agents(
    before: dict[str, Any], after: dict[str, Any], changed: list[str]
) -> None:
    assert agent_changes(parse(before, env={}).config, parse(after, env={}).config) == changed


# -- --check-config ----------------------------------------------------------------------------------------------


def test_check_config_of_two_agents_says_ok_or_names_each_error(tmp_path: Path) -> None:
    config = tmp_path / "agentd.toml"
    config.write_text(
        '[[agents]]\nid = "a"\nmock_script = "hello"\n[agents.options]\nmodel = "m"\n'
        f'[[agents]]\nid = "b"\ndefault = true\ndir = "{tmp_path}"\n'
        'skills = [{ id = "s", name = "S", tags = ["t"] }]\n[agents.pool]\nmax_live = 2\nidle_close = 30\n'
    )
    checked = run_cli("--check-config", str(config))
    assert checked.returncode == 0 and checked.stderr.strip().splitlines() == [f"{config}: ok"], checked.stderr
    config.write_text(
        '[[agents]]\nid = "a"\n[agents.pool]\nmax_rss_mb = 10\n[[agents]]\nid = "b"\nmodle = "x"\ndefault = "yes"\n'
    )
    checked = run_cli("--check-config", str(config))
    assert checked.returncode == 2 and "Traceback" not in checked.stderr
    assert checked.stderr.strip().splitlines() == [
        f"{ERROR}agents.0.pool.max_rss_mb: unknown key",
        f"{ERROR}agents.1.default: Input should be a valid boolean",
        f"{ERROR}agents.1.modle: unknown key",
    ], checked.stderr
    config.write_text('[agent]\nname = "mock"\n[[agents]]\nid = "a"\n[[agents]]\nid = "a"\n')
    checked = run_cli("--check-config", str(config))
    assert checked.returncode == 2 and checked.stderr.strip().splitlines() == [
        f"{ERROR}agents: [agent] and [[agents]] are both given: [agent] is the one-agent shorthand; move it into "
        "[[agents]]"
    ], checked.stderr
    config.write_text(
        '[[agents]]\nid = "a"\ndefault = true\n[[agents]]\nname = "mock"\n[[agents]]\nid = "a"\ndefault = true\n'
    )
    checked = run_cli("--check-config", str(config))
    assert checked.returncode == 2 and checked.stderr.strip().splitlines() == [
        f"{ERROR}agents.1.id: required: the agent's sub-path /agents/<id>",
        f"{ERROR}agents.2.id: 'a' is configured twice",
        f"{ERROR}agents.2.default: 'a' is the default already",
    ], checked.stderr


# -- found by the fresh-eyes trial ---------------------------------------------------------------------------------


def test_a_reserved_id_and_an_empty_agents_list_are_refused() -> None:
    """``last-updated`` would name its task table like the old task table's index: it passed --check-config and the
    start then failed with a traceback. ``agents = []`` served the embedded mock agent, which no file named."""
    assert refused({"agents": [{"id": "last-updated"}]}) == [
        "agents.0.id: 'last-updated' is reserved; give the agent another id"
    ]
    assert refused({"agents": []}) == [
        "agents: no agent is configured: give at least one [[agents]] table (or [agent])"
    ]
    assert slug("Last Updated") == "last-updated-agent"  # the shorthand's id never takes it either


def test_the_config_op_shows_each_agents_approval_by_its_id_and_no_shorthand(tmp_path: Path) -> None:
    """A reload that reordered the agents showed each approval at the other agent's place; a file of
    ``[[agents]]`` only showed an ``[agent]`` that was not configured."""
    from anyagentd_a2a.instance import Instance
    from anyagentd_a2a.logring import LogRing

    started = parse({"agents": [{"id": "writer", "approval": "auto"}, {"id": "hello"}]}, env={})
    settings = Settings(started, Options(state_dir=tmp_path))
    instance = Instance(settings, None, LogRing(stream=None))  # type: ignore[arg-type]
    shown = instance.redacted_config()
    assert "agent" not in shown
    assert [(a["id"], a["approval"]) for a in shown["agents"]] == [("writer", "auto"), ("hello", "ask")]
    settings.replace(parse({"agents": [{"id": "hello", "approval": "auto"}, {"id": "writer"}]}, env={}))
    shown = instance.redacted_config()
    assert [(a["id"], a["approval"]) for a in shown["agents"]] == [("hello", "auto"), ("writer", "ask")]
    assert [(a["id"], settings.approval_of(a["id"])) for a in shown["agents"]] == [("hello", "auto"), ("writer", "ask")]
    assert (
        "agent"
        in Instance(
            Settings(parse({}, env={}), Options(state_dir=tmp_path)), None, LogRing(stream=None)
        ).redacted_config()
    )  # type: ignore[arg-type]


def test_an_option_the_agent_does_not_list_stops_the_start_naming_its_key(tmp_path: Path) -> None:
    """``[agents.options]`` reached the agent only when a session opened: every message failed with "unknown
    option". The start probes each agent with options (``anyagentd probe``) and refuses in one line."""
    config = tmp_path / "agentd.toml"
    config.write_text(
        '[a2a]\nlisten = "127.0.0.1:0"\n[[agents]]\nid = "solo"\nname = "mock"\nmock_script = "hello"\n'
        '[agents.options]\nmodel = "fancy-1"\n'
    )
    started = run_cli("--config", str(config), "--state-dir", str(tmp_path / "state"))
    assert started.returncode != 0 and "Traceback" not in started.stderr
    assert f"{ERROR}agents.0.options.model: mock has no option 'model'" in started.stderr, started.stderr
    config.write_text(
        '[a2a]\nlisten = "127.0.0.1:0"\n[[agents]]\nid = "solo"\nname = "mock"\nmock_script = "model-option"\n'
        '[agents.options]\nmodel = "huge"\n'
    )
    started = run_cli("--config", str(config), "--state-dir", str(tmp_path / "state"))
    assert f"{ERROR}agents.0.options.model: \"huge\" does not fit mock's option 'model'" in started.stderr, (
        started.stderr
    )
