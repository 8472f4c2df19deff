"""The code cites the project's own design notes (``docs/``): every ``docs/<page>.md#anchor`` a module or test
mentions names a page that exists and, with an anchor, a heading of it (GitHub's slug rule)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"docs/([\w/.-]+\.md)(?:#([\w-]+))?")
TREES = ("core", "adapters", "plugins", "testing", "tests", "bench")


def slug(heading: str) -> str:
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("#")}


def citations() -> list[tuple[Path, str, str | None]]:
    found = []
    for tree in TREES:
        for path in (ROOT / tree).rglob("*.py"):
            if "node_modules" in path.parts or ".venv" in path.parts:
                continue
            for match in CITATION.finditer(path.read_text(encoding="utf-8")):
                found.append((path, match.group(1), match.group(2)))
    return found


def test_every_citation_names_a_page_and_heading() -> None:
    found = citations()
    assert len(found) >= 30, "the modules cite docs/ (the reference notes are not in this repository)"
    problems = []
    for path, page, anchor in found:
        target = ROOT / "docs" / page
        if not target.is_file():
            problems.append(f"{path.relative_to(ROOT)}: docs/{page} does not exist")
        elif anchor and anchor not in anchors(target):
            problems.append(f"{path.relative_to(ROOT)}: docs/{page} has no heading #{anchor}")
    assert not problems, "\n".join(problems)


def test_no_module_cites_the_reference_notes() -> None:
    stale = re.compile(r"anyagent-semantics\.md|real-agent-clis\.md|agentd-command-semantics\.md")
    offenders = [
        str(p.relative_to(ROOT))
        for tree in TREES
        for p in (ROOT / tree).rglob("*.py")
        if "node_modules" not in p.parts and stale.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == [], offenders
