import csv
import json
import math

from django.core.management.base import BaseCommand, CommandError

from experiments.core import stats


class Command(BaseCommand):
    help = (
        "Paired contrast of two grade columns of any CSV (raw grades 0-3, one row per task), "
        "with the whole-person bootstrap of the app: check results outside it."
    )

    def add_arguments(self, parser):
        parser.add_argument("--csv", required=True, dest="path")
        parser.add_argument("--a", required=True, help="column of the first condition's grades")
        parser.add_argument("--b", required=True, help="column of the second condition's grades")
        parser.add_argument("--person", required=True, help="column of person labels (the resampled clusters)")
        parser.add_argument("--seed", required=True, type=int)
        parser.add_argument("--draws", type=int, default=100_000)
        parser.add_argument("--family-size", type=int, default=1, help="m of a Bonferroni family (tails α/2m)")
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")

    def handle(self, path, a, b, person, seed, draws, family_size, **options):
        people, a_grades, b_grades, skipped = [], [], [], 0
        try:
            with open(path, newline="", encoding="utf-8") as handle:
                reader = csv.DictReader(handle)
                missing = [c for c in (a, b, person) if c not in (reader.fieldnames or [])]
                if missing:
                    raise CommandError(f"{path}: no column {', '.join(missing)} (columns: {reader.fieldnames})")
                for line, row in enumerate(reader, start=2):
                    ga, gb = _grade(row[a], path, line, a), _grade(row[b], path, line, b)
                    if ga is None or gb is None:
                        skipped += 1  # a missing grade: only jointly observed tasks are paired
                        continue
                    people.append(row[person])
                    a_grades.append(ga)
                    b_grades.append(gb)
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        except (csv.Error, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: not a readable CSV ({exc})") from None
        if not people:
            raise CommandError(f"{path}: no task has both grades")
        diff = stats.normalize(a_grades) - stats.normalize(b_grades)
        result = stats.paired_bootstrap(people, diff, seed=seed, draws=draws)
        wtl = stats.win_tie_loss(diff)
        report = {
            "a": a, "b": b, "estimate": result.estimate, "lo": result.lo, "hi": result.hi,
            "tasks": result.n_tasks, "people": result.n_people, "lost_to_missing": skipped,
            "seed": seed, "draws": draws, "wins": wtl.wins, "ties": wtl.ties, "losses": wtl.losses,
            "person_weighted": stats.person_weighted(people, diff),
        }
        if family_size > 1:
            family = stats.paired_bootstrap(people, diff, seed=seed, draws=draws,
                                            tails=stats.family_tails(family_size))
            report.update(family_lo=family.lo, family_hi=family.hi, family_size=family_size)
        if options["json"]:
            return json.dumps(report, indent=2)
        text = (f"{a} minus {b}: {result.estimate:+.4f} [{result.lo:+.4f}, {result.hi:+.4f}] "
                f"(95%, whole-person bootstrap, PCG64 seed {seed}, {draws} draws); "
                f"{result.n_tasks} tasks, {result.n_people} people, {skipped} lost to missing grades; "
                f"W/T/L {wtl.wins}/{wtl.ties}/{wtl.losses}")
        if family_size > 1:
            text += f"; family interval [{report['family_lo']:+.4f}, {report['family_hi']:+.4f}] (m={family_size})"
        return text


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
