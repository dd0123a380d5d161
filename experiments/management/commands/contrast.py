"""manage.py contrast: the app's paired statistics on a CSV of raw 0–3 grades, so results can be checked outside it.

The format is the app's numeric package (`export/scores.csv`, `analysis.exports.HEADER`): *long*,
one row per task and condition, with the columns ``task``, ``person``, ``condition`` and ``grade``
(an empty grade is missing). ``--a`` and ``--b`` name two conditions; a task enters when both are
graded, as on the dashboard. On the package the figures are the dashboard's to the last digit:
people are numbered in the order the bootstrap resamples them, and labels that are all whole
numbers are ordered as numbers.

A hand-made *wide* file (one row per task, a column per condition, no ``condition`` column) is
read too: ``--a`` and ``--b`` then name its columns.
"""
import csv
import json
import math

import numpy as np
from django.core.management.base import BaseCommand, CommandError

from experiments.core import stats
from experiments.core.stats import robustness
from experiments.core.task_attributes import FIRST_TARGET, LATER_TARGETS, log_length_gap

LONG_COLUMNS = ("task", "condition", "grade")


class Command(BaseCommand):
    help = (
        "Paired contrast a − b of raw 0–3 grades from the app's numeric package (scores.csv: one row per task "
        "and condition; --a/--b name conditions) or a wide CSV (one row per task; --a/--b name columns), with "
        "the app's whole-person bootstrap: check results outside it."
    )

    def add_arguments(self, parser):
        parser.add_argument("--csv", required=True, dest="path")
        parser.add_argument("--a", required=True, help="the first condition (long) or its grade column (wide)")
        parser.add_argument("--b", required=True, help="the second condition (long) or its grade column (wide)")
        parser.add_argument("--person", default="person", help="column of person labels (the resampled clusters)")
        parser.add_argument("--seed", required=True, type=int)
        parser.add_argument("--draws", type=int, default=100_000)
        parser.add_argument("--family-size", type=int, default=1, help="m of a Bonferroni family (tails α/2m)")
        parser.add_argument("--exclude-person", action="append", default=[], metavar="LABEL",
                            help="leave this person out (App. I.5); repeat for several")
        parser.add_argument("--robustness", action="store_true",
                            help="also the run tables' robustness figures (JSON): person-weighted interval, ΔP≥k "
                                 "intervals, first against later targets, log answer-length regression")
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")

    def handle(self, path, a, b, person, seed, draws, family_size, exclude_person, **options):
        if draws < 1 or family_size < 1:
            raise CommandError("--draws and --family-size must be positive")
        people, a_grades, b_grades, skipped, extras = _read(path, a, b, person)
        if exclude_person:
            unknown = sorted(set(exclude_person) - set(people))
            if unknown:
                raise CommandError(f"{path}: no person {', '.join(unknown)} among the paired tasks")
            keep = [p not in set(exclude_person) for p in people]
            people = [p for p, k in zip(people, keep) if k]
            a_grades = [g for g, k in zip(a_grades, keep) if k]
            b_grades = [g for g, k in zip(b_grades, keep) if k]
            extras = [e for e, k in zip(extras, keep) if k]
            if not people:
                raise CommandError(f"{path}: no task is left after the exclusions")
        clusters = _cluster_labels(people)
        # (a − b) / 3, as PairedSet.diff writes it on the dashboard (a/3 − b/3 can differ in the last bit).
        diff = (np.asarray(a_grades) - np.asarray(b_grades)) / stats.MAX_GRADE
        # The 95% and the family interval resample the same people: one shared pass of draws.
        tails = ((0.025, 0.975), stats.family_tails(family_size)) if family_size > 1 else ((0.025, 0.975),)
        result, *family = stats.shared_bootstraps([stats.BootstrapRequest(clusters, diff, tails)],
                                                  seed=seed, draws=draws)[0]
        wtl = stats.win_tie_loss(diff)
        report = {
            "a": a, "b": b, "estimate": result.estimate, "lo": result.lo, "hi": result.hi,
            "tasks": result.n_tasks, "people": result.n_people, "lost_to_missing": skipped,
            "seed": seed, "draws": draws, "wins": wtl.wins, "ties": wtl.ties, "losses": wtl.losses,
            "person_weighted": stats.person_weighted(clusters, diff), "excluded_people": sorted(exclude_person),
        }
        if family_size > 1:
            report.update(family_lo=family[0].lo, family_hi=family[0].hi, family_size=family_size)
        if options["robustness"]:
            report["robustness"] = robustness_report(clusters, a_grades, b_grades, diff, extras, seed, draws)
        if options["json"] or options["robustness"]:
            return json.dumps(report, indent=2)
        text = (f"{a} minus {b}: {result.estimate:+.4f} [{result.lo:+.4f}, {result.hi:+.4f}] "
                f"(95%, whole-person bootstrap, PCG64 seed {seed}, {draws} draws); "
                f"{result.n_tasks} tasks, {result.n_people} people, {skipped} lost to missing grades; "
                f"W/T/L {wtl.wins}/{wtl.ties}/{wtl.losses}")
        if exclude_person:
            text += f"; without {len(exclude_person)} excluded people"
        if family_size > 1:
            text += f"; family interval [{report['family_lo']:+.4f}, {report['family_hi']:+.4f}] (m={family_size})"
        return text


def robustness_report(clusters, a_grades, b_grades, diff, extras, seed, draws) -> dict:
    """The figures of the run's tables page (`analysis.tables`) for this contrast, from the package's columns."""
    def interval(r):
        return {"estimate": r.estimate, "lo": r.lo, "hi": r.hi, "n_tasks": r.n_tasks, "n_people": r.n_people}

    by_person = robustness.person_weighted_bootstrap(clusters, diff, seed=seed, draws=draws)
    per_task = stats.threshold_decomposition(a_grades, b_grades).per_task
    thresholds = robustness.threshold_robustness(clusters, per_task, seed=seed, draws=draws)
    out = {"person_weighted": interval(by_person),
           "thresholds": [{"k": k + 1, **interval(d)} for k, d in enumerate(thresholds.delta)],
           "top_step_share": thresholds.top_step_share}
    if all(e.get("target") not in (None, "") for e in extras):
        labels = np.array([FIRST_TARGET if int(e["target"]) == 1 else LATER_TARGETS for e in extras], dtype=object)
        split = robustness.subgroups(labels, clusters, diff, seed=seed, draws=draws,
                                     order=[FIRST_TARGET, LATER_TARGETS], compare=(LATER_TARGETS, FIRST_TARGET))
        out["target position"] = {"groups": {g: interval(r) for g, r in split.groups.items()},
                                  "difference": interval(split.difference) if split.difference else None}
    known = np.array([e.get("words_a") not in (None, "") and e.get("words_b") not in (None, "") for e in extras],
                     dtype=bool)
    if known.sum() >= 3:
        gap = np.array([log_length_gap(int(e["words_a"]), int(e["words_b"])) for e in np.asarray(extras)[known]])
        if np.ptp(gap) > 0:
            fit = robustness.covariate_regression(clusters[known], gap, diff[known], seed=seed, draws=draws)
            out["log answer length gap"] = {"slope": interval(fit.slope), "intercept": interval(fit.intercept)}
    return out


def _cluster_labels(people: list[str]):
    """Labels that are all whole numbers as numbers (the package's order), others as text."""
    if all(p.strip().lstrip("-").isdigit() for p in people):
        return np.array([int(p) for p in people])
    return np.array(people)


def _read(path, a, b, person):
    """(people, a grades, b grades, tasks lost to a missing grade, per-task target and answer words) from a CSV."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            columns = reader.fieldnames or []
            if "condition" in columns:
                return _read_long(reader, path, a, b, person)
            return _read_wide(reader, path, a, b, person)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise CommandError(f"{path}: not a readable CSV ({exc})") from None


def _read_wide(reader, path, a, b, person):
    missing = [c for c in (a, b, person) if c not in (reader.fieldnames or [])]
    if missing:
        raise CommandError(f"{path}: no column {', '.join(missing)} (columns: {reader.fieldnames})")
    people, a_grades, b_grades, skipped = [], [], [], 0
    for line, row in enumerate(reader, start=2):
        ga, gb = _grade(row[a], path, line, a), _grade(row[b], path, line, b)
        if ga is None or gb is None:
            skipped += 1  # a missing grade: only jointly observed tasks are paired
            continue
        people.append(row[person])
        a_grades.append(ga)
        b_grades.append(gb)
    if not people:
        raise CommandError(f"{path}: no task has both grades")
    return people, a_grades, b_grades, skipped, [{} for _ in people]


def _read_long(reader, path, a, b, person):
    missing = [c for c in (*LONG_COLUMNS, person) if c not in (reader.fieldnames or [])]
    if missing:
        raise CommandError(f"{path}: a long file (with a condition column) needs the columns "
                           f"{', '.join(missing)} (columns: {reader.fieldnames})")
    tasks: dict[str, dict] = {}
    seen = set()
    for line, row in enumerate(reader, start=2):
        condition = row["condition"]
        seen.add(condition)
        if condition not in (a, b):
            continue
        task = tasks.setdefault(row["task"], {"person": row[person], "target": row.get("target")})
        if task["person"] != row[person]:
            raise CommandError(f"{path}, line {line}: task {row['task']!r} has two people "
                               f"({task['person']!r} and {row[person]!r})")
        if condition in task:
            raise CommandError(f"{path}, line {line}: task {row['task']!r} has {condition!r} twice")
        task[condition] = _grade(row["grade"], path, line, "grade")
        task["words_a" if condition == a else "words_b"] = row.get("answer_words")
    absent = [c for c in (a, b) if c not in seen]
    if absent:
        raise CommandError(f"{path}: no condition {', '.join(absent)} (conditions: {', '.join(sorted(seen))})")
    people, a_grades, b_grades, skipped, extras = [], [], [], 0, []
    for task in tasks.values():
        ga, gb = task.get(a), task.get(b)
        if ga is None or gb is None:
            skipped += 1
            continue
        people.append(task["person"])
        a_grades.append(ga)
        b_grades.append(gb)
        extras.append({k: task.get(k) for k in ("target", "words_a", "words_b")})
    if not people:
        raise CommandError(f"{path}: no task has both grades")
    return people, a_grades, b_grades, skipped, extras


def _grade(raw: str, path: str, line: int, column: str):
    raw = (raw or "").strip()
    if raw == "" or raw.lower() in ("na", "nan", "none", "null", "missing"):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise CommandError(f"{path}, line {line}, column {column}: {raw!r} is not a grade") from None
    if not math.isfinite(value) or value not in (0, 1, 2, 3):
        raise CommandError(f"{path}, line {line}, column {column}: grades are 0, 1, 2 or 3, got {raw!r}")
    return value
