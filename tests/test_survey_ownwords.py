"""OwnWords for surveys (App. H): BM25 per target block over the persona's answer lines,
filled round-robin to the budget; a case checked by hand and the scores of evidence.bm25_scores."""
import pytest

from experiments.core.evidence import bm25_scores, tok
from experiments.core.survey.lines import answer_lines, clean_text
from experiments.core.survey.ownwords import (
    block_queries, bm25_matrix, evidence_lines, ownwords_lines, rankings, round_robin_fill, survey_ownwords,
    whole_persona,
)
from experiments.core.survey.reader import read_survey_path
from experiments.core.survey.screener import screener_lines
from experiments.core.survey.targets import target_items
from tests.survey_helpers import SAMPLE

# Checked by hand. Tokens (App. F): 0 apple apple yes | 1 cherry no | 2 apple sometimes |
# 3 cherry cherry often | 4 nothing here none; average length 13/5 = 2.6.
# Query "apple": line 0 scores idf·2·2.2/(2 + 1.2·(0.25 + 0.75·3/2.6)) = idf·1.318, line 2
# idf·2.2/(1 + 1.2·(0.25 + 0.75·2/2.6)) = idf·1.104, the others 0: ranking 0, 2, 1, 3, 4.
# Query "cherry" mirrors it: ranking 3, 1, 0, 2, 4.
LINES = ["apple apple: yes", "cherry: no", "apple: sometimes", "cherry cherry: often", "nothing here: none"]
QUERIES = ["apple", "cherry"]


def test_rankings_of_the_hand_checked_case():
    assert rankings(LINES, QUERIES) == [[0, 2, 1, 3, 4], [3, 1, 0, 2, 4]]


@pytest.mark.parametrize("budget, kept", [
    # Lengths 16, 10, 16, 20, 18. At 40: "apple" takes 0 (16), "cherry" takes 3 (16+1+20 = 37);
    # nothing else fits, so both drop out. One ranking alone would have filled 0 and 2 instead.
    (40, [0, 3]),
    # At 60: 0 (16), 3 (37), then "apple"'s next, 2 (54); "cherry"'s 1 (65) no longer fits.
    (60, [0, 2, 3]),
    # At 66: 0, 3, 2 (54), then "cherry" takes 1 (65); nothing more fits.
    (66, [0, 1, 2, 3]),
    # Each block in turn, never the same line twice: at 16 only line 0 fits at all.
    (16, [0]),
])
def test_round_robin_fill_of_the_hand_checked_case(budget, kept):
    assert round_robin_fill(LINES, rankings(LINES, QUERIES), budget) == kept
    assert ownwords_lines(LINES, QUERIES, budget) == "\n".join(LINES[i] for i in kept)


def test_the_fill_edges():
    whole = "\n".join(LINES)
    assert ownwords_lines(LINES, QUERIES, len(whole)) == whole  # everything fits: the lines unchanged
    assert ownwords_lines(LINES, QUERIES, 5) == "apple"  # nothing fits: the first block's best line, cut
    assert ownwords_lines(LINES, QUERIES, 0) == ""
    assert ownwords_lines([], QUERIES, 10) == ""
    with pytest.raises(ValueError, match="non-negative integer"):
        ownwords_lines(LINES, QUERIES, -1)


@pytest.fixture(scope="module")
def respondents():
    return read_survey_path(SAMPLE)


def test_scores_are_those_of_evidence_bm25_scores_bit_for_bit(respondents):
    for respondent in respondents:
        lines = evidence_lines(respondent)
        queries = [query for _block, query in block_queries(target_items(respondent))]
        tokens = [tok(line) for line in lines]
        for query, scores in zip(queries, bm25_matrix(lines, queries)):
            assert scores.tolist() == bm25_scores(tokens, tok(query))


def test_one_query_per_target_block_with_its_question_texts(respondents):
    items = target_items(respondents[0])
    queries = dict(block_queries(items))
    assert list(queries) == list(dict.fromkeys(i.block for i in items))
    assert "Base-rate 70 engineers" not in queries and "Sunk cost - no" not in queries  # no closed target
    false_consensus = [i for i in items if i.qid == "QID287"]
    assert queries["False consensus"] == "\n".join([false_consensus[0].question] + [i.row for i in false_consensus])


def test_the_collection_is_the_persona_without_the_screener(respondents):
    respondent = respondents[0]
    lines = evidence_lines(respondent)
    screener = set(screener_lines(respondent))
    assert not screener & set(lines)
    everything = [line.text for line in answer_lines(respondent.persona)]
    assert everything[:14] == screener_lines(respondent) and everything[14:] == lines
    # A matrix row's line: question, row, chosen column; a price list names the chosen side.
    q25 = [q for q in respondent.persona[1].questions if q.qid == "QID25"][0]
    assert f"{q25.text} {q25.rows[0]}: {q25.options[q25.positions[0] - 1]}" in lines
    assert any(line.startswith("For each line choose") and " or " in line for line in lines)


def test_an_excerpt_fits_its_budget_and_quotes_whole_lines(respondents):
    for respondent in respondents:
        excerpt = survey_ownwords(respondent, 700)
        assert 0 < len(excerpt) <= 700
        lines = evidence_lines(respondent)
        kept = excerpt.split("\n")
        remaining = iter(lines)
        assert all(line in remaining for line in kept)  # whole lines, in persona order


def test_the_whole_persona_is_the_released_text(respondents):
    assert whole_persona(respondents[0]) == respondents[0].persona_text


def test_clean_text_strips_tags_and_nbsp_only():
    assert clean_text("The <b>next</b>&nbsp;button  &#39;x&#39;\n") == "The next button &#39;x&#39;"
