"""The App. F development attempts (prompts App. E.12): notes then an answer, and pruning the
one-shot draft — their exact messages on a hand-made task, the notes' 120-word cap, the calls
planned per task and estimated, a whole run of the `development-attempts` template, and a resume
that sends no landed call again."""
import json
from collections import Counter

import pytest

from experiments.core.assembly import TaskInput, assemble
from experiments.core.condition_families import condition_family
from experiments.core.conditions import (
    FINAL, NOTES, PRUNE, get_condition, prediction_labels,
)
from experiments.core.estimate import CohortShape, estimate_run
from experiments.core.evidence import TurnText
from experiments.core.paper_protocols import PAPER_PROTOCOLS
from experiments.core.prompts import prompt_ref
from experiments.core.workflows import (
    CLOSING_LINE, assemble_notes_answer, assemble_notes_request, assemble_prune, cap_notes,
)
from experiments.execution.concurrency import NoLimiter
from experiments.execution.control import run_start
from experiments.execution.driver import run_drive, run_inline
from experiments.execution.journal import slot_execute
from experiments.execution.protocol_templates import protocol_estimate, protocol_from_template
from experiments.execution.sealing import protocol_seal
from experiments.models import ModelCall, Prediction, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import ONE_SHOT, Roles, Sleeps, build_cohort, make_run, openai_model, request_bytes, user_text

NOTES_RECORD = "whole-record+notes(120w)"
NOTES_MEMORY = "memory(concrete,100w)+notes(120w)"
PRUNED = "memory(concrete,100w)+pruned"

TASK = TaskInput(
    question="How do you use AI when composing?",
    turns=(TurnText(0, "interviewer", "What do you do?"), TurnText(1, "participant", "I compose film music."),
           TurnText(2, "interviewer", "Anything else?"), TurnText(3, "participant", "I grow tomatoes."),
           TurnText(4, "interviewer", "How do you use AI when composing?")),
    cut=4, record_cut=4, screener=(("Occupation?", "Composer"),))
RECORD = "- I compose film music.\n- I grow tomatoes."
MEMORY = "A film composer who gardens."
SCREENER = "Q: Occupation?\nA: Composer"
NOTES_TASK = ("Write notes of at most 120 words on what in this participant's words above bears on how they would "
              "answer the question: the experiences, opinions, circumstances and ways of speaking that are relevant "
              "to it. Use only what they said; do not add or guess anything, and do not answer the question yourself. "
              "Output plain text only.")


# --- the conditions ---------------------------------------------------------------------------


def test_the_conditions_and_their_labels():
    notes, from_memory, pruned = map(get_condition, (NOTES_RECORD, NOTES_MEMORY, PRUNED))
    assert (notes.workflow, notes.evidence, notes.needs_memory) == (NOTES, "whole-record", False)
    assert (from_memory.workflow, from_memory.memory_kind) == (NOTES, "concrete")
    assert (pruned.workflow, pruned.candidates) == (PRUNE, 1)
    assert prediction_labels(notes) == [FINAL] and prediction_labels(pruned) == ["b0"]
    assert {condition_family(c) for c in (notes, from_memory, pruned)} == {"development"}
    assert pruned.prompt_names() == ("memory_concrete_system", "memory_concrete_user", "prune_system", "prune_layout",
                                     "generation_system", "answer_memory_user")
    # the pruned draft is the memory one-shot's own base call, byte for byte
    assert assemble(pruned, TASK, memory=MEMORY) == assemble(ONE_SHOT, TASK, memory=MEMORY)


# --- exact messages -----------------------------------------------------------------------------


def test_the_notes_call_from_the_record_sees_the_record_and_the_question_only():
    sent = assemble_notes_request(NOTES_RECORD, TASK)
    assert sent.system == "You prepare evidence notes about one research-interview participant. Output plain text."
    assert sent.user == (f"[EVERYTHING THIS PARTICIPANT HAS SAID, their turns only]\n{RECORD}\n\n"
                         f"[QUESTION]\nHow do you use AI when composing?\n\n[TASK]\n{NOTES_TASK}")
    assert (sent.evidence, sent.evidence_chars) == (RECORD, len(RECORD))
    assert [ref.name for ref in sent.prompt_refs] == ["notes_system", "notes_record_user"]


def test_the_notes_call_from_the_memory():
    sent = assemble_notes_request(NOTES_MEMORY, TASK, memory=MEMORY)
    assert sent.user.startswith(f"[WHAT IS KNOWN ABOUT THIS PARTICIPANT]\n{MEMORY}\n\n[QUESTION]\n"
                                "How do you use AI when composing?\n\n[TASK]\nWrite notes of at most 120 words on "
                                "what in the description above bears")
    with pytest.raises(ValueError, match="needs the session's concrete memory"):
        assemble_notes_request(NOTES_MEMORY, TASK)


def test_the_answer_from_the_notes():
    sent = assemble_notes_answer(NOTES_RECORD, TASK, notes="Composes for film.")
    assert sent.system == assemble(ONE_SHOT, TASK, memory=MEMORY).system  # E.5, shared
    assert sent.user == (f"[SCREENER Q&A]\n{SCREENER}\n\n[EARLIER IN THE INTERVIEW, verbatim]\n{RECORD}\n\n"
                         "[NOTES ON WHAT BEARS ON THIS QUESTION]\nComposes for film.\n\n"
                         "[QUESTION]\nHow do you use AI when composing?\n\n"
                         "Answer as this participant would. Write ONLY their reply.")
    assert sent.evidence == RECORD + "\n\nComposes for film."
    from_memory = assemble_notes_answer(NOTES_MEMORY, TASK, notes="Composes.", memory=MEMORY)
    assert f"[WHAT IS KNOWN ABOUT THIS PARTICIPANT]\n{MEMORY}\n\n[NOTES ON WHAT BEARS ON THIS QUESTION]\nComposes." \
        in from_memory.user


def test_the_pruning_call_is_the_memory_prompt_without_its_closing_line_then_the_draft():
    sent = assemble_prune(PRUNED, TASK, memory=MEMORY, draft="I use it for sketches, mostly.")
    assert sent.system == "You edit a simulated research-interview reply. Output only the edited reply."
    one_shot = assemble(ONE_SHOT, TASK, memory=MEMORY).user
    assert one_shot.endswith("\n\n" + CLOSING_LINE)
    assert sent.user == (
        f"[SCREENER Q&A]\n{SCREENER}\n\n[WHAT IS KNOWN ABOUT THIS PARTICIPANT]\n{MEMORY}\n\n"
        "[QUESTION]\nHow do you use AI when composing?\n\n[DRAFT REPLY]\nI use it for sketches, mostly.\n\n[TASK]\n"
        "Edit the draft reply above. Keep only the participant's stance and the details that are supported by what "
        "is known about this participant or by the screener answers; remove everything else. The edited reply has "
        "one to three sentences. Output only the edited reply.")
    assert sent.user.startswith(one_shot.removesuffix("\n\n" + CLOSING_LINE) + "\n\n[DRAFT REPLY]")
    assert [ref.name for ref in sent.prompt_refs] == ["prune_system", "answer_memory_user", "prune_layout"]
    assert sent.prompt_refs[1] == prompt_ref("answer_memory_user")
    with pytest.raises(ValueError, match="is not a prune condition"):
        assemble_prune(ONE_SHOT, TASK, memory=MEMORY, draft="x")


# --- the 120-word cap ---------------------------------------------------------------------------


def test_the_notes_cap_keeps_the_first_120_words_and_records_the_cut():
    words = [f"w{i}," for i in range(130)]
    reply = "  " + " ".join(words[:60]) + "\n\n" + " ".join(words[60:]) + "  "
    capped = cap_notes(reply)
    assert capped.cut and capped.words == 130
    assert capped.text.split() == words[:120] and capped.text.endswith("w119,")
    assert "\n\n" in capped.text  # the reply's own characters, unchanged up to the cut
    exact = " ".join(words[:120])
    assert cap_notes(exact) == cap_notes(exact + "\n") and not cap_notes(exact).cut
    assert cap_notes(exact).text == exact and cap_notes(exact).words == 120
    assert cap_notes("").text == "" and cap_notes("").words == 0
    assert cap_notes("a b c", 2).text == "a b"


# --- planning and the estimate ------------------------------------------------------------------


def test_the_estimate_counts_two_calls_per_task_and_attempt():
    shape = CohortShape(sessions=2, tasks=6, record_chars=2000, question_chars=50, reference_chars=200)
    calls = lambda keys: {p.phase: p.calls for p in estimate_run(  # noqa: E731
        map(get_condition, keys), shape, generator_cap=100, judge_cap=100).phases}
    assert calls([NOTES_RECORD]) == {"memories": 0, "generation": 6, "decisions": 6, "judging": 6}
    assert calls([NOTES_MEMORY]) == {"memories": 2, "generation": 6, "decisions": 6, "judging": 6}
    # the draft is the one-shot's call: the pruned condition adds one decision and one grade per task
    assert calls([PRUNED]) == {"memories": 2, "generation": 6, "decisions": 6, "judging": 12}
    assert calls([ONE_SHOT, PRUNED]) == {"memories": 2, "generation": 6, "decisions": 6, "judging": 12}


def _notes_request(request) -> bool:
    return "[TASK]\nWrite notes of at most" in user_text(request)


def _prune_request(request) -> bool:
    return "[DRAFT REPLY]" in user_text(request)


def test_a_run_plans_two_calls_per_task_and_attempt(project, server, http):
    cohort = build_cohort(project, sessions=2, targets=2, name="attempts")
    long_notes = " ".join(f"note{i}" for i in range(150))
    Roles(server, answer=lambda r: long_notes if _notes_request(r) else "Pruned." if _prune_request(r) else
          "Alpha answer.", memory=lambda r: long_notes if _notes_request(r) else "Likes gardening.")
    run = make_run(project, cohort, conditions=[ONE_SHOT, NOTES_RECORD, NOTES_MEMORY, PRUNED],
                   generator=openai_model(server))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED, run.status_reason
    slots = Slot.objects.filter(run=run)
    tasks = 4
    # memories: one per session; generation: the shared one-shot/draft call and two notes calls per task
    assert slots.filter(phase=Phase.MEMORIES).count() == 2
    assert slots.filter(phase=Phase.GENERATION).count() == 3 * tasks
    assert slots.filter(phase=Phase.GENERATION, key__startswith="notes|").count() == 2 * tasks
    assert slots.filter(phase=Phase.DECISIONS).count() == 3 * tasks
    assert all(s.calls.count() == 1 for s in slots)
    sent = Counter(r.body for r in server.requests)
    assert set(sent.values()) == {1} and sum(sent.values()) == slots.count()
    # the answering call saw the notes cut at 120 words
    answers = Prediction.objects.filter(run=run, condition=NOTES_RECORD, label=FINAL)
    assert answers.count() == tasks and {p.status for p in answers} == {"ok"}
    for p in answers:
        assert "note119\n\n[QUESTION]" in p.slot.user and "note120" not in p.slot.user
        assert p.evidence.endswith("note118 note119")
    # the pruned condition: its draft b0 shares the one-shot's call; its final is the pruning call's answer
    for p in Prediction.objects.filter(run=run, condition=PRUNED, label="b0"):
        assert p.slot == Prediction.objects.get(run=run, task=p.task, condition=ONE_SHOT).slot
        final = Prediction.objects.get(run=run, task=p.task, condition=PRUNED, label=FINAL)
        assert final.text == "Pruned." and final.slot.phase == Phase.DECISIONS
        assert "[DRAFT REPLY]\nAlpha answer.\n\n[TASK]" in final.slot.user
    assert {c for c in run.analysis["conditions"]} >= {ONE_SHOT, NOTES_RECORD, NOTES_MEMORY, PRUNED}
    # normalized means: "Alpha" grades 3 (1.0), anything else 1 (1/3); the pruned final is graded on its own
    assert run.analysis["conditions"][ONE_SHOT]["mean"] == 1.0
    assert run.analysis["conditions"][PRUNED]["mean"] == pytest.approx(1 / 3)


def test_empty_notes_are_notes_the_answer_is_still_planned(project, server, http):
    cohort = build_cohort(project, sessions=1, targets=1, name="attempts-empty")
    Roles(server, memory=lambda r: "" if _notes_request(r) else "Likes gardening.")
    run = make_run(project, cohort, conditions=[NOTES_RECORD], generator=openai_model(server))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    [notes] = Slot.objects.filter(run=run, key__startswith="notes|")
    assert notes.calls.count() == 1
    # an empty reply is usable text: the answer is planned with empty notes, not dropped
    [final] = Prediction.objects.filter(run=run, condition=NOTES_RECORD)
    assert final.slot is not None and "[NOTES ON WHAT BEARS ON THIS QUESTION]\n\n\n[QUESTION]" in final.slot.user


# --- resume: a landed call is never sent again --------------------------------------------------


def _execute(slot_id, http):
    slot_execute(slot_id, limiter=NoLimiter(), client=http, worker="test", sleep=Sleeps())


def test_a_run_interrupted_in_its_decisions_resumes_without_resending_a_landed_call(project, server, http):
    cohort = build_cohort(project, sessions=1, targets=2, name="attempts-resume")
    Roles(server, answer=lambda r: "Notes." if _notes_request(r) else "Pruned." if _prune_request(r) else
          "Alpha answer.")
    run = make_run(project, cohort, conditions=[NOTES_RECORD, PRUNED], generator=openai_model(server))
    while (step := run_drive(run.pk, redispatch_after_s=0)).phase != Phase.DECISIONS or not step.slot_ids:
        for slot_id in step.slot_ids:
            _execute(slot_id, http)
    handed = sorted(step.slot_ids)
    assert len(handed) == 4  # two tasks × (the answer from the notes, the pruning call)
    _execute(handed[0], http)  # one decision lands; the worker then stops
    before = len(server.requests)
    _execute(handed[0], http)  # a duplicate job for the landed slot sends nothing
    assert len(server.requests) == before
    run = run_inline(run.pk, client=http, sleep=Sleeps())  # resumed: the other three, then judging
    assert run.status == Run.Status.FINISHED, run.status_reason
    sent = Counter(r.body for r in server.requests)
    assert set(sent.values()) == {1}
    slots = Slot.objects.filter(run=run)
    assert sent == Counter(request_bytes(run, s) for s in slots for _ in s.calls.all())
    assert all(s.calls.count() == 1 and s.status == Slot.Status.OK for s in slots)
    assert ModelCall.objects.filter(slot__run=run, slot__phase=Phase.DECISIONS).count() == 4


# --- the ready-made template, end to end ---------------------------------------------------------


def test_the_development_attempts_template_runs_end_to_end_offline_as_estimated(project):
    cohort = build_cohort(project, sessions=3, targets=2, name="attempts-template")
    template = PAPER_PROTOCOLS["development-attempts"]
    assert template.bootstrap == {"seed": 20260919, "draws": 100_000}  # the paper's seed for App. F
    assert not any(c["criterion"] or c["family"] for c in template.contrasts)  # descriptive
    protocol, instantiated = protocol_from_template(template="development-attempts", cohort=cohort)
    assert instantiated.unavailable == [] and protocol.generator["provider"] == "offline"
    estimate = {p.phase: p.calls for p in protocol_estimate(protocol).phases}
    tasks = 6
    # memory per session; per task: the shared one-shot/draft, two notes calls, the whole record;
    # decisions: two answers from notes and one pruning; judging at most every answer: the one-shot (= the
    # draft), two answers from notes, the pruned answer and the whole record's (the notes calls are not judged)
    assert estimate == {"memories": 3, "generation": 4 * tasks, "decisions": 3 * tasks, "judging": 5 * tasks}
    protocol = protocol_seal(protocol=protocol, user=None)
    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    for phase in ("memories", "generation", "decisions"):
        assert ModelCall.objects.filter(slot__run=run, slot__phase=phase).count() == estimate[phase], phase
    assert ModelCall.objects.filter(slot__run=run, slot__phase="judging").count() <= estimate["judging"]
    finals = Prediction.objects.filter(run=run, label=FINAL)
    assert finals.count() == 5 * tasks and not finals.exclude(status__in=["ok", "empty"]).exists()
    assert set(run.analysis["conditions"]) >= set(protocol.conditions)


# --- App. K representations: the combined profile ---------------------------------------------------

PROFILE = "memory(profile,100w)+one-shot"
TAGS = "tags(6-10,top-40)+one-shot"


def test_the_profile_is_a_memory_kind_written_once_per_session_from_the_permitted_record():
    from experiments.core.assembly import assemble_memory_request
    from experiments.core.prompts import load_prompt
    sent = assemble_memory_request("profile", 100, TASK)
    assert sent.system == "You encode one interview participant on fixed psychological schemas. Output plain text."
    assert sent.user.startswith(f"[EVERYTHING THIS PARTICIPANT HAS SAID, their turns only]\n{RECORD}\n\n[TASK]\n"
                                "Infer this participant's profile from what they said, in about 100 words, as "
                                "exactly these 28 entries")
    assert sent.user == load_prompt("memory_profile_user").replace("{record}", RECORD).replace("{words}", "100")
    assert (sent.evidence, [r.name for r in sent.prompt_refs]) == (RECORD, ["memory_profile_system",
                                                                              "memory_profile_user"])
    entries = sent.user.split("[TASK]\n", 1)[1]
    # 5 + 1 + 10 + 3 + 5 + 4 = 28 entries, as App. K lists them
    assert entries.count("(each low, medium or high)") == 4 and "one of the 16 four-letter types" in entries
    for name in ("attachment style", "locus of control", "regulatory focus", "need for cognition", "universalism",
                 "sanctity", "relatedness", "neuroticism"):
        assert name in entries
    condition = get_condition(PROFILE)
    assert (condition.memory_kind, condition.memory_words, condition.user_prompt) == ("profile", 100,
                                                                                       "answer_memory_user")
    assert "[WHAT IS KNOWN ABOUT THIS PARTICIPANT]\nOpenness: high" in assemble(PROFILE, TASK, memory="Openness: high").user


def test_the_representations_template_runs_end_to_end_offline_as_estimated(project):
    cohort = build_cohort(project, sessions=3, targets=2, name="representations")
    template = PAPER_PROTOCOLS["representations"]
    assert template.bootstrap == {"seed": 20260917, "draws": 10_000}  # App. K's seed and draws
    assert template.conditions[0] == "screener-only"
    protocol, _ = protocol_from_template(template="representations", cohort=cohort)
    estimate = {p.phase: p.calls for p in protocol_estimate(protocol).phases}
    # per session: concrete, trait, profile and labels, and one tag choice; per task: four one-shot answers and
    # the answer from the tags
    assert estimate == {"memories": 12, "generation": 27, "decisions": 6, "judging": 30}
    protocol = protocol_seal(protocol=protocol, user=None)
    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    assert ModelCall.objects.filter(slot__run=run, slot__phase="memories").count() == estimate["memories"]
    # The stand-in writes every memory kind as the record's first sentences, so the three memory answers
    # of a task send identical messages and share one call (G.1): the estimate is an upper bound.
    generation = Slot.objects.filter(run=run, phase="generation")
    answers = generation.exclude(key__startswith="tags|")
    assert answers.count() == len({(s.task_id, s.request_sha256) for s in answers}) == 12
    assert generation.filter(key__startswith="tags|", task__isnull=True).count() == 3  # one choice per session
    assert generation.count() == 15 <= estimate["generation"]
    assert all(s.calls.count() == 1 for s in generation)
    assert ModelCall.objects.filter(slot__run=run, slot__phase="decisions").count() == estimate["decisions"]
    tags = Prediction.objects.filter(run=run, condition=TAGS, label=FINAL)
    assert tags.count() == 6 and {p.status for p in tags} == {"ok"}
    profiles = run.memories.filter(kind="profile", words=100)
    assert profiles.count() == 3 and all(m.text for m in profiles)  # once per session, kept with its text


# --- App. K representations: the tag arm ------------------------------------------------------------


def test_labels_are_parsed_counted_into_the_vocabulary_and_tags_chosen_from_it():
    from experiments.core.tags import parse_choice, parse_labels, vocabulary
    assert parse_labels("- Curious\n2. Film  composer\n• gardener, curious; 'Tech savvy'.") == [
        "curious", "film composer", "gardener", "tech savvy"]
    assert parse_labels('{"labels": ["A", "b"]}') == ["a", "b"] and parse_labels('["X", 3]') == ["x"]
    assert parse_labels("x" * 61) == []  # over-long: not a label
    # a label counts once per session; ties in alphabetical order
    assert vocabulary([["a", "b", "b"], ["b", "c"], ["c", "a"], ["d"]], size=3) == ["a", "b", "c"]
    assert vocabulary([["z"], ["y", "z"]]) == ["z", "y"]
    chosen = parse_choice('{"tags": ["A", "b", "zzz", "a"]}', ["a", "b"])
    assert chosen.usable and chosen.tags == ("a", "b")  # a vocabulary of two: both are enough
    too_few = parse_choice('{"tags": ["A", "b", "zzz"]}', ["a", "b", "c"])
    assert not too_few.usable and "2 tags of the vocabulary chosen, 3 needed" in too_few.error
    many = [f"t{i}" for i in range(12)]
    assert parse_choice('{"tags": %s}' % json.dumps(many), many).tags == tuple(many[:10])
    assert not parse_choice('{"tags": %s}' % json.dumps(many[:5]), many).usable  # 6 needed of 12
    assert parse_choice("not json", many).error == "the reply is not JSON"
    assert parse_choice('{"labels": []}', many).error == 'no "tags" list in the reply'


def test_the_tag_choice_call_sees_the_record_and_the_vocabulary():
    from experiments.core.tags import assemble_tags_choice
    sent = assemble_tags_choice(TASK, ["curious", "film composer"])
    assert sent.system == "You choose tags that describe one research-interview participant. Output JSON only."
    assert sent.user == (
        f"[EVERYTHING THIS PARTICIPANT HAS SAID, their turns only]\n{RECORD}\n\n[TAG VOCABULARY]\ncurious\n"
        "film composer\n\n[TASK]\nChoose between 6 and 10 tags from the vocabulary above that best describe this "
        "participant. Use only tags from the vocabulary, written exactly as there. Return only a JSON object of the "
        'form {"tags": ["first tag", "second tag"]}.')
    assert "How do you use AI" not in sent.user  # no question: one choice per session
    answer = assemble(TAGS, TASK, memory="curious, film composer")
    assert "[WHAT IS KNOWN ABOUT THIS PARTICIPANT]\ncurious, film composer\n\n[QUESTION]" in answer.user
    assert answer.evidence == "curious, film composer"


def test_a_run_chooses_tags_once_per_session_and_answers_each_task_from_them(project, server, http):
    cohort = build_cohort(project, sessions=2, targets=2, name="tags")
    shape = CohortShape(sessions=2, tasks=4, record_chars=500, question_chars=50, reference_chars=100)
    assert {p.phase: p.calls for p in estimate_run([get_condition(TAGS)], shape, generator_cap=10, judge_cap=10).phases} \
        == {"memories": 2, "generation": 2, "decisions": 4, "judging": 4}

    def memory(request):
        text = user_text(request)
        session = "0" if "In session 0" in text else "1"
        if "[TAG VOCABULARY]" in text:
            assert text.split("[TAG VOCABULARY]\n", 1)[1].startswith("curious\ncomposer\ngardener\nteacher\n\n")
            return ('{"tags": ["curious", "composer", "nonsense"]}' if session == "0"
                    else '{"tags": ["Curious", "composer", "gardener", "teacher"]}')
        return "curious\ncomposer\ngardener" if session == "0" else "curious\nteacher"

    Roles(server, memory=memory)
    run = make_run(project, cohort, conditions=[TAGS], generator=openai_model(server))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED, run.status_reason
    choices = Slot.objects.filter(run=run, phase=Phase.GENERATION)
    assert choices.count() == 2 and all(s.key.startswith("tags|") and s.task_id is None and s.session_id for s in choices)
    assert all(s.calls.count() == 1 for s in Slot.objects.filter(run=run))
    finals = Prediction.objects.filter(run=run, condition=TAGS, label=FINAL).select_related("task__session")
    by_status = Counter(p.status for p in finals)
    assert by_status == {"missing": 2, "ok": 2}  # session 0 named 2 tags of a vocabulary of 4: too few
    for p in finals.filter(status="ok"):
        assert p.evidence == "curious, composer, gardener, teacher"
        assert "[WHAT IS KNOWN ABOUT THIS PARTICIPANT]\ncurious, composer, gardener, teacher\n" in p.slot.user
    assert not finals.filter(status="missing", slot__isnull=False).exists()  # never redrawn
    assert Slot.objects.filter(run=run, phase=Phase.DECISIONS).count() == 2


def test_the_task_page_shows_the_notes_call_and_names_the_second_calls_to_text_readers_only(project, server, http,
                                                                                              cast):
    from django.test import Client
    cohort = build_cohort(project, sessions=1, targets=1, name="attempts-page")
    Roles(server, memory=lambda r: "NOTES-SENTINEL on gardening." if _notes_request(r) else "Likes gardening.",
          answer=lambda r: "Pruned." if _prune_request(r) else "Alpha answer.")
    run = make_run(project, cohort, conditions=[NOTES_RECORD, PRUNED], generator=openai_model(server))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    task = Prediction.objects.filter(run=run).first().task
    browser = Client()
    browser.force_login(cast["analyst"])
    page = browser.get(f"/p/{project.slug}/runs/{run.pk}/predictions/{task.pk}/").content.decode()
    assert page.count("notes (the first call; cut at 120 words before the answering call)") == 1  # its column only
    assert "NOTES-SENTINEL on gardening." in page
    assert "answer from the notes" in page and "pruned draft" in page
    browser.force_login(cast["viewer"])
    assert browser.get(f"/p/{project.slug}/runs/{run.pk}/predictions/{task.pk}/").status_code == 403
