"""The layout's rules, checked on the import graph so the house cannot rot quietly.

The graph is built from the source with `ast` (no extra dependency): one node per module of
`experiments` and `annotations` (migrations left out), one arrow per import of another module of
the project. Every module lives in a room (ROOMS), and each room names the rooms it may import
(MAY_IMPORT); an arrow to any other room fails, and so does a module in no room. The floors, from
the ground up:

- `experiments.core` imports no Django (nor rq/redis) and nothing outside `experiments.core`;
  `memory_systems` and the models stand on it alone;
- `data` (the data services and import jobs) on the core and the models; `analysis` on those and
  `data`; `execution` on all of these — so `data` and `analysis` never import `execution` or a page;
- `access` (the request helpers) on `execution`; the pages (`web`) and the management commands on
  everything below, never on each other; `execution` never imports a page or a command;
- `annotations` stands on `experiments`, never the other way;
- there is no import circle, and every module holds at most MAX_LINES lines and opens with a docstring.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("experiments", "annotations")
MAX_LINES = 400
# Django-generated or declarative files that need no docstring of their own.
NO_DOCSTRING_NEEDED = {"apps", "admin", "__init__", "models"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "migrations" not in path.parts:
                found[module_name(path)] = path
    return found


def imported_names(path: Path) -> set[str]:
    """Every absolute module name imported by the file, with `from a import b` giving a.b too."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: {imported for imported in imported_names(path) if imported in modules and imported != name}
            for name, path in modules.items()}


def under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


GRAPH = import_graph()


def test_the_graph_is_the_project():
    # A graph that lost its modules would pass every rule below.
    assert len(GRAPH) > 50
    assert "experiments.core.stats.paired" in GRAPH
    assert "experiments.execution.journal" in GRAPH["experiments.execution.driver"]


def test_the_core_imports_no_django_and_nothing_outside_the_core():
    problems = []
    for name, path in project_modules().items():
        if not under(name, "experiments.core"):
            continue
        for imported in imported_names(path):
            top = imported.split(".")[0]
            if top in ("django", "rq", "redis", "django_rq"):
                problems.append(f"{name} imports {imported}")
            if top in PACKAGES and not under(imported, "experiments.core"):
                problems.append(f"{name} imports {imported}")
    assert not problems, problems


def test_the_core_loads_without_django_in_a_fresh_interpreter():
    core = sorted(name for name in GRAPH if under(name, "experiments.core"))
    code = ("import importlib, sys\n"
            f"for name in {core!r}:\n    importlib.import_module(name)\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'rq', 'redis'))\n"
            "assert not loaded, loaded\n")
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports, as the list of its modules, or None (depth-first, three colours)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_finds_a_circle_and_only_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_there_is_no_import_circle():
    assert find_cycle(GRAPH) is None


# Each module's room: the longest prefix below that the module is or lies under decides. The
# packages' own top-level modules are named one by one, so that a new loose module has no room.
ROOMS = {
    "experiments.core": "core",
    "experiments.memory_systems": "memory_systems",
    "experiments.models": "models",
    "experiments.data": "data",
    "experiments.analysis": "analysis",
    "experiments.execution": "execution",
    "experiments.access": "access",
    "experiments.jobs": "old_job_paths",
    "experiments.web": "web",
    "experiments.templatetags": "web",
    "experiments.urls": "web",
    "experiments.management": "management",
    "experiments": "site",
    "experiments.admin": "site",
    "experiments.apps": "site",
    "annotations.pairwise": "annotations.services",
    "annotations.content_check": "annotations.services",
    "annotations.core": "annotations.core",
    "annotations.models": "annotations.models",
    "annotations.web": "annotations.web",
    "annotations.urls": "annotations.web",
    "annotations.management": "annotations.management",
    "annotations.admin": "annotations.site",
    "annotations.apps": "annotations.site",
    **{f"annotations.{name}": "annotations.services" for name in (
        "adjudication", "calibration", "campaign_access", "campaign_agreement", "campaign_rows", "campaign_rules",
        "campaigns",
        "completion_codes", "explorer_filters", "guidelines", "invites", "jobs", "rating",
        "rating_exports", "rating_sql", "results_epoch_sql", "results_figures", "rubric", "sampling")},
    "annotations": "annotations.services",
}
_EXPERIMENTS_SERVICES = {"core", "memory_systems", "models", "data", "analysis", "execution", "access"}
MAY_IMPORT = {
    "core": set(),
    "memory_systems": {"core"},
    "models": {"core"},
    "data": {"core", "models"},
    "analysis": {"core", "models", "data"},
    "execution": {"core", "memory_systems", "models", "data", "analysis"},
    "access": {"core", "models", "data", "execution"},
    "old_job_paths": {"execution"},  # the RQ job paths of before the move (experiments/jobs.py)
    "web": _EXPERIMENTS_SERVICES,
    "management": _EXPERIMENTS_SERVICES,
    "site": _EXPERIMENTS_SERVICES | {"web"},  # the app's admin, AppConfig and package
    "annotations.core": {"core"},
    "annotations.models": {"models"},
    "annotations.services": {"annotations.core", "annotations.models", "core", "models", "data", "analysis",
                             "access"},
    "annotations.web": {"annotations.services", "annotations.core", "annotations.models", "core", "models", "data",
                        "analysis", "access", "web"},
    "annotations.management": {"annotations.services", "annotations.core", "annotations.models", "core", "models",
                               "data", "analysis"},
    "annotations.site": {"annotations.services", "annotations.models", "models", "site"},
}


def room_of(module: str) -> str | None:
    """The room of the longest ROOMS prefix the module is or lies under; a package's own top-level
    modules are in a room only when named (the bare package name covers only its __init__)."""
    for prefix in sorted(ROOMS, key=len, reverse=True):
        if module == prefix or ("." in prefix and module.startswith(prefix + ".")):
            return ROOMS[prefix]
    return None


def test_every_module_has_a_room_and_every_room_its_rules():
    assert not sorted(name for name in GRAPH if room_of(name) is None)
    assert set(ROOMS.values()) == set(MAY_IMPORT)
    assert all(allowed <= set(MAY_IMPORT) for allowed in MAY_IMPORT.values())


def test_room_of_names_the_floor():
    assert room_of("experiments.data.sessions") == "data"
    assert room_of("experiments.execution.protocol_templates") == "execution"
    assert room_of("annotations.web.rating.views") == "annotations.web"
    assert room_of("experiments.loose_module") is None


def test_arrows_point_only_to_the_rooms_below():
    wrong = sorted(f"{name} ({room_of(name)}) → {imported} ({room_of(imported)})"
                   for name, imports in GRAPH.items() for imported in imports
                   if room_of(imported) != room_of(name) and room_of(imported) not in MAY_IMPORT[room_of(name)])
    assert not wrong, wrong


@pytest.mark.parametrize("lower, higher", [
    ("experiments.data", "experiments.execution"),
    ("experiments.data", "experiments.web"),
    ("experiments.data", "experiments.analysis"),
    ("experiments.analysis", "experiments.execution"),
    ("experiments.analysis", "experiments.web"),
    ("experiments.execution", "experiments.web"),
    ("experiments.execution", "experiments.management"),
    ("experiments.execution", "experiments.access"),
    ("experiments.management", "experiments.web"),
    ("experiments.models", "experiments.data"),
    ("experiments.access", "experiments.web"),
    ("experiments", "annotations"),
])
def test_arrows_point_one_way(lower, higher):
    # The table's main consequences, said once more in plain words.
    wrong = sorted(f"{name} → {imported}" for name, imports in GRAPH.items() if under(name, lower)
                   and not under(name, higher) for imported in imports if under(imported, higher))
    assert not wrong, wrong


def test_no_module_is_over_the_line_limit_and_each_says_what_it_holds():
    too_long, undocumented = [], []
    for name, path in project_modules().items():
        text = path.read_text()
        if text.count("\n") > MAX_LINES:
            too_long.append(f"{name}: {text.count(chr(10))} lines")
        short = name.rsplit(".", 1)[-1]
        is_package_init = path.name == "__init__.py"
        exempt = short in NO_DOCSTRING_NEEDED or "commands" in path.parts or (
            is_package_init and "models" in path.parts)
        if text.strip() and not exempt and not ast.get_docstring(ast.parse(text)):
            undocumented.append(name)
    assert not too_long, too_long
    assert not undocumented, undocumented


def test_jobs_queued_under_the_old_paths_still_resolve():
    # RQ stores a job's function by dotted path: runs queued before the move name these.
    from rq.utils import import_attribute

    from experiments.execution import jobs

    for name in ("job_slot", "job_drive", "job_recheck", "job_analyze"):
        assert import_attribute(f"experiments.jobs.{name}") is getattr(jobs, name)


def test_import_jobs_queued_under_the_old_paths_still_resolve():
    # Background imports queued before the import jobs joined the data services name these.
    from rq.utils import import_attribute

    from experiments.data import import_jobs, survey_import_jobs

    assert import_attribute("experiments.execution.imports.job_import_file") is import_jobs.job_import_file
    assert import_attribute("experiments.execution.survey_imports.job_import_survey") is (
        survey_import_jobs.job_import_survey)
