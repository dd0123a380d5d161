"""Speed of the survey benchmark's pure core on SYNTHETIC Twin-2K-500-shaped data.

    .venv/bin/python benchmarks/survey.py [--data DIR] [--respondents 400] [--budget 700] [--repeat 3]

1. Import: 2,058 respondents of ~95,000-character personas (`benchmarks/make_twin2k_synthetic.py
   --n 2058 --size full --formats parquet`, generated into var/bench/ on first use, about 2
   minutes), read from the seven parquet chunks, validated, leak-checked and their targets listed
   (`reader.read_survey_path`, `leaks.split_leaks`, `targets.target_items`). Target: <= 30 s.
2. OwnWords excerpts at B characters for the first 400 respondents of the reported sample's seeded
   order, each from scratch (answer lines, one BM25 ranking per target block, round-robin fill); the
   first pass with the token cache emptied, then warm repeats. Target: <= 5 s.
3. Scoring: five conditions' answers for those 400 respondents (32,000-odd items each; seeded
   stand-in answers written as JSON), parsed, scored, summarized, and the 10 pairwise contrasts with
   95% whole-person intervals in accuracy and normalized deviation (100,000 draws each).
   Target: <= 5 s.

Figures are wall and CPU seconds of this process; on a shared machine the CPU figure is the steadier.
No Django, no database.
"""
import argparse
import itertools
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.core.survey import ownwords as ownwords_module
from experiments.core.survey.answers import parse_survey_answer
from experiments.core.survey.leaks import split_leaks
from experiments.core.survey.ownwords import survey_ownwords
from experiments.core.survey.prepare import PreparedStream
from experiments.core.survey.reader import read_survey_path
from experiments.core.survey.scores import score_items, summarize, survey_contrasts
from experiments.core.survey.targets import respondent_samples, target_items

DEFAULT_DATA = ROOT / "var" / "bench" / "twin2k-full"
GENERATOR = ROOT / "benchmarks" / "make_twin2k_synthetic.py"
CONDITIONS = ("screener", "memory", "ownwords", "memory+ownwords", "whole-persona")
SAMPLE_SEED = 20260923


class Timer:
    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def __str__(self):
        return f"{self.wall:6.2f} s wall, {self.cpu:6.2f} s CPU"


def chunks_of(data: Path) -> Path:
    chunks = data / "wave_split" / "chunks"
    if not list(chunks.glob("*.parquet")):
        print(f"generating 2,058 synthetic respondents into {data} (once) ...", flush=True)
        subprocess.run([sys.executable, str(GENERATOR), "--n", "2058", "--size", "full", "--formats", "parquet",
                        "--out", str(data)], check=True)
    return chunks


def stand_in_answer(rng: random.Random, items, skill: float) -> str:
    """A JSON answer object: the recorded option with probability `skill`, else a random one."""
    return json.dumps({str(i.number): i.wave4 if rng.random() < skill else rng.randint(1, len(i.options))
                       for i in items})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--respondents", type=int, default=400)
    parser.add_argument("--budget", type=int, default=700)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--draws", type=int, default=100_000)
    args = parser.parse_args()
    chunks = chunks_of(args.data)

    with Timer() as t_read:
        respondents = read_survey_path(chunks)
    with Timer() as t_leaks:
        clean, violations = split_leaks(respondents)
    with Timer() as t_targets:
        items = {r.pid: target_items(r) for r in clean}
    chars = sum(len(r.persona_text) for r in respondents) / len(respondents)
    total = t_read.wall + t_leaks.wall + t_targets.wall
    total_cpu = t_read.cpu + t_leaks.cpu + t_targets.cpu
    print(f"import: {len(respondents)} respondents, mean persona text {chars:,.0f} characters, "
          f"{len(violations)} leak violations")
    print(f"  read and validate   {t_read}\n  leak check          {t_leaks}\n  targets             {t_targets}")
    print(f"  total {total:.2f} s wall, {total_cpu:.2f} s CPU (target <= 30 s); peak memory "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")
    with Timer() as t_prepared:
        prepared = sum(len(batch) for batch in PreparedStream([chunks], 2))
    print(f"  as the app imports: {prepared} read, checked and prepared by 2 worker processes "
          f"(prepare.PreparedStream) {t_prepared} (CPU of this process only)")

    _development, reported = respondent_samples([r.pid for r in clean], seed=SAMPLE_SEED,
                                                sizes=(200, args.respondents))
    by_pid = {r.pid: r for r in clean}
    sample = [by_pid[pid] for pid in reported]
    timings = []
    for attempt in range(1 + args.repeat):
        if attempt == 0:
            ownwords_module._token_ids.cache_clear()  # the first pass starts cold
        with Timer() as t_ownwords:
            excerpts = [survey_ownwords(r, args.budget, items[r.pid]) for r in sample]
        timings.append(t_ownwords)
    mean_len = sum(map(len, excerpts)) / len(excerpts)
    print(f"OwnWords: {len(sample)} respondents at B = {args.budget} (mean excerpt {mean_len:.0f} characters)")
    print(f"  cold cache          {timings[0]}")
    for t in timings[1:]:
        print(f"  warm                {t}")
    print("  target <= 5 s")

    rng = random.Random(7)
    skills = dict(zip(CONDITIONS, (0.30, 0.34, 0.35, 0.37, 0.36)))
    responses = {c: [stand_in_answer(rng, items[r.pid], skills[c]) for r in sample] for c in CONDITIONS}
    n_items = sum(len(items[r.pid]) for r in sample)
    with Timer() as t_scores:
        scores = {}
        for condition in CONDITIONS:
            scores[condition] = []
            for respondent, text in zip(sample, responses[condition]):
                its = items[respondent.pid]
                parsed = parse_survey_answer(text, [len(i.options) for i in its])
                scores[condition] += score_items(respondent.pid, its, [a.option for a in parsed.items])
        summaries = [summarize(c, scores[c]) for c in CONDITIONS]
        contrasts = survey_contrasts(scores, list(itertools.combinations(CONDITIONS, 2)), draws=args.draws)
    print(f"scoring: {len(CONDITIONS)} conditions x {n_items:,} answers, {len(contrasts) // 2} contrasts x 2 metrics, "
          f"{args.draws:,} draws")
    print(f"  parse, score, summarize, intervals {t_scores} (target <= 5 s)")
    best = max(summaries, key=lambda s: s.accuracy)
    print(f"  e.g. {best.condition}: accuracy {best.accuracy:.3f}, deviation {best.deviation:.3f}; "
          f"{contrasts[0].first} - {contrasts[0].second} accuracy {contrasts[0].result.estimate:+.4f} "
          f"[{contrasts[0].result.lo:+.4f}, {contrasts[0].result.hi:+.4f}]")


if __name__ == "__main__":
    main()
