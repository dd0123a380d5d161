"""Reading the Twin-2K-500 wave_split release: every question type of the synthetic sample,
parquet/JSON/JSONL, the full_persona refusal, and bad input refused whole with a clear message."""
import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from experiments.core.survey.reader import (
    parse_json_text, parse_jsonl_text, parse_rows, read_survey_path,
)
from experiments.core.survey.records import SurveyImportError
from tests.survey_helpers import (
    FULL_PERSONA_SAMPLE, SAMPLE, decoded, encoded, find_question, jsonl, sample_rows,
)


@pytest.fixture(scope="module")
def respondents():
    return read_survey_path(SAMPLE)


def by_qid(blocks, qid):
    return [q for b in blocks for q in b.questions if q.qid == qid]


def test_the_sample_imports_whole(respondents):
    assert [r.pid for r in respondents] == [str(900001 + k) for k in range(12)]
    first = respondents[0]
    assert first.persona_text == sample_rows()[0]["wave1_3_persona_text"]
    assert first.location == "wave_split_synthetic.jsonl line 1"


def test_every_question_type_of_the_release_is_read(respondents):
    kinds = Counter()
    for r in respondents:
        for column in (r.persona, r.earlier, r.wave4):
            kinds.update(f"{q.qtype}/{q.selector}" for b in column for q in b.questions)
    for kind in ("MC/SAVR", "MC/MAVR", "Matrix/Likert", "Matrix/Bipolar", "TE/SL", "TE/ML", "TE/FORM", "DB/",
                 "Slider/HSLIDER"):
        assert kinds[kind] > 0, kind


def test_answers_are_kept_per_type(respondents):
    first = respondents[0]
    raw = decoded(sample_rows()[0])
    # Single-answer MC: one 1-based position.
    qid11 = by_qid(first.persona, "QID11")[0]
    assert qid11.positions == (find_question(raw["wave1_3_persona_json"], "QID11")["Answers"]["SelectedByPosition"],)
    # Multi-answer MC: the parallel list.
    q221 = by_qid(first.persona, "QID221")[0]
    assert q221.multi and q221.positions == tuple(find_question(raw["wave1_3_persona_json"], "QID221")
                                                  ["Answers"]["SelectedByPosition"])
    # Matrix with RowsID that skip numbers, answered on every row in wave 4.
    q287 = by_qid(first.wave4, "QID287")[0]
    assert q287.row_ids == ("1", "2", "3", "4", "5", "6", "7", "10", "11", "12")
    assert len(q287.positions) == len(q287.rows) == 10
    # Slider without StatementsID: ids by position, values as numeric strings.
    q290 = by_qid(first.wave4, "QID290")[0]
    assert q290.row_ids == tuple(str(i) for i in range(1, 11))
    assert q290.values == tuple(find_question(raw["wave4_Q_wave4_A"], "QID290")["Answers"]["Values"])
    # Numeric text entry and form.
    numeric = [q for b in first.wave4 for q in b.questions if q.qtype == "TE"]
    assert numeric and all(q.numeric and q.text_answer.isdigit() for q in numeric)
    form = by_qid(first.persona, "QID271")
    assert [q.qtype for q in form] == ["MC", "TE"]  # a QuestionID repeated in the persona, both kept
    assert form[1].form_answers and all(label in form[1].rows for label, _ in form[1].form_answers)
    # Descriptive blocks carry no answer.
    assert all(not q.positions and q.text_answer is None for b in first.persona for q in b.questions
               if q.qtype == "DB")


def test_the_traps_of_the_release(respondents):
    first = respondents[0]
    assert first.persona[1].raw_name == "Personality " and first.persona[1].name == "Personality"
    assert [len(r.persona) for r in respondents].count(12) == 1
    assert len(respondents[7].persona) == 12 and "Forward Flow" not in {b.name for b in respondents[7].persona}
    short = [r.pid for r in respondents
             if len(by_qid(r.persona, "QID125")[0].positions) < len(by_qid(r.persona, "QID125")[0].rows)]
    assert short == ["900002", "900004", "900005"]
    assert len(by_qid(first.persona, "QID241")) == 2


def test_parquet_chunks_and_a_folder_of_them_give_the_same_respondents(tmp_path, respondents):
    rows = sample_rows()
    schema = pa.schema([("pid", pa.int64())] + [(c, pa.string()) for c in list(rows[0])[1:]])
    chunks = tmp_path / "wave_split" / "chunks"
    chunks.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows[:7], schema=schema), chunks / "wave_persona_chunk_001.parquet")
    pq.write_table(pa.Table.from_pylist(rows[7:], schema=schema), chunks / "wave_persona_chunk_002.parquet")
    from_folder = read_survey_path(chunks)
    one_file = read_survey_path(chunks / "wave_persona_chunk_002.parquet")
    strip = lambda rs: [(r.pid, r.persona_text, r.persona, r.earlier, r.wave4) for r in rs]  # noqa: E731
    assert strip(from_folder) == strip(respondents)
    assert strip(one_file) == strip(respondents[7:])
    assert from_folder[7].location == "chunks wave_persona_chunk_002.parquet row 1"


def test_a_json_list_and_string_wrapped_columns_are_accepted(respondents):
    rows = sample_rows()[:2]
    wrapped = dict(rows[1], wave4_Q_wave4_A=json.dumps(rows[1]["wave4_Q_wave4_A"]))
    got = parse_json_text(json.dumps([rows[0], wrapped]), "rows.json")
    assert [r.wave4 for r in got] == [r.wave4 for r in respondents[:2]]


def test_the_full_persona_configuration_is_refused():
    with pytest.raises(SurveyImportError, match="full_persona configuration") as caught:
        read_survey_path(FULL_PERSONA_SAMPLE)
    assert "wave_split" in str(caught.value) and len(caught.value.problems) == 1


# --- Bad input: one clear message naming respondent and question; nothing imported --------------

def _mutate(change):
    rows = [decoded(row) for row in sample_rows()[:3]]
    change(rows[1])
    return jsonl([encoded(row) for row in rows])


def _set(qid, column, **fields):
    def change(row):
        question = find_question(row[column], qid)
        for key, value in fields.items():
            if value is None:
                question.pop(key, None)
            else:
                question[key] = value
    return change


def _answers(qid, column, **answers):
    def change(row):
        find_question(row[column], qid)["Answers"].update(answers)
    return change


def _persona_not_json(row):
    row["wave1_3_persona_json"] = '[{"ElementType": "Block", "BlockName": "Demographics", '


def _block_without_name(row):
    del row["wave1_3_persona_json"][2]["BlockName"]


def _repeated_wave4_qid(row):
    block = row["wave4_Q_wave4_A"][13]
    block["Questions"].append(dict(block["Questions"][0]))


def _short_wave4_matrix(row):
    answers = find_question(row["wave4_Q_wave4_A"], "QID287")["Answers"]
    answers["SelectedByPosition"] = answers["SelectedByPosition"][:-1]
    answers["SelectedText"] = answers["SelectedText"][:-1]


def _nan(row):
    row["wave4_Q_wave1_3_A"] = json.dumps(row["wave4_Q_wave1_3_A"]).replace('"SelectedByPosition": 1,',
                                                                           '"SelectedByPosition": NaN,', 1)


def _allais(row):
    return "QID192" if any(b["BlockName"] == "Allais Form 1" for b in row["wave4_Q_wave4_A"]) else "QID193"


def _allais_out_of_range(row):
    _answers(_allais(row), "wave4_Q_wave4_A", SelectedByPosition=3)(row)


def _allais_wrong_text(row):
    _answers(_allais(row), "wave4_Q_wave4_A", SelectedText="Something else")(row)


@pytest.mark.parametrize("change, expected", [
    (_persona_not_json, "wave1_3_persona_json: is not valid JSON (Expecting property name"),
    (_block_without_name, "wave1_3_persona_json block 3: BlockName is missing"),
    (_set("QID25", "wave1_3_persona_json", QuestionText=None), "question 2 QID25: QuestionText is missing"),
    (_set("QID11", "wave1_3_persona_json", QuestionType="Rank"), "QID11: unknown QuestionType 'Rank'"),
    (_set("QID11", "wave1_3_persona_json", Settings={"Selector": "XYZ"}), "QID11: unknown MC Selector 'XYZ'"),
    (_allais_out_of_range, "SelectedByPosition 3 is outside the 2 options"),
    (_allais_wrong_text, "SelectedText 'Something else' is not option"),
    (_short_wave4_matrix, "QID287: 9 answers for 10 rows (a wave-4 matrix answers every row)"),
    (_repeated_wave4_qid, "occurs twice in this column"),
    (_set("QID287", "wave4_Q_wave1_3_A", Answers=None), "QID287: a wave-4 question has no answer"),
    (_nan, "wave4_Q_wave1_3_A: is not valid JSON (NaN is not a number JSON allows)"),
    (lambda row: row.pop("wave4_Q_wave4_A"), "missing column(s) wave4_Q_wave4_A"),
    (lambda row: row.update(extra=1), "unknown column(s) extra"),
    (lambda row: row.update(pid=True), "a pid must be an integer or a non-empty string"),
    (lambda row: row.update(pid=900001), "the pid appears twice (first at line 1)"),
    (lambda row: row.update(wave1_3_persona_text="a\x00b"), "NUL character"),
    (lambda row: row.update(wave4_Q_wave4_A={"not": "a list"}),
     "wave4_Q_wave4_A: must hold a JSON array of blocks, got dict"),
])
def test_bad_input_is_refused_whole_with_a_message_naming_respondent_and_question(change, expected):
    text = _mutate(change)
    with pytest.raises(SurveyImportError) as caught:
        parse_jsonl_text(text, "bad.jsonl")
    message = str(caught.value)
    assert expected in message
    assert "nothing was imported" in message
    assert "bad.jsonl, line 2" in message
    problems = caught.value.problems
    assert {p.location for p in problems} == {"line 2"}
    if "pid" not in expected and "column(s)" not in expected:
        assert problems[0].pid == "900002"


def test_problems_of_several_respondents_are_all_reported():
    rows = [decoded(row) for row in sample_rows()[:4]]
    for row in rows[1:3]:
        _set("QID11", "wave1_3_persona_json", QuestionType="Rank")(row)
    with pytest.raises(SurveyImportError) as caught:
        parse_jsonl_text(jsonl([encoded(row) for row in rows]), "bad.jsonl")
    assert [p.pid for p in caught.value.problems] == ["900002", "900003"]


def test_a_json_column_that_is_no_string_is_refused():
    row = dict(sample_rows()[0], wave4_Q_wave4_A=[])
    with pytest.raises(SurveyImportError, match="wave4_Q_wave4_A: must be a string holding a JSON array, got list"):
        parse_rows([("row 1", row)], "rows.json")


def test_a_line_that_is_not_json_and_an_empty_input_are_refused():
    with pytest.raises(SurveyImportError, match="line 2: not valid JSON"):
        parse_jsonl_text(jsonl(sample_rows()[:1]) + "{oops\n", "x.jsonl")
    with pytest.raises(SurveyImportError, match="holds no respondent"):
        parse_rows([], "empty.jsonl")
    with pytest.raises(SurveyImportError, match="must hold a list of row objects"):
        parse_json_text("{}", "x.json")


def test_unknown_files_and_invalid_utf8_are_refused(tmp_path):
    (tmp_path / "rows.csv").write_text("pid\n1\n")
    with pytest.raises(SurveyImportError, match="unknown file type"):
        read_survey_path(tmp_path / "rows.csv")
    (tmp_path / "rows.jsonl").write_bytes(b'{"pid": "\xff"}\n')
    with pytest.raises(SurveyImportError, match="not valid UTF-8 at byte 9"):
        read_survey_path(tmp_path / "rows.jsonl")
    (tmp_path / "chunk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(SurveyImportError, match="not a readable parquet file"):
        read_survey_path(tmp_path / "chunk.parquet")
