"""A module's `_name` is its own: no module of the project imports another's private name.

A helper that two modules share is public, in a module of its own (e.g.
`experiments.core.stats.arguments`, `experiments.core.interviews.checks`), so whoever changes it
sees that it is shared. Checked on the source with `ast`, over every module of `experiments`,
`annotations` and `ownwords_site` (migrations too): `from x import _name` (relative or not), and
`x._name` where `x` is a project module bound by an import. Dunder names are not private.
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("experiments", "annotations", "ownwords_site")
# Private names some module still reads from another (none left: the policy's cap is `current_cap`).
KNOWN: set[str] = set()


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def is_project_module(dotted: str) -> bool:
    path = REPO.joinpath(*dotted.split("."))
    return dotted.split(".")[0] in PACKAGES and (path.with_suffix(".py").is_file() or path.is_dir())


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` of a chain of attributes on a name, None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def private_uses(source: str, package: str) -> list[str]:
    """Every private name of another module that `source` (a module of `package`) imports or reads."""
    tree = ast.parse(source)
    found, modules = [], {}  # local name → the project module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                modules[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source_module = ".".join(part for part in (base, node.module or "") if part)
            for alias in node.names:
                if private(alias.name):
                    found.append(f"from {source_module} import {alias.name}")
                elif is_project_module(f"{source_module}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{source_module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            chain = dotted(node.value)
            if chain is None or chain.split(".")[0] not in modules:
                continue
            head, _, rest = chain.partition(".")
            target = ".".join(part for part in (modules[head], rest) if part)
            if is_project_module(target):
                found.append(f"{target}.{node.attr}")
    return found


def project_files() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))]


def package_name(path: Path) -> str:
    """The package a file belongs to (an `__init__.py` to its own), which relative imports start from."""
    return ".".join(path.relative_to(REPO).parent.parts)


def test_the_check_sees_each_kind_of_use():
    source = ("from experiments.core.stats.paired import paired_set, _hidden\n"
              "from .records import _Collector\n"
              "from experiments.core.stats import paired\n"
              "import experiments.core.stats.shared as shared\n"
              "import experiments.core.interviews.records\n"
              "paired._one, shared._two, experiments.core.interviews.records._three, paired.__doc__\n"
              "import os\nos._exit\n")
    assert private_uses(source, "experiments.core.interviews") == [
        "from experiments.core.stats.paired import _hidden",
        "from experiments.core.interviews.records import _Collector",
        "experiments.core.stats.paired._one", "experiments.core.stats.shared._two",
        "experiments.core.interviews.records._three"]


def test_no_module_uses_another_modules_private_names():
    files = project_files()
    assert len(files) > 100  # the scan found the project
    problems = [f"{path.relative_to(REPO)}: {use}" for path in files
                for use in private_uses(path.read_text(), package_name(path))]
    assert sorted(set(problems) - KNOWN) == []
    assert KNOWN <= set(problems), "a known exception is gone: drop it from KNOWN"
