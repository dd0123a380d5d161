"""The explorer's filters and sort as the URL carries them: `ExplorerQuery`.

`ExplorerQuery.from_params` reads and checks a query string (see the `run_explorer` view for the
parameter names); `analysis.explorer` turns a query into SQL.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from experiments.analysis.task_filters import TASK_FILTERS

GRADES = (0, 1, 2, 3)
SORT_FIELDS = ("task", "person", "study", "diff")  # plus "grade:<condition key>"


def _grade(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    if value not in {str(g) for g in GRADES}:
        raise ValueError(f"a grade is one of 0, 1, 2, 3, not {value!r}")
    return int(value)


@dataclass(frozen=True)
class ExplorerQuery:
    """The explorer's filters and sort, as the URL carries them (every field optional)."""

    grades: tuple[tuple[str, int], ...] = ()  # (condition, grade) pairs: `condition` + `grade`
    a: str = ""
    ga: int | None = None
    b: str = ""
    gb: int | None = None
    study: str = ""
    person: str = ""
    q: str = ""
    missing: bool = False
    copied: bool = False
    chosen: str = ""
    answered: str = ""  # a condition whose final answer has a text (the dashboard's answer lengths count it)
    extra: tuple[str, ...] = ()  # keys of filters other apps registered (`filter`)
    sort: str = "task"
    page: int = 1
    errors: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def from_params(cls, params, conditions) -> ExplorerQuery:
        """Read a QueryDict; what cannot be used is dropped and explained in `errors`."""
        known, errors = set(conditions), []
        get, get_list = params.get, params.getlist

        def condition(key: str) -> str:
            if key and key not in known:
                errors.append(f"unknown condition {key!r}")
                return ""
            return key

        def grade(value) -> int | None:
            try:
                return _grade(value)
            except ValueError as error:
                errors.append(str(error))
                return None

        pairs = []
        for key, value in zip(get_list("condition"), get_list("grade")):
            key, value = condition(key), grade(value)
            if key and value is not None:
                pairs.append((key, value))
        sort = get("sort") or "task"
        bare = sort.lstrip("-")
        if not (bare in SORT_FIELDS or (bare.startswith("grade:") and bare[6:] in known)):
            errors.append(f"cannot sort by {sort!r}")
            sort = "task"
        try:
            page = max(1, int(get("page") or 1))
        except ValueError:
            page = 1
        extra = []
        for key in dict.fromkeys(get_list("filter")):
            if key in TASK_FILTERS:
                extra.append(key)
            elif key:
                errors.append(f"unknown filter {key!r}")
        a, b = condition(get("a") or ""), condition(get("b") or "")
        if a and a == b:  # a condition always agrees with itself: the filter would match nothing
            errors.append(f"a and b are the same condition ({a}); choose two different ones")
            b = ""
        if sort.lstrip("-") == "diff" and not (a and b):
            errors.append("sorting by a − b needs two conditions a and b")
            sort = "task"
        return cls(
            grades=tuple(pairs), a=a, ga=grade(get("ga")) if a else None, b=b, gb=grade(get("gb")) if b else None,
            study=(get("study") or "").strip(), person=(get("person") or "").strip(), q=(get("q") or "").strip(),
            missing=get("missing") == "1", copied=get("copied") == "1", chosen=(get("chosen") or "").strip(),
            answered=condition(get("answered") or ""),
            extra=tuple(extra), sort=sort, page=page, errors=tuple(errors),
        )

    def params(self) -> list[tuple[str, str]]:
        """The query string's pairs (without the page), in a stable order."""
        pairs: list[tuple[str, str]] = []
        for key, value in self.grades:
            pairs += [("condition", key), ("grade", str(value))]
        for name in ("a", "ga", "b", "gb", "study", "person", "q", "chosen", "answered"):
            value = getattr(self, name)
            if value is not None and value != "":
                pairs.append((name, str(value)))
        if self.missing:
            pairs.append(("missing", "1"))
        if self.copied:
            pairs.append(("copied", "1"))
        pairs += [("filter", key) for key in self.extra]
        if self.sort != "task":
            pairs.append(("sort", self.sort))
        return pairs

    def is_filtered(self) -> bool:
        return any(name != "sort" for name, _ in self.params())

    def scored_conditions(self) -> list[str]:
        """The conditions whose grade the filters or the sort read, each once."""
        keys = [key for key, _ in self.grades] + [self.a, self.b]
        if self.sort.lstrip("-").startswith("grade:"):
            keys.append(self.sort.lstrip("-")[6:])
        return list(dict.fromkeys(k for k in keys if k))
