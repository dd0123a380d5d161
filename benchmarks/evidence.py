"""Speed of the evidence builders: OwnWords for every target of the 250 shared
Anthropic Interviewer transcripts at B = 700 characters.

    .venv/bin/python benchmarks/evidence.py [--data DIR] [--budget 700] [--repeat 5]

Reads the CSVs with the project's pure reader (experiments.core.interviews.parse_anthropic_csv)
and derives targets with the project's task rule (experiments.core.tasks.derive_targets) at the
demo thresholds for these short interviews: at least 8 substantive pairs, at least 3 in the
second half, the first 5 second-half pairs. Each task's evidence is built from scratch, as a
run does: the session's record H up to its earliest target cut, then OwnWords for the
task's question. Parsing is not timed. Pure Python: no Django, no database.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.core.evidence import TurnText, ownwords, respondent_record
from experiments.core.interviews.readers import parse_anthropic_csv
from experiments.core.tasks import TaskRule, derive_targets

SHARED_DATA = Path("/work/shared/data/anthropic-interviewer")
DEMO_RULE = TaskRule(min_pairs=8, min_targets=3, max_targets=5)


def load_tasks(data_dir: Path) -> tuple[int, list[tuple[tuple[TurnText, ...], int, str]]]:
    """(number of sessions, [(turns, record_cut, question)] for every target)."""
    sessions = []
    for path in sorted(data_dir.glob("*.csv")):
        sessions += parse_anthropic_csv(path.read_text(encoding="utf-8"), path.name)
    tasks = []
    for session in sessions:
        turns = tuple(TurnText(i, turn.speaker, turn.text) for i, turn in enumerate(session.turns))
        targets = derive_targets([(t.index, t.speaker, t.text) for t in turns], DEMO_RULE)
        if targets:
            record_cut = min(target.question_index for target in targets)
            tasks += [(turns, record_cut, turns[target.question_index].text) for target in targets]
    return len(sessions), tasks


def build_all(tasks, budget: int) -> int:
    characters = 0
    for turns, record_cut, question in tasks:
        characters += len(ownwords(respondent_record(turns, record_cut), question, budget))
    return characters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--budget", type=int, default=700)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    n_sessions, tasks = load_tasks(args.data)
    sessions_with_tasks = len({id(turns) for turns, _, _ in tasks})
    print(f"{n_sessions} interviews, {sessions_with_tasks} eligible (8 pairs, 3 targets), {len(tasks)} tasks; B = {args.budget}")

    cpu_seconds, wall_seconds = [], []
    for _ in range(args.repeat):
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        characters = build_all(tasks, args.budget)
        cpu_seconds.append(time.process_time() - cpu_start)
        wall_seconds.append(time.perf_counter() - wall_start)
    cpu, wall = statistics.median(cpu_seconds), statistics.median(wall_seconds)
    print(f"mean evidence length {characters / len(tasks):.0f} characters")
    print(f"median of {args.repeat} runs: {cpu:.4f} CPU seconds, {wall:.4f} s wall, {len(tasks) / cpu:,.0f} tasks per CPU second")


if __name__ == "__main__":
    main()
