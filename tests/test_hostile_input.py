"""Hostile input: NUL characters and lone surrogates get a clear message, never a 500.

Every input path: the three import formats through the command and the upload page, the
commands' names (project, cohort), the project forms, a session's URL. On PostgreSQL a NUL
in text is refused by the database and a lone surrogate cannot be encoded at all: that is
where the 500s came from, so run this file there too (CI does).
"""
import json
import shutil
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from experiments.models import Cohort, Project, Session
from experiments.web.projects.forms import CohortForm, ImportForm
from experiments.web.text_input import StorableTextMixin, storable_text_validator
from tests.test_import_sessions import GENAGENTS, db_counts, good_session

NUL, SURROGATE = "\x00", "\ud800"
BAD = {"nul": NUL, "surrogate": SURROGATE}
MESSAGES = {"nul": "NUL character", "surrogate": "lone surrogate (\\ud800)"}


def jsonl_with(where: str, bad: str) -> str:
    """One session whose field `where` holds `bad`, written as JSON escapes (as a real file would)."""
    record = good_session()
    if where in ("session_id", "person_id", "study_id", "language"):
        record[where] = f"x{bad}y"
    elif where == "screener":
        record["screener"] = [{"question": f"Age{bad}?", "answer": "41"}]
    elif where == "turn":
        record["turns"][1]["text"] = f"I compose{bad} music"
    elif where == "key":
        record[f"mood{bad}"] = "happy"
    return json.dumps(record)  # ensure_ascii: "\u0000" and "\ud800" escapes


JSONL_FIELDS = ["session_id", "person_id", "study_id", "language", "screener", "turn", "key"]


def run_import(path, *args):
    out = StringIO()
    call_command("import_sessions", str(path), *args, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("kind", sorted(BAD))
@pytest.mark.parametrize("where", JSONL_FIELDS)
def test_jsonl_through_the_command(db, tmp_path, where, kind):
    path = tmp_path / "hostile.jsonl"
    path.write_text(jsonl_with(where, BAD[kind]) + "\n")
    before = db_counts()
    with pytest.raises(CommandError) as excinfo:
        run_import(path, "--project", "p")
    message = str(excinfo.value)
    assert "nothing imported" in message and "hostile.jsonl, line 1" in message
    if where != "key":  # an unknown field is refused as unknown, its name printed escaped
        assert MESSAGES[kind] in message
    assert NUL not in message and SURROGATE not in message  # the message itself can be printed
    message.encode("utf-8")
    assert db_counts() == before


def genagents_folder(tmp_path, kind, where):
    folder = tmp_path / "agent"
    shutil.copytree(GENAGENTS, folder)
    bad = BAD[kind]
    if where == "demographics value":
        demographics = json.loads((folder / "scratch_demographics.json").read_text())
        demographics["occupation"] = f"farmer{bad}"
        (folder / "scratch_demographics.json").write_text(json.dumps(demographics))
    elif where == "demographics key":
        demographics = json.loads((folder / "scratch_demographics.json").read_text())
        demographics[f"hobby{bad}"] = "bees"
        (folder / "scratch_demographics.json").write_text(json.dumps(demographics))
    elif where == "meta id":
        (folder / "meta.json").write_text(json.dumps({"id": f"agent{bad}1"}))
    elif where == "node":
        nodes = json.loads((folder / "nodes.json").read_text())
        nodes[1]["content"] = nodes[1]["content"] + bad
        (folder / "nodes.json").write_text(json.dumps(nodes))
    return folder


GENAGENTS_PLACES = ["demographics value", "demographics key", "meta id", "node"]


@pytest.mark.parametrize("kind", sorted(BAD))
@pytest.mark.parametrize("where", GENAGENTS_PLACES)
def test_genagents_through_the_command(db, tmp_path, where, kind):
    folder = genagents_folder(tmp_path, kind, where)
    before = db_counts()
    with pytest.raises(CommandError) as excinfo:
        run_import(folder, "--project", "p")
    assert MESSAGES[kind] in str(excinfo.value)
    str(excinfo.value).encode("utf-8")
    assert db_counts() == before


def test_anthropic_csv_through_the_command(db, tmp_path):
    path = tmp_path / "hostile.csv"
    path.write_text('transcript_id,text\nx_1,"AI: What do you do?\nUser: I write\x00 music for films, mostly."\n')
    with pytest.raises(CommandError, match="row 2.*NUL character"):
        run_import(path, "--project", "p")
    # A surrogate cannot be written in UTF-8: its bytes are invalid UTF-8, and said so.
    path.write_bytes(b'transcript_id,text\nx_1,"User: caf\xed\xa0\x80 au lait and more words"\n')
    with pytest.raises(CommandError, match="not valid UTF-8"):
        run_import(path, "--project", "p")
    assert Session.objects.count() == 0


@pytest.mark.parametrize("kind", sorted(BAD))
def test_command_names(db, tmp_path, imported, kind):
    bad = BAD[kind]
    path = tmp_path / "good.jsonl"
    path.write_text(json.dumps(good_session()) + "\n")
    with pytest.raises(CommandError, match="--project"):
        run_import(path, "--project", f"p{bad}")
    for command, args in (("derive_tasks", ["--project", f"alpha{bad}"]),
                          ("draw_cohort", ["--project", f"alpha{bad}", "--name", "c", "--size", "1", "--seed", "1"]),
                          ("draw_cohort", ["--project", "alpha", "--name", f"c{bad}", "--size", "1", "--seed", "1"]),
                          ("draw_cohort", ["--project", "alpha", "--name", "c", "--size", "1", "--seed", "1",
                                           "--exclude-cohort", f"old{bad}"])):
        with pytest.raises(CommandError) as excinfo:
            call_command(command, *args, stdout=StringIO())
        assert MESSAGES[kind].split(" (")[0] in str(excinfo.value) or "no " in str(excinfo.value)
    assert not Cohort.objects.exists()
    # A file name that is not valid UTF-8 (a surrogate-escaped argv) is stored printable.
    odd = tmp_path / "caf\udce9.jsonl"
    odd.write_text(json.dumps(good_session(session_id="odd")) + "\n")
    assert "caf\\udce9.jsonl" in run_import(odd, "--project", "alpha")
    assert Session.objects.get(external_id="odd").source_file == "caf\\udce9.jsonl"


@pytest.mark.parametrize("kind", sorted(BAD))
@pytest.mark.parametrize("where", JSONL_FIELDS)
def test_jsonl_through_the_upload_page(owner_client, where, kind):
    upload = SimpleUploadedFile("hostile.jsonl", (jsonl_with(where, BAD[kind]) + "\n").encode())
    response = owner_client.post(reverse("session_import", args=["alpha"]), {"files": [upload]})
    assert response.status_code == 200
    page = response.content.decode()
    assert "Nothing imported from hostile.jsonl" in page
    if where != "key":
        assert MESSAGES[kind] in page
    assert Session.objects.count() == 0


@pytest.mark.parametrize("kind", sorted(BAD))
def test_genagents_through_the_upload_page(owner_client, tmp_path, kind):
    folder = genagents_folder(tmp_path, kind, "demographics value")
    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(folder.glob("*.json"))]
    response = owner_client.post(reverse("session_import", args=["alpha"]), {"files": files})
    assert response.status_code == 200 and MESSAGES[kind] in response.content.decode()
    assert Session.objects.count() == 0


def test_an_upload_whose_name_holds_a_nul_is_stored_printable(owner_client):
    upload = SimpleUploadedFile("a\x00b.jsonl", (json.dumps(good_session()) + "\n").encode())
    response = owner_client.post(reverse("session_import", args=["alpha"]), {"files": [upload]}, follow=True)
    assert response.status_code == 200
    assert "\x00" not in Session.objects.get().source_file


def test_forms_refuse_nul_and_surrogates_with_a_message(imported):
    for bad, message in ((NUL, "Null characters are not allowed."), (SURROGATE, "lone surrogate")):
        form = CohortForm({"name": f"c{bad}", "size": 1, "seed": 1}, project=imported)
        assert not form.is_valid() and message in " ".join(form.errors["name"])
        form = ImportForm({"format": f"jsonl{bad}"}, {"files": [SimpleUploadedFile("a.jsonl", b"{}")]})
        assert not form.is_valid() and "format" in form.errors
    with pytest.raises(Exception, match="lone surrogate"):
        storable_text_validator({"key": ["ok", {"nested\ud800": 1}]})
    storable_text_validator({"key": ["ok", 3, None]})

    from django import forms

    class ProtocolLike(StorableTextMixin, forms.Form):
        name = forms.CharField()
        settings = forms.JSONField()

    form = ProtocolLike({"name": "p", "settings": '{"model": "x\\u0000y"}'})
    assert not form.is_valid() and "NUL character" in " ".join(form.errors["settings"])


def test_posted_nul_and_undecodable_bytes_get_a_message_not_a_500(owner_client, imported):
    url = reverse("cohort_draw", args=["alpha"])
    # A NUL is refused before any view reads it (the input gate, ownwords_site/middleware.py): 400, said so.
    response = owner_client.post(url, b"name=c%00d&size=1&seed=1", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400 and "NUL" in response.content.decode()
    response = owner_client.post(url, b"name=c%ED%A0%80d&size=1&seed=1", content_type="application/x-www-form-urlencoded",
                                 follow=True)
    assert response.status_code == 200
    # Undecodable bytes arrive as U+FFFD (Django decodes with "replace"): a storable name.
    assert list(Cohort.objects.values_list("name", flat=True)) == ["c\ufffd\ufffd\ufffdd"]
    response = owner_client.post(reverse("tasks_derive", args=["alpha"]), b"min_pairs=1%00&min_targets=1&max_targets=1",
                                 content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400


def test_a_session_url_with_a_nul_is_not_found(owner_client, imported):
    assert owner_client.get("/p/alpha/sessions/sess-a%00/").status_code == 404
    assert owner_client.get("/p/alpha/sessions/sess-a/").status_code == 200
    assert Project.objects.count() == 2
