"""A file's people and studies are numbered in label order over the whole file.

A large file is stored in batches; numbering the people of each batch on its own would give
the same file other person and study ids when streamed than when read whole, and so another
bootstrap resample order. The streamed reader reads the file's labels in a first pass. The
tests use batches of 5 sessions instead of 2,000.
"""
import csv
import io
import json

from experiments.core.interviews.readers import read_interview_path, stream_binary, stream_interview_path
from experiments.data.sessions import project_get_or_create, sessions_import
from experiments.models import Person, Session, Study
from tests.conftest import qa_turns
from tests.test_import_sessions import good_session

SESSIONS = 23


def jsonl_file(path):
    """Labels run against the file order, so that a batch's labels are not the next in label order."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(SESSIONS):
            record = good_session(session_id=f"s-{i:02d}", person_id=f"p-{(SESSIONS - i) * 7 % SESSIONS:02d}",
                                  study_id=f"study-{(SESSIONS - i) % 4}")
            handle.write(json.dumps(record) + "\n")
    return path


def csv_file(path):
    text = "\n".join(f"{'Assistant' if t.speaker == 'interviewer' else 'User'}: {t.text}" for t in qa_turns(2))
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["transcript_id", "text"])
        for i in range(SESSIONS):
            writer.writerow([f"{'science' if i % 3 else 'creativity'}_{SESSIONS - i:04d}", text])
    return path


def numbering(project):
    """Each session with its person's and study's rank among the project's, by id."""
    people = {pk: rank for rank, pk in enumerate(Person.objects.filter(project=project).order_by("pk")
                                                 .values_list("pk", flat=True))}
    studies = {pk: rank for rank, pk in enumerate(Study.objects.filter(project=project).order_by("pk")
                                                  .values_list("pk", flat=True))}
    return sorted((s.external_id, people[s.person_id], studies[s.study_id])
                  for s in Session.objects.filter(project=project))


def import_into(slug, parsed, fmt):
    project, stored = project_get_or_create(slug=slug), []
    sessions_import(project=project, parsed=parsed, source_format=fmt, source_file="f", batch_size=5,
                    on_batch=stored.append)
    assert stored == [5, 10, 15, 20, 23]  # five batches
    return project


def labels_in_id_order(project):
    return (list(Person.objects.filter(project=project).order_by("pk").values_list("label", flat=True)),
            list(Study.objects.filter(project=project).order_by("pk").values_list("key", flat=True)))


def test_a_streamed_jsonl_file_of_several_batches_is_numbered_as_when_read_whole(db, tmp_path):
    path = jsonl_file(tmp_path / "many.jsonl")
    streamed = import_into("streamed", stream_interview_path(path), "jsonl")
    whole = import_into("whole", read_interview_path(path), "jsonl")
    people, studies = labels_in_id_order(streamed)
    assert people == sorted(people) and len(people) == SESSIONS
    assert studies == ["study-0", "study-1", "study-2", "study-3"]
    assert numbering(streamed) == numbering(whole)
    assert labels_in_id_order(streamed) == labels_in_id_order(whole)


def test_a_streamed_csv_file_of_several_batches_is_numbered_as_when_read_whole(db, tmp_path):
    path = csv_file(tmp_path / "many.csv")
    streamed = import_into("streamed", stream_interview_path(path), "anthropic-csv")
    whole = import_into("whole", read_interview_path(path), "anthropic-csv")
    people, studies = labels_in_id_order(streamed)
    assert people == sorted(people) and len(people) == SESSIONS
    assert studies == ["creativity", "science"]
    assert numbering(streamed) == numbering(whole)


def test_an_uploaded_file_read_as_a_stream_is_numbered_in_label_order_too(db, tmp_path):
    """The upload page and the background job read through `stream_binary`, from a file object."""
    content = jsonl_file(tmp_path / "many.jsonl").read_bytes()
    upload = io.BytesIO(content)
    parsed = stream_binary(lambda mode: upload, "many.jsonl", "jsonl", len(content))
    people, _ = labels_in_id_order(import_into("uploaded", parsed, "jsonl"))
    assert people == sorted(people) and len(people) == SESSIONS
