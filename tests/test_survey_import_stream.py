"""Survey imports streamed: respondents read and prepared in worker processes
(`core.survey.prepare`) while the import writes them batch by batch, in one transaction.

The stream must store exactly what the list import stores, and a problem found late (after
batches were written) must still leave nothing behind, with a message naming the respondent
and the question."""
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from experiments.core.survey import prepare
from experiments.core.survey.prepare import PreparedStream
from experiments.core.survey.reader import iter_survey_path, read_survey_path
from experiments.core.survey.records import SurveyImportError
from experiments.models import Cohort, Project, SurveyItem, SurveyRespondent
from experiments.data.surveys import survey_import
from tests.survey_helpers import FULL_PERSONA_SAMPLE, SAMPLE, jsonl, bad_answer_rows, sample_rows
from tests.test_survey_import import _counts


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of three rows, so the twelve sample respondents come in four batches (the workers
    are forked after this, and tasks are cut in this process)."""
    monkeypatch.setattr(prepare, "BATCH_ROWS", 3)


def _stored(project):
    respondents = SurveyRespondent.objects.filter(study__project=project).order_by("pk")
    items = SurveyItem.objects.filter(respondent__study__project=project).order_by("respondent_id", "number")
    return ([(r.pid, r.persona_text, r.persona_json, r.earlier_json, r.wave4_json, r.location) for r in respondents],
            [(i.respondent.pid, i.number, i.key, i.question, i.row, i.options, i.kind, i.wave4, i.earlier)
             for i in items.select_related("respondent")],
            [(c.name, c.requested_size, c.task_list_sha256)
             for c in Cohort.objects.filter(project=project).order_by("name")])


@pytest.mark.django_db
def test_parallel_stream_reader_stream_and_list_store_the_same(small_batches):
    stored = []
    for slug, respondents in (("list", read_survey_path(SAMPLE)), ("stream", iter_survey_path(SAMPLE)),
                              ("parallel", PreparedStream([SAMPLE], 2)), ("in-process", PreparedStream([SAMPLE], 0))):
        project = Project.objects.create(slug=slug, name=slug)
        result = survey_import(project=project, name="twin", respondents=respondents, sources=[SAMPLE.name])
        assert result.imported == 12 and result.study.rows_read == 12
        stored.append(_stored(project))
    assert len(stored[0][0]) == 12 and len(stored[0][1]) > 12 * 79 and len(stored[0][2]) == 2
    assert all(s == stored[0] for s in stored[1:])


@pytest.mark.django_db
def test_parquet_folder_through_workers(tmp_path, small_batches):
    rows = sample_rows()
    schema = pa.schema([("pid", pa.int64())] + [(c, pa.string()) for c in list(rows[0])[1:]])
    chunks = tmp_path / "chunks"
    chunks.mkdir()
    pq.write_table(pa.Table.from_pylist(rows[:7], schema=schema), chunks / "wave_persona_chunk_001.parquet")
    pq.write_table(pa.Table.from_pylist(rows[7:], schema=schema), chunks / "wave_persona_chunk_002.parquet")
    out = call_command("import_survey", str(chunks), "--project", "pq", "--name", "twin", "--workers", "2")
    assert "12 respondent(s) imported" in out
    locations = list(SurveyRespondent.objects.order_by("pk").values_list("location", flat=True))
    assert locations[0] == "chunks wave_persona_chunk_001.parquet row 1"
    assert locations[7] == "chunks wave_persona_chunk_002.parquet row 1"
    assert [r.pid for r in SurveyRespondent.objects.order_by("pk")] == [r.pid for r in read_survey_path(SAMPLE)]


def _late_bad_file(tmp_path):
    """The sample with respondent 11 of 12 giving an answer outside its options, as a file."""
    rows, pid, qid = bad_answer_rows(10)
    path = tmp_path / "late.jsonl"
    path.write_text(jsonl(rows))
    return path, pid, qid


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("workers", [2, 0])
def test_a_late_bad_respondent_leaves_nothing_after_batches_were_written(tmp_path, small_batches, workers):
    path, pid, qid = _late_bad_file(tmp_path)
    project = Project.objects.create(slug="late", name="late")
    before = _counts()
    written = []

    def on_batch(read):
        written.append((read, SurveyRespondent.objects.count()))

    with pytest.raises(SurveyImportError) as caught:
        survey_import(project=project, name="late", respondents=PreparedStream([path], workers), sources=[path.name],
                      on_batch=on_batch)
    # three batches (nine respondents) were stored inside the transaction before the problem came
    assert written == [(3, 3), (6, 6), (9, 9)]
    message = str(caught.value)
    assert f"late.jsonl, line 11, respondent {pid}" in message and qid in message
    assert "nothing was imported" in message
    assert _counts() == before  # the project existed before; nothing else did


@pytest.mark.django_db
def test_late_bad_respondent_through_the_command(tmp_path, small_batches):
    path, pid, qid = _late_bad_file(tmp_path)
    before = _counts()
    with pytest.raises(CommandError) as caught:
        call_command("import_survey", str(path), "--project", "late", "--workers", "2")
    assert f"respondent {pid}" in str(caught.value) and qid in str(caught.value)
    assert _counts() == before and not Project.objects.filter(slug="late").exists()


@pytest.mark.django_db
def test_a_pid_in_two_files_names_both(tmp_path, small_batches):
    rows = sample_rows()
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(jsonl(rows[:6]))
    second.write_text(jsonl(rows[5:]))
    before = _counts()
    with pytest.raises(CommandError) as caught:
        call_command("import_survey", str(first), str(second), "--project", "two")
    assert f"b.jsonl, line 1, respondent {rows[5]['pid']}, pid: the pid appears twice (first at a.jsonl line 6)" \
        in str(caught.value)
    assert _counts() == before


@pytest.mark.django_db
def test_full_persona_stops_the_stream_at_once(small_batches):
    before = _counts()
    with pytest.raises(CommandError, match="full_persona configuration"):
        call_command("import_survey", str(SAMPLE), str(FULL_PERSONA_SAMPLE), "--project", "full", "--workers", "2")
    assert _counts() == before


def test_every_problem_of_every_batch_is_reported(tmp_path, small_batches):
    rows = sample_rows()
    for index in (1, 7, 11):  # in three different batches
        rows[index] = dict(rows[index], wave1_3_persona_json="{not json")
    path = tmp_path / "three.jsonl"
    path.write_text(jsonl(rows))
    with pytest.raises(SurveyImportError) as caught:
        list(PreparedStream([path], 2))
    assert [(p.location, p.where) for p in caught.value.problems] == [
        (f"line {n}", "wave1_3_persona_json") for n in (2, 8, 12)]


STOPPED_EARLY = """
import signal, sys
sys.path.insert(0, {repo!r})
from experiments.core.survey import prepare
# A parent whose SIGTERM handler does not stop it, as an rq worker's (a "warm shutdown"):
signal.signal(signal.SIGTERM, lambda *args: print("warm shutdown requested", flush=True))
prepare.BATCH_ROWS = 1
stream = iter(prepare.PreparedStream([{sample!r}], 2))
first = next(stream)
stream.close()  # the import stops early (as on a database error): the pool must end, not hang
print("closed", len(first), flush=True)
"""


def test_a_stream_stopped_early_ends_its_workers_even_under_an_rq_worker(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    script = STOPPED_EARLY.format(repo=str(Path(__file__).resolve().parents[1]), sample=str(SAMPLE))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["closed 1"]
