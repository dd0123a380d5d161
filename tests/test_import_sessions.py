"""import_sessions: good files of all three formats, and every kind of bad input."""
import csv
import json
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from experiments.models import Person, Project, ScreenerItem, Session, Study, Task, Turn

SAMPLE = Path(__file__).resolve().parents[1] / "experiments" / "sample_data"
CREATIVES = SAMPLE / "anthropic-interviewer" / "creatives_transcripts.csv"
SCIENTISTS = SAMPLE / "anthropic-interviewer" / "scientists_transcripts.csv"
GENAGENTS = SAMPLE / "genagents-sample"


def db_counts():
    return {
        model.__name__: model.objects.count()
        for model in (Project, Study, Person, Session, Turn, ScreenerItem, Task)
    }


def run_import(path, *args):
    out = StringIO()
    call_command("import_sessions", str(path), *args, stdout=out)
    return out.getvalue()


def good_session(**overrides):
    record = {
        "session_id": "s-1",
        "person_id": "p-1",
        "study_id": "study-1",
        "language": "en",
        "screener": [{"question": "Age?", "answer": "41"}],
        "turns": [
            {"speaker": "interviewer", "text": "What do you do for a living, if I may ask?"},
            {"speaker": "participant", "text": "  I compose music for films, mostly.  "},
        ],
    }
    record.update(overrides)
    return record


# --- good input ---------------------------------------------------------------------

def independent_anthropic_counts(path):
    """Sessions and turns counted straight from the raw file, without the app's CSV reader."""
    raw = path.read_text(encoding="utf-8")
    sessions = len(re.findall(r"^(?:creativity|science)_\d{4},", raw, flags=re.M))
    # A turn marker opens a line, or opens the quoted cell right after the id.
    turns = len(re.findall(r'^(?:(?:creativity|science)_\d{4},")?(?:Assistant|AI|User):', raw, flags=re.M))
    return sessions, turns


def independent_task_count(path, min_pairs, min_targets, max_targets):
    """The App. G rule, written again from its text, over the raw CSV cells."""
    total = 0
    csv.field_size_limit(10**8)
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            pieces = re.split(r"^(Assistant|AI|User):", row["text"], flags=re.M)[1:]
            turns = [(pieces[i] != "User", pieces[i + 1].strip()) for i in range(0, len(pieces), 2)]
            pairs = [
                j
                for j in range(len(turns) - 1)
                if turns[j][0] and "?" in turns[j][1] and len(turns[j][1]) >= 20
                and not turns[j + 1][0] and len(turns[j + 1][1].split()) >= 5
            ]
            second = pairs[len(pairs) // 2:]
            if len(pairs) >= min_pairs and len(second) >= min_targets:
                total += min(len(second), max_targets)
    return total


def test_it_imports_both_anthropic_files_with_independently_counted_sessions_turns_and_tasks(db):
    run_import(CREATIVES, "--project", "demo", "--min-pairs", "8", "--min-targets", "3")
    run_import(SCIENTISTS, "--project", "demo")
    expected_sessions = sum(independent_anthropic_counts(p)[0] for p in (CREATIVES, SCIENTISTS))
    expected_turns = sum(independent_anthropic_counts(p)[1] for p in (CREATIVES, SCIENTISTS))
    expected_tasks = sum(independent_task_count(p, 8, 3, 5) for p in (CREATIVES, SCIENTISTS))
    assert (expected_sessions, expected_turns) == (250, 5088)
    assert Session.objects.count() == expected_sessions
    assert Turn.objects.count() == expected_turns
    assert Task.objects.count() == expected_tasks
    assert sorted(Study.objects.values_list("key", flat=True)) == ["creativity", "science"]
    assert Person.objects.count() == 250  # each transcript is one person


def test_the_paper_thresholds_leave_seven_eligible_anthropic_sessions(db):
    run_import(CREATIVES, "--project", "demo")
    run_import(SCIENTISTS, "--project", "demo")
    expected = sum(independent_task_count(p, 12, 5, 5) for p in (CREATIVES, SCIENTISTS))
    assert Task.objects.count() == expected
    assert Task.objects.values("session").distinct().count() == 7


def test_it_imports_the_genagents_folder_with_its_demographics_as_screener(db):
    message = run_import(GENAGENTS, "--project", "demo")
    nodes = json.loads((GENAGENTS / "nodes.json").read_text())
    demographics = json.loads((GENAGENTS / "scratch_demographics.json").read_text())
    expected_turns = 0
    for node in nodes:
        question, _, answer = node["content"].removeprefix("Interviewer:").partition("\n\nJoon:")
        expected_turns += bool(question.strip()) + bool(answer.strip())
    session = Session.objects.get()
    assert "imported 1 sessions" in message
    assert session.external_id == json.loads((GENAGENTS / "meta.json").read_text())["id"]
    assert session.turns.count() == expected_turns
    assert session.screener_items.count() == len(demographics)
    assert session.screener_items.get(index=0).answer == "Joon"
    assert session.turns.filter(speaker="participant").first().text.startswith("Right. So I was born in Korea.")


def test_it_keeps_turn_text_exactly_as_given_in_jsonl(db, tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(good_session()) + "\n")
    run_import(path, "--project", "p")
    assert Turn.objects.get(index=1).text == "  I compose music for films, mostly.  "
    assert Session.objects.get().screener_items.get().question == "Age?"


def test_it_strips_only_the_whitespace_around_an_anthropic_turn(db, tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('transcript_id,text\nx_1,"Assistant: Hello there?\n\nUser:   one  two\n\nthree four five  \n"\n')
    run_import(path, "--project", "p")
    assert list(Turn.objects.order_by("index").values_list("speaker", "text")) == [
        ("interviewer", "Hello there?"),
        ("participant", "one  two\n\nthree four five"),
    ]


def test_it_creates_the_project_when_missing(db, tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(good_session()) + "\n")
    run_import(path, "--project", "fresh")
    assert Project.objects.get(slug="fresh").sessions.count() == 1


# --- bad input: a clear message naming file, line/row and field; nothing changes ---------

def jsonl_line(**overrides):
    return json.dumps(good_session(**overrides))


BAD_JSONL = {
    "malformed json": ('{"session_id": "s-1",', "line 1", "not valid JSON"),
    "not an object": ("[1, 2]", "line 1", "must be a JSON object"),
    "missing field": (json.dumps({k: v for k, v in good_session().items() if k != "person_id"}), "line 1", "field 'person_id': is missing"),
    "unknown field": (jsonl_line(mood="happy"), "line 1", "field 'mood': is not a known field"),
    "wrong type id": (jsonl_line(session_id=7), "line 1", "field 'session_id': must be a string"),
    "empty id": (jsonl_line(person_id="  "), "line 1", "field 'person_id': must not be empty"),
    "turns not a list": (jsonl_line(turns="hello"), "line 1", "field 'turns': must be a list"),
    "turn wrong type": (jsonl_line(turns=[{"speaker": "participant", "text": 5}]), "line 1", "field 'turns[0].text': must be a string"),
    "unknown speaker": (jsonl_line(turns=[{"speaker": "bot", "text": "hi there"}]), "line 1", "field 'turns[0].speaker': unknown speaker 'bot'"),
    "turn unknown field": (jsonl_line(turns=[{"speaker": "participant", "text": "x", "t": 1}]), "line 1", "field 'turns[0].t'"),
    "empty interview": (jsonl_line(turns=[]), "line 1", "the interview is empty"),
    "no participant speech": (jsonl_line(turns=[{"speaker": "interviewer", "text": "Anyone there?"}]), "line 1", "no participant speech"),
    "turn over the size limit": (jsonl_line(turns=[{"speaker": "participant", "text": "x" * 20_001}]), "line 1", "is 20,001 characters long; the limit is 20,000"),
    "nul character": (jsonl_line(turns=[{"speaker": "participant", "text": "a\u0000b"}]), "line 1", "NUL character"),
    "screener malformed": (jsonl_line(screener=[{"q": "Age?"}]), "line 1", "field 'screener[0]'"),
    "language wrong type": (jsonl_line(language=3), "line 1", "field 'language'"),
    "non-finite number": ('{"session_id": NaN}', "line 1", "not valid JSON"),
    "duplicate key": ('{"session_id": "a", "session_id": "b"}', "line 1", "duplicate key 'session_id'"),
    "second line bad": (jsonl_line() + "\n" + "{oops", "line 2", "not valid JSON"),
    "session id twice in file": (jsonl_line() + "\n" + jsonl_line(), "line 2", "repeats the session of line 1"),
    "empty file": ("", "", "contains no sessions"),
}


@pytest.mark.parametrize("case", sorted(BAD_JSONL))
def test_bad_jsonl_gets_a_clear_message_and_changes_nothing(db, tmp_path, case):
    content, location, expected = BAD_JSONL[case]
    path = tmp_path / "bad.jsonl"
    # A good session first: the whole file must still be refused.
    if location != "line 1" and location:
        path.write_text(content + "\n")
    else:
        path.write_text(jsonl_line(session_id="good-one") + "\n" + content + "\n" if content else "")
        location = "line 2" if content else ""
    before = db_counts()
    with pytest.raises(CommandError) as excinfo:
        run_import(path, "--project", "p")
    message = str(excinfo.value)
    assert "nothing imported" in message
    assert "bad.jsonl" in message
    assert location in message
    assert expected in message
    assert db_counts() == before


BAD_CSV = {
    "wrong columns": ("id,text\nx_1,\"User: hello\"\n", "row 1", "columns must be transcript_id,text"),
    "extra column": ("transcript_id,text,extra\nx_1,a,b\n", "row 1", "columns must be transcript_id,text"),
    "unterminated quote": ('transcript_id,text\nx_1,"User: hi\n', "row 2", "not valid CSV"),
    "too many cells": ("transcript_id,text\nx_1,\"User: a b c d e\",more\n", "row 2", "has 3 cells"),
    "text before first marker": ('transcript_id,text\nx_1,"Hello\nUser: a b c d e"\n', "row 2", "text before the first"),
    "no turns": ('transcript_id,text\nx_1,"just words"\n', "row 2", "text before the first"),
    "no split prefix": ('transcript_id,text\nnoprefix,"User: a b c d e"\n', "row 2", "has no split prefix"),
    "empty id": ('transcript_id,text\n,"User: a b c d e"\n', "row 2", "field 'transcript_id': must not be empty"),
    "only interviewer": ('transcript_id,text\nx_1,"AI: anyone there?"\n', "row 2", "no participant speech"),
    "turn too long": ('transcript_id,text\nx_1,"User: ' + "y" * 20_001 + '"\n', "row 2", "limit is 20,000"),
    "header only": ("transcript_id,text\n", "", "contains no transcripts"),
}


@pytest.mark.parametrize("case", sorted(BAD_CSV))
def test_bad_anthropic_csv_gets_a_clear_message_and_changes_nothing(db, tmp_path, case):
    content, location, expected = BAD_CSV[case]
    path = tmp_path / "bad.csv"
    path.write_text(content)
    before = db_counts()
    with pytest.raises(CommandError) as excinfo:
        run_import(path, "--project", "p")
    message = str(excinfo.value)
    assert "bad.csv" in message and location in message and expected in message
    assert db_counts() == before


def test_a_csv_with_one_bad_row_among_good_ones_imports_nothing(db, tmp_path):
    good = 'x_1,"AI: What do you do all day at work?\nUser: I write music for films mostly."\n'
    path = tmp_path / "mixed.csv"
    path.write_text("transcript_id,text\n" + good + 'x_2,"Preamble\nUser: hi"\n')
    with pytest.raises(CommandError, match="row 3"):
        run_import(path, "--project", "p")
    assert Session.objects.count() == 0


def test_invalid_utf8_is_refused(db, tmp_path):
    path = tmp_path / "latin.jsonl"
    line = json.dumps(good_session(turns=[{"speaker": "participant", "text": "caf\u00e9 au lait"}]), ensure_ascii=False)
    path.write_bytes(line.encode("latin-1"))
    with pytest.raises(CommandError, match="not valid UTF-8"):
        run_import(path, "--project", "p")
    assert Session.objects.count() == 0


def test_a_session_id_that_exists_already_is_refused_and_the_file_imports_nothing(db, tmp_path):
    first = tmp_path / "first.jsonl"
    first.write_text(jsonl_line() + "\n")
    run_import(first, "--project", "p")
    second = tmp_path / "second.jsonl"
    second.write_text(jsonl_line(session_id="s-new") + "\n" + jsonl_line() + "\n")
    before = db_counts()
    with pytest.raises(CommandError) as excinfo:
        run_import(second, "--project", "p")
    assert "second.jsonl, line 2, field 'session_id': session 's-1' exists already" in str(excinfo.value)
    assert db_counts() == before


@pytest.mark.parametrize(
    "missing_file, expected",
    [("nodes.json", "nodes.json: is missing"), ("scratch_demographics.json", "is missing from the genagents folder")],
)
def test_a_genagents_folder_missing_a_file_is_refused(db, tmp_path, missing_file, expected):
    folder = tmp_path / "agent"
    folder.mkdir()
    for name in ("nodes.json", "scratch_demographics.json", "meta.json"):
        if name != missing_file:
            (folder / name).write_text((GENAGENTS / name).read_text())
    with pytest.raises(CommandError):
        run_import(folder / "meta.json", "--project", "p", "--format", "genagents")
    assert Session.objects.count() == 0


def test_a_genagents_node_without_the_interviewer_marker_is_refused(db, tmp_path):
    folder = tmp_path / "agent"
    folder.mkdir()
    for name in ("scratch_demographics.json", "meta.json"):
        (folder / name).write_text((GENAGENTS / name).read_text())
    nodes = json.loads((GENAGENTS / "nodes.json").read_text())
    nodes[3]["content"] = "Moderator: hello"
    (folder / "nodes.json").write_text(json.dumps(nodes))
    with pytest.raises(CommandError, match=r"nodes.json node 3, field 'content': must start with 'Interviewer:'"):
        run_import(folder, "--project", "p")
    assert Session.objects.count() == 0


def test_an_unknown_extension_asks_for_the_format(db, tmp_path):
    path = tmp_path / "interviews.txt"
    path.write_text(jsonl_line())
    with pytest.raises(CommandError, match="pass --format"):
        run_import(path, "--project", "p")
    assert run_import(path, "--project", "p", "--format", "jsonl").startswith("interviews.txt: imported 1 sessions")


def test_a_missing_path_is_reported(db, tmp_path):
    with pytest.raises(CommandError, match="does not exist"):
        run_import(tmp_path / "nope.csv", "--project", "p")
