"""Large imports: an upload limit with a clear message, and big files as a background job.

The background import goes through a real Redis queue of this test's own and a real rq
SimpleWorker in burst mode; the progress page is read before and after the worker ran.
"""
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rq import SimpleWorker

from experiments.data import import_jobs
from experiments.models import Session, Task, Turn
from tests.conftest import private_rq_queue, qa_turns
from tests.test_import_sessions import good_session

URL = reverse("session_import", args=["alpha"])


def jsonl(n: int, *, bad_line: int | None = None) -> bytes:
    lines = []
    for i in range(n):
        turns = [{"speaker": t.speaker, "text": t.text} for t in qa_turns(12 if i % 4 == 0 else 2)]
        lines.append(json.dumps(good_session(session_id=f"big-{i}", person_id=f"p-{i}", turns=turns)))
    if bad_line is not None:
        lines[bad_line - 1] = '{"session_id": "oops"'
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def private_queue(monkeypatch, settings, tmp_path):
    """A queue of this test's own; files over 20 KB go to it, copied under tmp_path."""
    with private_rq_queue("test-imports") as queue:
        monkeypatch.setattr(import_jobs, "import_queue", lambda: queue)
        settings.OWNWORDS_BACKGROUND_IMPORT_MB = 20 / 1024
        settings.OWNWORDS_IMPORT_DIR = tmp_path / "imports"
        yield queue


def run_worker(queue):
    SimpleWorker([queue], connection=queue.connection).work(burst=True)


@pytest.mark.slow
def test_a_file_over_the_threshold_imports_in_the_background_with_progress(owner_client, private_queue, settings):
    content = jsonl(400)
    assert len(content) > 20 * 1024
    response = owner_client.post(URL, {"files": [SimpleUploadedFile("big.jsonl", content)]})
    assert response.status_code == 302 and "/imports/" in response.url
    assert Session.objects.count() == 0 and private_queue.count == 1  # nothing read in the request
    page = owner_client.get(response.url).content.decode()
    assert 'data-status="queued"' in page and "big.jsonl" in page
    run_worker(private_queue)
    page = owner_client.get(response.url).content.decode()
    assert 'data-status="done"' in page and "big.jsonl: imported 400 sessions" in page
    assert Session.objects.count() == 400
    assert Turn.objects.count() == 100 * 24 + 300 * 4
    assert Task.objects.count() == 100 * 5  # the paper's rule: 12 pairs give 5 targets
    assert not list((settings.OWNWORDS_IMPORT_DIR).iterdir())  # the copy is gone


@pytest.mark.slow
def test_a_bad_line_late_in_a_background_file_imports_nothing_and_says_where(owner_client, private_queue, cast):
    response = owner_client.post(URL, {"files": [SimpleUploadedFile("big.jsonl", jsonl(3000, bad_line=2900))]})
    run_worker(private_queue)
    page = owner_client.get(response.url).content.decode()
    assert 'data-status="failed"' in page and "big.jsonl, line 2900" in page and "not valid JSON" in page
    assert Session.objects.count() == 0  # the batches stored before line 2,900 were rolled back
    # Only owners of the project follow an import.
    owner_client.force_login(cast["analyst"])
    assert owner_client.get(response.url).status_code == 403
    owner_client.force_login(cast["outsider"])
    assert owner_client.get(response.url).status_code == 404


def test_a_small_file_still_imports_in_the_request(owner_client, private_queue):
    response = owner_client.post(URL, {"files": [SimpleUploadedFile("small.jsonl", jsonl(2))]}, follow=True)
    assert "small.jsonl: imported 2 sessions" in response.content.decode()
    assert private_queue.count == 0 and Session.objects.count() == 2


def test_an_upload_over_the_limit_is_refused_with_a_clear_message(owner_client, settings):
    settings.OWNWORDS_MAX_UPLOAD_MB = 0.25
    response = owner_client.post(URL, {"files": [SimpleUploadedFile("huge.jsonl", jsonl(1200))]})
    assert response.status_code == 413
    page = response.content.decode()
    assert "MB; this server takes files of at most 0.25 MB" in page and "The upload is 1." in page
    assert "manage.py import_sessions" in page
    assert Session.objects.count() == 0
    # Within the request's size, a file over the limit is still refused by the form.
    small_request = jsonl(700)
    settings.OWNWORDS_MAX_UPLOAD_MB = len(small_request) / 2**20 - 0.001
    response = owner_client.post(URL, {"files": [SimpleUploadedFile("edge.jsonl", small_request)]})
    assert "edge.jsonl is" in response.content.decode() and Session.objects.count() == 0
    # The page states the limits before anyone uploads.
    assert 'id="upload-limits"' in owner_client.get(URL).content.decode()


def test_without_a_queue_a_large_file_gets_a_message(owner_client, private_queue, monkeypatch):
    def unreachable(**kwargs):
        raise import_jobs.QueueUnavailable("down")
    from experiments.web.projects import views
    monkeypatch.setattr(views, "import_enqueue", unreachable)
    response = owner_client.post(URL, {"files": [SimpleUploadedFile("big.jsonl", jsonl(400))]})
    assert response.status_code == 200 and "background queue does not answer" in response.content.decode()


def test_the_upload_page_still_checks_the_csrf_token(cast):
    from django.test import Client
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast["owner"])
    response = client.post(URL, {"files": [SimpleUploadedFile("small.jsonl", jsonl(2))]})
    assert response.status_code == 403 and Session.objects.count() == 0
