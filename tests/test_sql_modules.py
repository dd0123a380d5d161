"""Raw SQL lives in `*_sql.py` modules beside their service, each statement with the index it needs.

Checked on the source with `ast`, over every module of `experiments`, `annotations` and
`ownwords_site` (migrations left out: each keeps the SQL of its own moment): a call of
`.cursor()` (Django's `connection.cursor()`), `hot_cursor()` (`execution.hot_sql`'s), `.raw(`
(a manager's raw query) or `RawSQL(` outside a module whose name ends in `_sql` fails.
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("experiments", "annotations", "ownwords_site")
RAW_CALLS = {"cursor", "hot_cursor", "raw", "RawSQL"}


def called_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    if isinstance(node.func, ast.Name):
        return node.func.id
    return None


def raw_sql_calls(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return sorted((node.lineno, name) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and (name := called_name(node)) in RAW_CALLS)


def project_files() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))
            if "migrations" not in path.parts]


def test_raw_sql_only_in_sql_modules():
    found = [f"{path.relative_to(REPO)}:{line}: {name}" for path in project_files()
             if not path.stem.endswith("_sql") for line, name in raw_sql_calls(path)]
    assert found == [], f"raw SQL outside a *_sql.py module (move it beside its service): {found}"


def test_the_check_sees_raw_sql(tmp_path):
    # A check that finds nothing would pass whatever the code does.
    sample = tmp_path / "service.py"
    sample.write_text("from django.db import connection\n"
                      "def f(M):\n"
                      "    with connection.cursor() as c:\n"
                      "        c.execute('SELECT 1')\n"
                      "    return M.objects.raw('SELECT 1')\n")
    assert raw_sql_calls(sample) == [(3, "cursor"), (5, "raw")]
    assert any(raw_sql_calls(path) for path in project_files() if path.stem.endswith("_sql"))
