"""Large survey uploads: over a size threshold they import as a background job with a
progress page; over the hard limit they are refused from the Content-Length, nothing written.

The background import goes through a real Redis queue of this test's own and a real rq
SimpleWorker in burst mode (the job itself reads the files in worker processes); the progress
page is read before and after the worker ran."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rq import SimpleWorker

from experiments.core.survey import prepare
from experiments.data import import_jobs
from experiments.models import SurveyRespondent, SurveyStudy
from tests.conftest import private_rq_queue
from tests.survey_helpers import SAMPLE, jsonl, bad_answer_rows, sample_rows
from tests.test_survey_import import _counts

URL = reverse("survey_import", args=["alpha"])


@pytest.fixture
def private_queue(monkeypatch, settings, tmp_path):
    """A queue of this test's own; uploads over 1 MB (the 1.4 MB sample) go to it, copied under tmp_path."""
    with private_rq_queue("test-survey-imports") as queue:
        monkeypatch.setattr(import_jobs, "import_queue", lambda: queue)
        monkeypatch.setattr(prepare, "BATCH_ROWS", 3)  # four batches of the twelve respondents
        settings.OWNWORDS_SURVEY_BACKGROUND_MB = 1
        settings.OWNWORDS_IMPORT_DIR = tmp_path / "imports"
        yield queue


def run_worker(queue):
    SimpleWorker([queue], connection=queue.connection).work(burst=True)


def upload(name, content, **fields):
    return {"name": "twin", "files": [SimpleUploadedFile(name, content)], **fields}


@pytest.mark.slow
def test_an_upload_over_the_threshold_imports_in_the_background_with_progress(owner_client, private_queue, settings):
    content = SAMPLE.read_bytes()
    assert len(content) > 2**20
    response = owner_client.post(URL, upload("twin.jsonl", content, synthetic="on"))
    assert response.status_code == 302 and "/surveys/imports/" in response.url
    assert SurveyStudy.objects.count() == 0 and private_queue.count == 1  # nothing read in the request
    page = owner_client.get(response.url).content.decode()
    assert 'data-status="queued"' in page and "twin.jsonl" in page
    run_worker(private_queue)
    page = owner_client.get(response.url).content.decode()
    assert 'data-status="done"' in page and "twin: 12 respondent(s) imported; 0 excluded" in page
    study = SurveyStudy.objects.get(name="twin")
    assert study.synthetic and study.respondents.count() == 12 and study.source_files == ["twin.jsonl"]
    assert reverse("survey_study", args=["alpha", study.pk]) in page
    assert not list(settings.OWNWORDS_IMPORT_DIR.iterdir())  # the copies are gone
    # The interview imports' progress page does not show a survey import.
    job_id = response.url.rstrip("/").rsplit("/", 1)[1]
    assert owner_client.get(reverse("import_progress", args=["alpha", job_id])).status_code == 404


@pytest.mark.slow
def test_a_late_bad_respondent_in_the_background_imports_nothing_and_says_where(owner_client, private_queue, cast):
    rows, pid, qid = bad_answer_rows(10)
    before = _counts()
    response = owner_client.post(URL, upload("late.jsonl", jsonl(rows).encode()))
    assert response.status_code == 302
    run_worker(private_queue)
    page = owner_client.get(response.url).content.decode()
    assert 'data-status="failed"' in page and "Nothing imported as twin" in page
    assert f"late.jsonl, line 11, respondent {pid}" in page and qid in page
    assert _counts() == before  # the nine respondents written before line 11 were rolled back
    # Only owners of the project follow an import.
    owner_client.force_login(cast["analyst"])
    assert owner_client.get(response.url).status_code == 403
    owner_client.force_login(cast["outsider"])
    assert owner_client.get(response.url).status_code == 404


def test_a_name_in_use_is_refused_before_anything_is_queued(owner_client, private_queue, project):
    SurveyStudy.objects.create(project=project, name="twin")
    response = owner_client.post(URL, upload("twin.jsonl", SAMPLE.read_bytes()))
    assert response.status_code == 400 and "exists in this project already" in response.content.decode()
    assert private_queue.count == 0


def test_without_a_queue_a_large_upload_gets_a_message(owner_client, private_queue, monkeypatch):
    def unreachable():
        raise OSError("Redis is down")
    monkeypatch.setattr(import_jobs, "import_queue", unreachable)
    response = owner_client.post(URL, upload("twin.jsonl", SAMPLE.read_bytes()))
    assert response.status_code == 400 and "background queue does not answer" in response.content.decode()
    assert SurveyStudy.objects.count() == 0


def test_a_small_upload_still_imports_in_the_request(owner_client, private_queue):
    response = owner_client.post(URL, upload("four.jsonl", jsonl(sample_rows()[:4]).encode()), follow=True)
    assert "4 respondent(s) imported" in response.content.decode()
    assert private_queue.count == 0 and SurveyRespondent.objects.count() == 4


def test_an_upload_over_the_limit_is_refused_early_with_a_clear_message(owner_client, private_queue, settings):
    settings.OWNWORDS_SURVEY_MAX_UPLOAD_MB = 1
    before = _counts()
    response = owner_client.post(URL, upload("twin.jsonl", SAMPLE.read_bytes()))
    assert response.status_code == 413
    page = response.content.decode()
    assert "The upload is 1.3" in page and "at most 1 MB in all" in page and "manage.py import_survey" in page
    assert "Nothing was imported" in page
    assert _counts() == before and private_queue.count == 0
    # Two files each under it but over it together are refused by the form as well.
    half = jsonl(sample_rows()[:6]).encode()
    settings.OWNWORDS_SURVEY_MAX_UPLOAD_MB = (2 * len(half) - 1000) / 2**20
    response = owner_client.post(URL, {"name": "twin", "files": [SimpleUploadedFile("a.jsonl", half),
                                                                 SimpleUploadedFile("b.jsonl", half)]})
    assert "in all" in response.content.decode() and _counts() == before
    # The page states the limits before anyone uploads.
    assert 'id="upload-limits"' in owner_client.get(URL).content.decode()


def test_the_upload_page_still_checks_the_csrf_token(cast):
    from django.test import Client
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast["owner"])
    response = client.post(URL, upload("four.jsonl", jsonl(sample_rows()[:4]).encode()))
    assert response.status_code == 403 and SurveyStudy.objects.count() == 0
