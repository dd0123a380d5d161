"""Respondents made ready to store, batch by batch, in worker processes if asked. No Django.

Importing a full release is mostly Python work per respondent: decoding the JSON columns, building
and checking every question, the leak check, the target items and the JSON the app stores. Here
that is done per batch of BATCH_ROWS rows, giving `PreparedRespondent`s (the stored values,
already formatted, with the respondent's leak violations and screener problem), so the app only
writes them. `prepare_paths(paths, workers=2)` runs the batches in worker processes while the
caller writes the previous ones: on two cores the reading then overlaps the database's work.

Whole or nothing stays the caller's rule, as with the reader: a `PreparedStream` yields batches in
input order until the first problem, reads the rest only to find every problem, and after the last
row raises `SurveyImportError` with all of them; the caller writes inside a transaction and so
keeps nothing. A file of the full_persona configuration raises at once.
"""
from __future__ import annotations

import json
import multiprocessing
import signal
from collections import deque
from itertools import islice
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from experiments.core.canonical import sha256_text
from experiments.core.survey.leaks import LeakViolation, leak_violations
from experiments.core.survey.questions import forget_shared
from experiments.core.survey.reader import (
    Unreadable, arrow_rows, decode_row, decode_utf8, json_rows, parquet_batches, respondent_of_row,
)
from experiments.core.survey.records import Block, Respondent, SurveyImportError, SurveyProblem
from experiments.core.survey.screener import ScreenerError, screener_text
from experiments.core.survey.targets import target_items

# Rows per batch: enough that a batch's round trip to a worker is small beside its work, few
# enough that the first batches are written while the workers read the next ones.
BATCH_ROWS = 100


class PreparedRespondent(NamedTuple):
    """A validated respondent as the app stores it."""

    pid: str
    location: str
    persona_text: str
    persona_json: str  # `blocks_json` of each column
    earlier_json: str
    wave4_json: str
    items: tuple  # per target item: (number, key, qid, row_id, block, question, row, options as JSON,
    #               kind, wave4, earlier)
    violations: tuple[LeakViolation, ...]  # empty: the respondent passed the leak check
    screener_problem: SurveyProblem | None  # the screener lines cannot be built
    persona_sha256: str  # what a sample's respondent list is hashed by
    wave4_sha256: str


class PreparedBatch(NamedTuple):
    respondents: list[PreparedRespondent]
    problems: list[SurveyProblem]
    pids: list[tuple[str, str]]  # (pid, location) of every valid row, prepared or not, for the repeat check
    source: str
    fatal: bool = False  # a full_persona file: nothing further is read


def blocks_json(blocks: tuple[Block, ...]) -> str:
    """A column's blocks as stored (`survey_data.blocks_from_json` rebuilds them)."""
    return json.dumps([[b.index, b.name, b.raw_name, [list(q) for q in b.questions]] for b in blocks],
                      ensure_ascii=False)


def prepare_respondent(respondent: Respondent) -> PreparedRespondent:
    try:
        screener_text(respondent)
        screener_problem = None
    except ScreenerError as error:
        screener_problem = SurveyProblem(respondent.location.split(" ")[0], "", respondent.pid, "screener", str(error))
    violations = tuple(leak_violations(respondent))
    items = () if violations else tuple(
        (i.number, i.key, i.qid, i.row_id, i.block, i.question, i.row, json.dumps(list(i.options), ensure_ascii=False),
         i.kind, i.wave4, i.earlier) for i in target_items(respondent))
    wave4 = blocks_json(respondent.wave4)
    return PreparedRespondent(
        respondent.pid, respondent.location, respondent.persona_text, blocks_json(respondent.persona),
        blocks_json(respondent.earlier), wave4, items, violations, screener_problem,
        sha256_text(respondent.persona_text), sha256_text(wave4))


def prepare_rows(rows: Iterable[tuple[str, object]], source: str) -> PreparedBatch:
    """Validate and prepare rows given as (location, row); a row's problems stop its preparation,
    and once the batch has one, the rows after it are only checked."""
    problems: list[SurveyProblem] = []
    prepared, pids = [], []
    for location, row in rows:
        respondent = respondent_of_row(row, source, location, problems)
        if respondent is None:
            continue
        pids.append((respondent.pid, location))
        if not problems:
            prepared.append(prepare_respondent(respondent))
    return PreparedBatch(prepared, problems, pids, source)


# --- tasks: what a worker is sent (picklable) and what it does with it ----------------------------

def prepare_task(task: tuple) -> PreparedBatch:
    """One batch: ("arrow", source, file name, first row number, record batch), ("jsonl", source,
    [(location, line)]), ("rows", source, [(location, row)]) or ("problem", SurveyProblem)."""
    kind, source = task[0], task[1]
    try:
        if kind == "problem":
            return PreparedBatch([], [task[1]], [], task[1].source)
        if kind == "arrow":
            return prepare_rows(arrow_rows(task[4], task[2], task[3]), source)
        if kind == "jsonl":
            return prepare_rows(((location, decode_row(line)) for location, line in task[2]), source)
        return prepare_rows(task[2], source)
    except SurveyImportError as error:  # the full_persona configuration: stop everything
        return PreparedBatch([], error.problems, [], source, fatal=True)
    finally:
        forget_shared()


def survey_tasks(path: Path) -> Iterator[tuple]:
    """The batches of one input path as tasks; a path that cannot be read at all is a problem task."""
    path = Path(path)
    try:
        if path.is_dir():
            chunks = sorted(path.glob("*.parquet"))
            if not chunks:
                raise SurveyImportError([SurveyProblem(path.name, "", "", "", "the folder holds no .parquet file")])
            yield from _arrow_tasks(chunks, path.name)
            return
        name = path.name.lower()
        if name.endswith(".parquet"):
            yield from _arrow_tasks([path], path.name)
        elif name.endswith(".jsonl"):
            text = decode_utf8(path.read_bytes(), path.name)
            lines = ((f"line {number}", line) for number, line in enumerate(text.split("\n"), 1) if line.strip())
            while batch := list(islice(lines, BATCH_ROWS)):
                yield ("jsonl", path.name, batch)
        elif name.endswith(".json"):
            rows = json_rows(decode_utf8(path.read_bytes(), path.name), path.name)
            for start in range(0, len(rows), BATCH_ROWS):
                yield ("rows", path.name, rows[start:start + BATCH_ROWS])
        else:
            raise SurveyImportError([SurveyProblem(path.name, "", "", "", "unknown file type: give a .parquet "
                                                   "file, a folder of them, a .jsonl or a .json file")])
    except SurveyImportError as error:
        for problem in error.problems:
            yield ("problem", problem)
    except OSError as error:
        yield ("problem", SurveyProblem(path.name, "", "", "", f"cannot be read ({error.strerror or error})"))


def _arrow_tasks(paths: list[Path], source: str) -> Iterator[tuple]:
    for path in paths:
        for batch in parquet_batches(path, BATCH_ROWS):
            if isinstance(batch, Unreadable):
                yield ("rows", source, [(batch.location, batch)])
            else:
                yield ("arrow", source, path.name, batch[0], batch[1])


# --- the stream -----------------------------------------------------------------------------------

def _in_workers(tasks: Iterator[tuple], workers: int) -> Iterator[PreparedBatch]:
    """`prepare_task` of each task in `workers` forked processes, the results in task order.

    Each worker has a pipe of its own and one task at a time: it gets its next task as soon as
    its result is in, and results are taken in the order the tasks went out. (multiprocessing's
    Pool shares one result queue and its lock among the workers: stopping early, its terminate
    could wait forever for that lock, held by a worker with a large result half written — an
    import that hung now and then.) The workers end with the stream, early or not: killed and
    reaped; nothing they hold is shared."""
    context = multiprocessing.get_context("fork")  # they need nothing but this module, and start at once
    pipes, processes = [], []
    try:
        for _ in range(workers):
            parent_end, child_end = context.Pipe()
            process = context.Process(target=_work, args=(child_end,), daemon=True)
            process.start()
            child_end.close()  # the worker's own now: its death reads as the end of the pipe
            pipes.append(parent_end)
            processes.append(process)
        waiting: deque[int] = deque()  # the workers holding a task, in the order the tasks went out

        def hand_next_task(index: int) -> bool:
            if (task := next(tasks, None)) is None:
                return False
            pipes[index].send(task)
            waiting.append(index)
            return True

        for index in range(len(pipes)):  # one task each to begin with
            if not hand_next_task(index):
                break
        while waiting:
            index = waiting.popleft()
            try:
                failed, value = pipes[index].recv()
            except EOFError:
                raise RuntimeError("a survey import worker process ended without its result") from None
            if failed:
                raise value
            hand_next_task(index)  # the worker goes on while the caller stores this batch
            yield value
    finally:
        for process in processes:
            process.kill()
        for process in processes:
            process.join()
        for pipe in pipes:
            pipe.close()


def _work(pipe) -> None:
    """A worker of `_in_workers`: tasks in, (failed, batch or exception) out, until killed."""
    _worker_signals()
    while True:
        try:
            task = pipe.recv()
        except EOFError:
            return
        try:
            result = (False, prepare_task(task))
        except Exception as exc:  # the caller raises it
            result = (True, exc)
        pipe.send(result)


def _worker_signals() -> None:
    """A forked worker inherits its parent's signal handlers: an rq worker's, for one, turns SIGTERM
    into a "warm shutdown" request. A worker dies on SIGTERM; Ctrl-C is for the parent, which
    ends the workers."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class PreparedStream:
    """Batches of prepared respondents of some input paths, in order (see the module docstring).

    `rows_read` counts the valid rows read so far; `sources` names the paths."""

    def __init__(self, paths: Iterable[Path], workers: int = 2):
        self.paths = [Path(p) for p in paths]
        self.sources = [p.name for p in self.paths]
        self.workers = workers
        self.rows_read = 0

    def _results(self) -> Iterator[PreparedBatch]:
        tasks = (task for path in self.paths for task in survey_tasks(path))
        if self.workers <= 1:
            yield from map(prepare_task, tasks)
            return
        yield from _in_workers(tasks, self.workers)

    def __iter__(self) -> Iterator[list[PreparedRespondent]]:
        problems: list[SurveyProblem] = []
        seen: dict[str, tuple[str, str]] = {}
        for batch in self._results():
            if batch.fatal:
                raise SurveyImportError(batch.problems)
            problems.extend(batch.problems)
            for pid, location in batch.pids:
                if pid in seen:
                    first_source, first = seen[pid]
                    where = first if first_source == batch.source else f"{first_source} {first}"
                    problems.append(SurveyProblem(batch.source, location, pid, "pid",
                                                  f"the pid appears twice (first at {where})"))
                else:
                    seen[pid] = (batch.source, location)
            self.rows_read = len(seen)
            if not problems:
                yield batch.respondents
        if not seen and not problems:
            problems.append(SurveyProblem(", ".join(self.sources), "", "", "", "the input holds no respondent"))
        if problems:
            raise SurveyImportError(problems)


def prepared_batches(respondents: Iterable[Respondent], size: int = BATCH_ROWS) -> Iterator[list[PreparedRespondent]]:
    """Respondents already read (a list or the reader's stream), prepared here in batches."""
    iterator = iter(respondents)
    while batch := list(islice(iterator, size)):
        yield [prepare_respondent(r) for r in batch]
