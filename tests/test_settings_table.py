"""Every knob is read in one place, ownwords_site/settings.py, and listed in README's settings table.

The table ("| variable | default | meaning |" under "## Configuration") is checked against the
variables settings.py reads through the helpers of ownwords_site/env.py (found with ast), and the
app's modules are checked to read no variable of their own, but for the exceptions named below.
"""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELPERS = {"env_str", "env_bool", "env_int", "env_float", "env_list", "env_json"}
# Table rows read outside settings.py, and the one file that reads each.
READ_ELSEWHERE = {
    "OWNWORDS_WITH_MEM0": "bin/setup-env",  # an installation switch, not a setting of the app
    # A ranker plug-in is built without arguments (experiments/core/rankers.py imports no Django).
    "OWNWORDS_PAIRRM_PATH": "experiments/core/rankers.py",
}
# App modules that may read the environment, and why.
APP_READERS = {
    # The key a protocol's endpoint names, read at send time once the key gate allowed it.
    "experiments/core/llm/client.py",
    "experiments/core/rankers.py",
}


def table_variables() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Configuration\n", 1)[1]
    lines = section.split("| variable | default | meaning |\n", 1)[1].splitlines()
    rows = []
    for line in lines[1:]:  # after the |---| line
        if not line.startswith("|"):
            break
        rows.append(re.fullmatch(r"\| `(\w+)` \|.*", line).group(1))
    return rows


def settings_variables() -> set[str]:
    tree = ast.parse((ROOT / "ownwords_site" / "settings.py").read_text(encoding="utf-8"))
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in HELPERS
            and node.args and isinstance(node.args[0], ast.Constant)}


def test_the_readme_table_lists_exactly_what_settings_reads():
    rows = table_variables()
    assert len(rows) == len(set(rows)), "a variable is listed twice"
    read = settings_variables()
    assert "SECRET_KEY" in read and "OWNWORDS_WORKER_SLOTS" in read  # the parse finds the calls
    assert sorted(read - set(rows)) == [], "read by settings.py, missing from README's table"
    assert sorted(set(rows) - read - set(READ_ELSEWHERE)) == [], "in README's table, read by nothing"
    for name, path in READ_ELSEWHERE.items():
        assert name in rows and name not in read
        assert name in (ROOT / path).read_text(encoding="utf-8")


def environment_reads(tree) -> list[int]:
    """Lines of `os.environ.get(...)`, `os.getenv(...)` and `os.environ[...]` read in a module."""
    def is_environ(node):
        return isinstance(node, ast.Attribute) and node.attr == "environ"
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                (node.func.attr == "get" and is_environ(node.func.value)) or node.func.attr == "getenv"):
            lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and is_environ(node.value) and isinstance(node.ctx, ast.Load):
            lines.append(node.lineno)
    return lines


def test_app_modules_read_their_knobs_from_settings():
    found = {}
    for package in ("experiments", "annotations"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name in APP_READERS:
                continue
            lines = environment_reads(ast.parse(path.read_text(encoding="utf-8")))
            if lines:
                found[name] = lines
    assert found == {}, "read the variable in ownwords_site/settings.py (env.py's helpers) instead"
    for name in APP_READERS:
        assert environment_reads(ast.parse((ROOT / name).read_text(encoding="utf-8")))
