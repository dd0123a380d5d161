"""Which prompt files are the paper's text and which were written here. Pure Python, no Django.

prompts/README.md's table "Where each prompt comes from" has one row per prompt file (or family of
files): the file, where the paper prints it, and how much of its text is the paper's. A file whose
text column says exactly "verbatim" is the paper's; every other file is "written here, not the
paper's" — wholly, or in the parts its row names (the paper's text of it is cut short, or the paper
never printed it). The paper report shows this mark under every table whose conditions send such a
file (`written_here`), so a reader knows which wording is ours.
"""
from __future__ import annotations

import re
from typing import Iterable

from experiments.core.prompts import PROMPTS_DIR

README = PROMPTS_DIR / "README.md"
TABLE_HEADING = "## Where each prompt comes from"
VERBATIM = "verbatim"
NOT_LISTED = "not listed in prompts/README.md: taken to be written here"

_NAMES = re.compile(r"`([^`]+)`")


CELL_SEPARATOR = "|"  # a Markdown table's (no slot key is read here)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip(CELL_SEPARATOR).split(CELL_SEPARATOR)]


def prompt_provenance(readme_text: str) -> dict[str, tuple[str, str]]:
    """name → (where in the paper, how much is the paper's text), from the README's table. A row
    naming a family (`survey_answer_<layout>_user` (`screener`, `memory`)) gives one entry per member."""
    if TABLE_HEADING not in readme_text:
        raise ValueError(f"prompts/README.md has no section {TABLE_HEADING!r}")
    section = readme_text.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    table: dict[str, tuple[str, str]] = {}
    for line in section.splitlines():
        if not line.startswith("|"):
            continue
        cells = _cells(line)
        if len(cells) < 3 or not _NAMES.search(cells[0]):
            continue  # the header and the rule
        names = _NAMES.findall(cells[0])
        first, members = names[0], names[1:]
        expanded = [re.sub(r"<[a-z_]+>", member, first) for member in members] if "<" in first else names
        for name in expanded:
            table[name] = (cells[1], cells[2])
    return table


def written_here(names: Iterable[str], readme_text: str | None = None) -> dict[str, str]:
    """Of the prompt files `names`, those written here, not the paper's: name → what of it is ours
    (the README's text column; a file the table does not list counts as written here)."""
    table = prompt_provenance(README.read_text(encoding="utf-8") if readme_text is None else readme_text)
    out = {}
    for name in dict.fromkeys(names):
        where, text = table.get(name, ("", NOT_LISTED))
        if text != VERBATIM:
            out[name] = text
    return out
