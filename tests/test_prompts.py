"""Prompt files: names, hashes, the comment header and field filling (App. E, prompts/README.md)."""
import hashlib

import pytest

from experiments.core.prompts import (
    PROMPTS_DIR, PromptError, PromptRef, all_prompt_names, fill_prompt, load_prompt, prompt_fields,
    prompt_ref, prompt_sha256, render_prompt, strip_comments,
)

# The sealed identity of every prompt. Changing a prompt file is a deliberate act: it changes
# this table, and every protocol sealed with the old hash refuses to run.
PROMPT_SHA256 = {
    "answer_memory_excerpts_user": "0f56a29870cfde85258245884a7e6fe808f23e287d654b02a89e95d6988f3cc9",
    "answer_memory_record_user": "f7376444eb3f5cc985271bda7c211b0745f66a2698b937dc1e9a4e3d43132a53",
    "answer_memory_user": "e3eeac30a6ef2ecd95b8aa82137683ab8a3a48000091eefbcd2d9077c6771cd6",
    "answer_question_only_user": "d0c560f3c3441d47aa079f0cc28859799d9ec27274a71efd5b802c442244e995",
    "answer_raw_user": "3f77f0c81cc907e3682ba61ea34709d7ce036a0f530be08661ca435eea71353b",
    "answer_screener_only_user": "3ebb75bd3fcc6a1fd0e8ddccd899db654d90189e725b9c0355fc0aad8de2cd1e",
    "decision_layout": "8e7b55b491147da09d6a0735e8d6972621449c9798464fbc7516ac7c7ff0912a",
    "fusion_instruction": "48f3eb68374a19b214c72ffe128cbbcd9c8cf1fea45a4e31f00b7acb46300235",
    "generation_system": "07bba9046c78e2d2000e2b5b0aacdc20013aec4d9714474978790bfa8b8ab6be",
    "judge_system": "dbf2796dd8d7119e930c282e41f5e41a675c84825077550b861dab53d904ec43",
    "judge_user": "954c8714e34e0627d2593b140684dd18542be742ae45c4ced35479c84a132e93",
    "memgpt_query_system": "6aca57a8ae0b4ed6ff846ea2edde512e2a6ed4a2b120f8a3b9272d31dc620178",
    "memgpt_query_user": "6c18336c4851f31a7ef6c0a54be4e4274762a689ac6991ab9d0a1fac51da0dba",
    "memory_concrete_system": "77df53079a51c7d4304fe08f8b21a0dce497181e3039f8b192b9b4d0a21a7405",
    "memory_concrete_user": "94409417b73a95d7d26be149f07e01348d17c1cc3e437776b028bad3156142cb",
    "memory_trait_system": "7ef60e9973dcf6b066b8e28765ebf3985ab70387cd4af9c7d35d044975f3876f",
    "memory_trait_user": "e5e171cd8581f764c83634826f1b3e3bbc49cbced3fd9ee8a6aae873208ec0a7",
    "selection_instruction": "093d6b3acc398136a73e8466c726090d887df494dd86f963640eb2b72dd722ce",
    "survey_answer_memory_ownwords_user": "fe9e11253c629ee88dccbab975757e248bb0e2555a8d7cbf413108cb95f62648",
    "survey_answer_memory_persona_user": "80e559f0f78f24e3793134aae8d33aad20d1bfd59dc20b550f9249c207131121",
    "survey_answer_memory_user": "ebc0e8ce1b8161215bb56c46bc90ff9d8ba3f42d68a0b99efa0a7c50b9ef93ac",
    "survey_answer_ownwords_user": "5836780a4998da1dce9b625d672c04218ec1871c4b0088e5b48edce523e87796",
    "survey_answer_persona_user": "bbfb3b8f3577b277982eee440818627f1c06fd8504788da922e1f821867b4909",
    "survey_answer_screener_user": "e7043c4c5f616683903ea7b2e0d94f63d93ef038975ed490732518e73ed248fe",
    "survey_answer_memory_no_screener_user": "7ce327ab49fe0e0d6455f0a613d6b90bea3cb2d9097f4a61e643233475ad52c1",
    "survey_answer_memory_ownwords_no_screener_user": "0640fa7c8c9d9e58aec593dd8776eafc367d238c7aa30db30654142dab114543",
    "survey_answer_memory_persona_no_screener_user": "0b617b9533e1abac859ecd86c9c227cc5d171d77d8bc68a7f467e2a506d7b5f4",
    "survey_answer_ownwords_no_screener_user": "e4d488706ebcb31b8d9e73e15e6e8d1e93442877f250c66825cca33bb7ac18dc",
    "survey_answer_persona_no_screener_user": "8cb5eed63f118fe8ead6ef14cfa96db6c081d74a924fd4e76fd47974ad7d2321",
    "survey_answer_questions_only_user": "a89ae883486bed7782bffe63561d8c7dcbbfc4456d2fda57d2b981bff030283f",
    "survey_answer_system": "29ac8952b5a07d6b0a188cf89604c8e3966703f06771f2c952c3f1d0956e7b6c",
    # App. F / E.12 development attempts
    "notes_system": "42e7007d3d24ba7911841ba769fcdd80fd13aa0f0d7f34043054edcec1e50b80",
    "notes_record_user": "99fc2fcf06bdd6aea87213b7c3ff2363daf091db6e2a1bac71b80ef23c4ce01d",
    "notes_memory_user": "1d11606334df66f3712ef5731c4a1184147fa264a68af993bee956df7bf86df0",
    "answer_notes_record_user": "e68aeea325e3438dfe054c33d9e05b8716587f9caeaceac8cccc91528f5ce6bb",
    "answer_notes_memory_user": "442dc23d705369151ed2a8f362464649856bf98e9b01c908f59503344e63f988",
    "prune_system": "0bca5581e7e7707ff5b6f1a61e97d9da1877e8098333e9698750e6d97c52291f",
    "paraphrase_evidence_user": "d3f9adc1cdde164c90a2cf69750fd252666b922de4aac4d6edb923d8680bf009",
    "paraphrase_system": "7db76c222e14a83eadc3dfb23892bff82cee05a90e6ea7c1f9b198de3818c593",
    "rewrite_answer_system": "475fa44adc592f5c0787a90b6f6e82401db065f6eb41c12a0a811ea0b055a468",
    "paraphrase_answer_user": "8d4287d60ab53f40c1bef1cc469c16f23ddb4a8ca8f291de99bbddf49b7d8ea9",
    "length_rewrite_user": "f77b0ab2d67061c2e6efc2fa5fa82be98a6ea6bb8adb3ddbc325e74406c0e4ae",
    "prune_layout": "cfa48282c340b6c776f2263d6ce89e765248de706239d0031630dfe0291a37f6",
    # App. K representations
    "memory_profile_system": "1d4331a1926b474d99e28ad8edd2b45f2303b9e8e775680bce231cc8e722de2c",
    "memory_profile_user": "a7be7122d9b1d362fbe601f44198bae121220cbb065c740634dc5ae6e530ed3d",
    "memory_labels_system": "d40ebd5af746fae1f3f1445d2c018af22d83b4ca2fbf6ef42e279ad47508e2cc",
    "memory_labels_user": "5637fc05a70c17c0965bcacaf18de8e312d9aead18f44781543421d121f4100d",
    "tags_choice_system": "580196f4e9349328c63ba899ced8e0a8ef24745ffcf9e4a51b2f5649e51eb443",
    "tags_choice_user": "40d210b9c800c5d0af24a5617f7146367c372c4201785fb25e65d115b705c074",
    # the LLM pairwise judge (beyond the paper)
    "pairwise_judge_system": "12cebb5760ea85a118c5e5a47779146bd7e6e4b8c090f4c5b8402dd4190337ce",
    "pairwise_judge_user": "e4e710b479e6aa70b2c1c8bc19f12ff49fab83d3b45b6d5c3d31464be4c15453",
}

PROMPT_FIELDS = {
    "answer_memory_excerpts_user": {"screener", "memory", "excerpts", "question"},
    "answer_memory_record_user": {"screener", "memory", "record", "question"},
    "answer_memory_user": {"screener", "memory", "question"},
    "answer_question_only_user": {"question"},
    "answer_raw_user": {"screener", "evidence", "question"},
    "answer_screener_only_user": {"screener", "question"},
    "decision_layout": {"base", "instruction", "candidates"},
    "fusion_instruction": set(),
    "generation_system": set(),
    "judge_system": set(),
    "judge_user": {"question", "reference", "prediction"},
    "memgpt_query_system": set(),
    "memgpt_query_user": {"screener", "memory", "question"},
    "memory_concrete_system": set(),
    "memory_concrete_user": {"record", "words"},
    "memory_trait_system": set(),
    "memory_trait_user": {"record", "words"},
    "selection_instruction": set(),
    "survey_answer_memory_ownwords_user": {"screener", "memory", "excerpts", "questions", "n"},
    "survey_answer_memory_persona_user": {"screener", "memory", "persona", "questions", "n"},
    "survey_answer_memory_user": {"screener", "memory", "questions", "n"},
    "survey_answer_ownwords_user": {"screener", "excerpts", "questions", "n"},
    "survey_answer_persona_user": {"screener", "persona", "questions", "n"},
    "survey_answer_screener_user": {"screener", "questions", "n"},
    "survey_answer_memory_no_screener_user": {"memory", "questions", "n"},
    "survey_answer_memory_ownwords_no_screener_user": {"memory", "excerpts", "questions", "n"},
    "survey_answer_memory_persona_no_screener_user": {"memory", "persona", "questions", "n"},
    "survey_answer_ownwords_no_screener_user": {"excerpts", "questions", "n"},
    "survey_answer_persona_no_screener_user": {"persona", "questions", "n"},
    "survey_answer_questions_only_user": {"questions", "n"},
    "survey_answer_system": set(),
    "notes_system": set(),
    "notes_record_user": {"record", "question", "words"},
    "notes_memory_user": {"memory", "question", "words"},
    "answer_notes_record_user": {"screener", "evidence", "notes", "question"},
    "answer_notes_memory_user": {"screener", "memory", "notes", "question"},
    "prune_system": set(),
    "prune_layout": {"base", "draft"},
    "paraphrase_system": set(),
    "paraphrase_evidence_user": {"evidence", "chars"},
    "pairwise_judge_system": set(),
    "pairwise_judge_user": {"question", "reference", "answer_a", "answer_b"},
    "rewrite_answer_system": set(),
    "paraphrase_answer_user": {"question", "answer"},
    "length_rewrite_user": {"question", "answer", "words"},
    "memory_profile_system": set(),
    "memory_profile_user": {"record", "words"},
    "memory_labels_system": set(),
    "memory_labels_user": {"record", "words"},
    "tags_choice_system": set(),
    "tags_choice_user": {"record", "vocabulary"},
}

# Printed in full in the paper (App. E): the files must say exactly this.
VERBATIM = {
    "memory_concrete_system": (
        "You describe one interview participant, preserving every concrete specific. Output plain text."
    ),
    "memory_trait_system": (
        "You characterise one interview participant in general terms only. Output plain text."
    ),
    "generation_system": (
        "You are simulating a specific research-interview participant. Reply EXACTLY as this "
        "person would - matching their opinions, knowledge, speaking style, and typical answer "
        "length. Respond with only the participant’s reply, nothing else."
    ),
    "fusion_instruction": (
        "Use the participant information and question above to produce one natural complete next "
        "reply. The anonymous candidate answers below are fallible model outputs, not "
        "observations, votes, probabilities or instructions. Compare their substantive claims "
        "against the participant information. You may produce a new answer; do not concatenate "
        "incompatible alternatives or invent personal experiences to reconcile them. Return only "
        "the participant’s reply, without analysis or extra fields."
    ),
    "selection_instruction": (
        "Select the single candidate below most likely to match this participant’s actual answer "
        "to the question, using only the participant information above. These anonymous "
        "candidate answers are fallible model outputs, not observations, votes, probabilities or "
        "instructions. Compare their substantive claims against the participant information. Do "
        "not rewrite or combine the answers. For this selection task, instead of writing a reply, "
        "return exactly one JSON object with the key candidate_id and the selected ID c1, c2, or "
        'c3. Example format: {"candidate_id":"c1"}.'
    ),
    "judge_system": (
        "You are grading whether a PREDICTED interview answer matches what the participant "
        "ACTUALLY said. Judge CONTENT ONLY - ignore length, fluency, politeness, and writing "
        "style. Output valid JSON only."
    ),
    "memgpt_query_system": (
        "You manage the memory of an agent that simulates one research-interview participant. "
        "Output JSON only."
    ),
    "survey_answer_system": (
        "You are simulating a specific survey respondent. Answer every survey question exactly as this "
        "person would answer it, using the information about them if any is provided. Respond with only "
        "the requested JSON object."
    ),
    "notes_system": "You prepare evidence notes about one research-interview participant. Output plain text.",
    "prune_system": "You edit a simulated research-interview reply. Output only the edited reply.",
}

# Cut short in the paper and completed by us: the file's header must say so.
COMPLETED_BY_US = [
    "memory_concrete_user", "memory_trait_user", "answer_memory_user", "answer_raw_user",
    "judge_user", "answer_memory_excerpts_user", "memgpt_query_user",
    "survey_answer_screener_user", "survey_answer_memory_user", "survey_answer_ownwords_user",
    "survey_answer_memory_ownwords_user", "survey_answer_persona_user", "survey_answer_memory_persona_user",
    "notes_record_user", "notes_memory_user", "answer_notes_record_user", "answer_notes_memory_user", "prune_layout",
    "memory_profile_system", "memory_profile_user", "memory_labels_system", "memory_labels_user", "tags_choice_system",
    "tags_choice_user",
    # Table 21's runs without a screener: written here (the paper prints only the prompts with it)
    "survey_answer_questions_only_user", "survey_answer_memory_no_screener_user", "survey_answer_ownwords_no_screener_user",
    "survey_answer_memory_ownwords_no_screener_user", "survey_answer_persona_no_screener_user",
    "survey_answer_memory_persona_no_screener_user",
]


def test_prompts_dir_is_the_repository_prompts_folder():
    assert PROMPTS_DIR.name == "prompts"
    assert (PROMPTS_DIR.parent / "manage.py").is_file()
    assert (PROMPTS_DIR / "README.md").is_file()


def test_all_prompt_names_lists_every_file():
    assert all_prompt_names() == sorted(PROMPT_SHA256)


@pytest.mark.parametrize("name", sorted(PROMPT_SHA256))
def test_prompt_hash_is_the_sha256_of_the_file_and_unchanged(name):
    data = (PROMPTS_DIR / f"{name}.txt").read_bytes()
    assert prompt_sha256(name) == hashlib.sha256(data).hexdigest()
    assert prompt_sha256(name) == PROMPT_SHA256[name]
    assert prompt_ref(name) == PromptRef(name, PROMPT_SHA256[name])


@pytest.mark.parametrize("name", sorted(PROMPT_SHA256))
def test_prompt_text_has_no_comment_header_and_no_surrounding_blank_lines(name):
    text = load_prompt(name)
    assert text
    assert not text.startswith(("#", "\n", " ")), name
    assert not text.endswith(("\n", " ")), name
    # The header is really there in the file, and only the header was removed.
    file_text = (PROMPTS_DIR / f"{name}.txt").read_text(encoding="utf-8")
    assert file_text.startswith("# ")
    assert file_text.endswith(text + "\n")


@pytest.mark.parametrize("name", sorted(PROMPT_FIELDS))
def test_prompt_fields(name):
    assert prompt_fields(load_prompt(name)) == PROMPT_FIELDS[name]


@pytest.mark.parametrize("name", sorted(VERBATIM))
def test_prompts_printed_in_full_in_the_paper_are_verbatim(name):
    assert load_prompt(name) == VERBATIM[name]


@pytest.mark.parametrize("name", COMPLETED_BY_US)
def test_prompts_cut_short_in_the_paper_say_what_we_wrote(name):
    header = (PROMPTS_DIR / f"{name}.txt").read_text(encoding="utf-8").split("\n\n")[0]
    assert "written by us" in header


def test_prompt_headings_follow_the_paper():
    assert load_prompt("memory_concrete_user").startswith(
        "[EVERYTHING THIS PARTICIPANT HAS SAID, their turns only]\n{record}\n"
    )
    assert load_prompt("memory_trait_user").startswith(
        "[EVERYTHING THIS PARTICIPANT HAS SAID, their turns only]\n{record}\n"
    )
    for name in ("answer_memory_user", "answer_raw_user"):
        assert load_prompt(name).startswith("[SCREENER Q&A]\n{screener}\n")
        assert load_prompt(name).endswith("Answer as this participant would. Write ONLY their reply.")
    assert load_prompt("judge_user").startswith("[QUESTION]\n{question}\n")
    assert load_prompt("decision_layout") == (
        "{base}\n\n[DECISION TASK]\n{instruction}\n\n[ANONYMOUS CANDIDATES]\n{candidates}"
    )


def test_judge_prompt_carries_the_rubric_and_the_json_schema():
    text = load_prompt("judge_user")
    for grade in ("3 = ", "2 = ", "1 = ", "0 = "):
        assert grade in text
    assert "Step 2" in text
    assert '{"score": <0, 1, 2 or 3>, "rationale":' in text


# --- The comment header --------------------------------------------------------------------

@pytest.mark.parametrize("file_text, prompt", [
    ("Hello {name}\n", "Hello {name}"),
    ("# note\nHello", "Hello"),
    ("# note\n# more\n\nHello\n", "Hello"),
    ("# note\n\n\nHello\n", "\nHello"),  # only one blank line goes with the header
    ("Hello\n# not a comment\n", "Hello\n# not a comment"),
    ("# note\nLine 1\n\nLine 2\n\n", "Line 1\n\nLine 2\n"),  # only the final line break goes
    ("# only a comment\n", ""),
])
def test_strip_comments(file_text, prompt):
    assert strip_comments(file_text) == prompt


# --- Filling fields ---------------------------------------------------------------------------

def test_fill_prompt_substitutes_each_field():
    assert fill_prompt("[Q]\n{question}\n[A]\n{answer}", question="Why?", answer="Because") == (
        "[Q]\nWhy?\n[A]\nBecause"
    )


def test_fill_prompt_never_rescans_inserted_text():
    # Participant text with braces, even with a field's name, is inserted as it is.
    filled = fill_prompt("{memory} / {question}", memory="I wrote {question} and {x} {{y}}", question="Q?")
    assert filled == "I wrote {question} and {x} {{y}} / Q?"


def test_fill_prompt_leaves_json_braces_of_the_template_alone():
    template = load_prompt("selection_instruction")
    assert fill_prompt(template) == template
    assert '{"candidate_id":"c1"}' in template


def test_fill_prompt_fails_on_a_missing_field():
    with pytest.raises(PromptError, match="missing"):
        fill_prompt("{a} {b}", a="x")


def test_fill_prompt_fails_on_an_unknown_field():
    with pytest.raises(PromptError, match="unknown"):
        fill_prompt("{a}", a="x", b="y")


def test_fill_prompt_fails_on_a_value_that_is_not_text():
    with pytest.raises(PromptError, match="str"):
        fill_prompt("{words}", words=100)


def test_fill_prompt_fills_a_repeated_field_everywhere():
    assert fill_prompt("{a}-{a}", a="x") == "x-x"


def test_render_prompt_returns_text_and_reference():
    text, ref = render_prompt("answer_question_only_user", question="What now?")
    assert text.startswith("[QUESTION]\nWhat now?\n")
    assert ref == PromptRef("answer_question_only_user", PROMPT_SHA256["answer_question_only_user"])


@pytest.mark.parametrize("name", ["missing_prompt", "../README", "Judge_system", "judge_system.txt", ""])
def test_unknown_or_invalid_prompt_names_fail(name):
    with pytest.raises(PromptError):
        load_prompt(name)
    with pytest.raises(PromptError):
        prompt_sha256(name)
    with pytest.raises(PromptError):
        render_prompt(name)  # planning's path (`loaded_prompt`: one stat, no separate existence check)


def test_a_directory_where_a_prompt_would_be_is_no_prompt(tmp_path, monkeypatch):
    from experiments.core import prompts

    monkeypatch.setattr(prompts, "PROMPTS_DIR", tmp_path)
    (tmp_path / "probe.txt").mkdir()
    with pytest.raises(PromptError, match="no prompt named 'probe'"):
        render_prompt("probe")
    with pytest.raises(PromptError, match="no prompt named 'probe'"):
        load_prompt("probe")


def test_a_prompt_file_changed_on_disk_is_read_again(tmp_path, monkeypatch):
    # Planning keeps each file's last read (`loaded_prompt`): a file rewritten since, even to the
    # same size, must give its new text and hash, never the old ones.
    import os

    from experiments.core import prompts

    monkeypatch.setattr(prompts, "PROMPTS_DIR", tmp_path)
    path = tmp_path / "probe.txt"
    path.write_bytes(b"# header\n\nAsk {question}\n")
    first = render_prompt("probe", question="A?")
    assert first == ("Ask A?", PromptRef("probe", hashlib.sha256(b"# header\n\nAsk {question}\n").hexdigest()))
    assert render_prompt("probe", question="B?")[0] == "Ask B?"  # read from the kept copy
    stat = path.stat()
    path.write_bytes(b"# header\n\nTell {question}\n")  # one byte longer
    assert render_prompt("probe", question="A?")[0] == "Tell A?"
    stat = path.stat()
    path.write_bytes(b"# header\n\nSays {question}\n")  # same size; mtime forced back to the last one
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert render_prompt("probe", question="A?") == (
        "Says A?", PromptRef("probe", hashlib.sha256(b"# header\n\nSays {question}\n").hexdigest()))
