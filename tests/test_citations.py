"""No citation a reader of the repository cannot follow: code, tests, templates, scripts and docs
say the reason itself, or cite a file of the repository (`docs/design.md §N` for the design rules),
never "issue N" of a tracker or "DESIGN §N" of a document outside it.
"""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOTS = ("experiments", "annotations", "ownwords_site", "templates", "static/js", "static/css", "tests",
         "benchmarks", "bin", "prompts", "docs", "README.md", "manage.py")
SUFFIXES = {".py", ".html", ".js", ".css", ".md", ".txt", ".sh", ""}
# "Re-issue 1 unknown slot" is a button, not a citation: no word character or hyphen before it.
CITATION = re.compile(r"(?<![\w-])[Ii]ssues? #?\d|DESIGN §")
# Prompt files as they are: a protocol's seal records each file's sha256; prompts/README.md says
# where their "DESIGN §4" points. And this check, which names what it looks for.
ALLOWED = {"prompts/answer_question_only_user.txt", "prompts/answer_screener_only_user.txt", "prompts/README.md",
           "tests/test_citations.py"}


def files() -> list[Path]:
    found = []
    for root in ROOTS:
        path = REPO / root
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        found += [p for p in candidates if p.suffix in SUFFIXES and "__pycache__" not in p.parts
                  and "vendor" not in p.parts]
    return found


def citations(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if CITATION.search(line)]


def test_no_citation_of_issues_or_the_outside_design_document():
    found = [f"{path.relative_to(REPO)}: {line}" for path in files()
             if str(path.relative_to(REPO)) not in ALLOWED
             for line in citations(path.read_text(errors="replace"))]
    assert found == [], "say the reason itself, or cite a file of the repository:\n" + "\n".join(found)


def test_the_check_sees_a_citation():
    assert citations("x = 1  # issue 12: why\nthe seal (DESIGN §4)\nIssues 11, 13") == [
        "x = 1  # issue 12: why", "the seal (DESIGN §4)", "Issues 11, 13"]
    assert citations('"Re-issue 1 unknown slot", would re-issue 2, docs/design.md §4') == []
    assert len(files()) > 100


def test_the_design_excerpt_holds_every_section_cited():
    design = (REPO / "docs" / "design.md").read_text()
    cited = {m for path in files() for m in re.findall(r"docs/design\.md §(\d)", path.read_text(errors="replace"))}
    assert cited and all(f"\n## {n}. " in design for n in cited)
