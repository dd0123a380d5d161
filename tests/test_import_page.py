"""The owners' upload page shares the command's validator: all or nothing per file."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from experiments.models import Session, Turn
from tests.test_import_sessions import GENAGENTS, db_counts, jsonl_line

URL = reverse("session_import", args=["alpha"])


def upload(name, content):
    return SimpleUploadedFile(name, content.encode("utf-8") if isinstance(content, str) else content)


def test_an_owner_uploads_a_jsonl_file_and_lands_on_the_project_page(owner_client):
    response = owner_client.post(URL, {"files": [upload("a.jsonl", jsonl_line() + "\n")]}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("project_detail", args=["alpha"])
    assert "a.jsonl: imported 1 sessions, 2 turns" in response.content.decode()
    assert Session.objects.get().source_format == "jsonl"


def test_a_bad_file_shows_where_it_is_wrong_and_stores_nothing(owner_client):
    before = db_counts()
    bad = jsonl_line(session_id="ok") + "\n" + jsonl_line(turns=[{"speaker": "robot", "text": "beep"}])
    response = owner_client.post(URL, {"files": [upload("bad.jsonl", bad)]})
    body = response.content.decode()
    assert response.status_code == 200
    assert "Nothing imported from bad.jsonl" in body
    assert "bad.jsonl, line 2, field &#x27;turns[0].speaker&#x27;: unknown speaker &#x27;robot&#x27;" in body
    assert db_counts() == before


def test_each_file_is_its_own_transaction(owner_client):
    good = upload("good.jsonl", jsonl_line(session_id="g1") + "\n")
    bad = upload("bad.csv", "wrong,header\n")
    response = owner_client.post(URL, {"files": [good, bad]})
    body = response.content.decode()
    assert "good.jsonl: imported 1 sessions" in body and "Nothing imported from bad.csv" in body
    assert list(Session.objects.values_list("external_id", flat=True)) == ["g1"]


def test_the_three_genagents_files_upload_together(owner_client):
    files = [upload(name, (GENAGENTS / name).read_bytes()) for name in ("nodes.json", "scratch_demographics.json", "meta.json")]
    owner_client.post(URL, {"files": files})
    assert Session.objects.get().source_format == "genagents"
    assert Turn.objects.count() == 227


def test_an_unknown_file_type_asks_for_a_format(owner_client):
    response = owner_client.post(URL, {"files": [upload("notes.txt", jsonl_line())]})
    assert "cannot tell the format" in response.content.decode()
    response = owner_client.post(URL, {"files": [upload("notes.txt", jsonl_line())], "format": "jsonl"}, follow=True)
    assert Session.objects.count() == 1


def test_binary_garbage_is_refused_cleanly(owner_client):
    response = owner_client.post(URL, {"files": [upload("x.csv", b"\xff\xfe\x00garbage")]})
    assert "not valid UTF-8" in response.content.decode()
    assert Session.objects.count() == 0


def test_posting_without_a_file_shows_the_form_error(owner_client):
    response = owner_client.post(URL, {})
    assert response.status_code == 200 and "This field is required" in response.content.decode()


@pytest.mark.parametrize("who", ["analyst", "rater", "viewer"])
def test_other_roles_cannot_upload(client, cast, who):
    client.force_login(cast[who])
    response = client.post(URL, {"files": [upload("a.jsonl", jsonl_line() + "\n")]})
    assert response.status_code == 403
    assert Session.objects.count() == 0
