"""A campaign's stored numbers are checked against its results epochs (migrations 0008-0011), never
served stale: every change the results read moves the counter, or (ratings, 0011) the ratings' digest
read with it, for each campaign kind, and a cached view is one query; raters never wait on the check."""
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotations import campaign_agreement, content_check, pairwise
from annotations.campaign_agreement import campaign_results, results_for_page
from annotations.campaigns import gold_set
from annotations.content_check import content_check_campaign_create, content_check_results_for_page
from annotations.models import Adjudication, Assignment, CampaignRater, CampaignResult, HumanGrade, RatingCampaign, RatingItem
from annotations.pairwise import pairwise_campaign_create, pairwise_results_for_page
from annotations.rating import rater_item, rating_record, rating_undo
from annotations.results_epoch_sql import results_epoch, results_state
from experiments.models import Grade, ModelCall, Prediction, Protocol, Run, Slot
from tests.annotations_helpers import CONDITIONS, RATERS, add_raters, finished_run
from tests.test_annotations_pairwise import rate_all
from tests.test_content_check import PARAPHRASED, REWORDED
from tests.test_pairwise_judge_pages import judge_over

NO_QUEUE = {"enqueue": lambda campaign_id, sha: False}


def rate(campaign, name, grade, **answer):
    user = campaign.raters.get(user__username=name).user
    item = rater_item(campaign, user)["item"]
    return rating_record(campaign=campaign, user=user, assignment_id=item["assignment"], grade=grade, **answer)


def moves(campaign, change) -> bool:
    """Whether `change` changed what the check reads: the counters, or the ratings' digest."""
    before = results_state(campaign.pk).epochs
    change()
    return results_state(campaign.pk).epochs != before


def shown(campaign, page=results_for_page):
    """The page's numbers, computed here when stale (no queue); asserts they are marked current."""
    data, current = page(campaign, **NO_QUEUE)
    assert current
    return data


def test_a_cached_view_reads_one_row_not_the_ratings(campaign, monkeypatch):
    for grade in range(3):
        rate(campaign, "rater-a", grade)
        rate(campaign, "rater-b", grade)
    first = shown(campaign)
    monkeypatch.setattr(campaign_agreement, "results_inputs", lambda c: pytest.fail("inputs read on a cached view"))
    with CaptureQueriesContext(connection) as queries:
        assert shown(campaign) == first
    assert len(queries) == 1


def test_a_rating_added_changed_or_undone_after_caching_is_never_served_stale(campaign):
    rate(campaign, "rater-a", 1)
    rate(campaign, "rater-b", 1)
    cached = shown(campaign)
    assert cached["counts"] == campaign_results(campaign, use_cache=False)["counts"]
    for change in (lambda: rate(campaign, "rater-a", 3),  # added
                   lambda: rating_record(campaign=campaign, user=campaign.raters.get(user__username="rater-a").user,
                                         assignment_id=HumanGrade.objects.filter(rater__username="rater-a")
                                         .latest("pk").assignment_id, grade=0),  # changed within the window
                   lambda: rating_undo(campaign=campaign, user=campaign.raters.get(user__username="rater-a").user),
                   lambda: HumanGrade.objects.filter(campaign=campaign).update(seconds_spent=7.5)):
        before = CampaignResult.objects.get(campaign=campaign)
        assert moves(campaign, change)
        now = shown(campaign)
        fresh = campaign_results(campaign, use_cache=False)
        assert {k: v for k, v in now.items() if k != "computed_at"} == \
            {k: v for k, v in fresh.items() if k != "computed_at"}
        assert CampaignResult.objects.get(campaign=campaign).epochs != before.epochs


def test_a_change_that_reads_the_same_inputs_marks_the_stored_numbers_current(campaign):
    rate(campaign, "rater-a", 2)
    first = shown(campaign)
    # a rater's note enters no number: the counter does not move
    assert not moves(campaign, lambda: HumanGrade.objects.filter(campaign=campaign).update(note="later"))
    # the item being served does not either
    assert not moves(campaign, lambda: Assignment.objects.filter(campaign=campaign).update(served_at=timezone.now()))
    # a gold note moves it (items are tracked whole); the inputs are the same, the numbers kept
    item = RatingItem.objects.filter(campaign=campaign).first()
    assert moves(campaign, lambda: RatingItem.objects.filter(pk=item.pk).update(gold_note="see the guideline"))
    assert shown(campaign) == first
    stored = CampaignResult.objects.get(campaign=campaign)
    assert stored.epochs["campaign"] == results_epoch(campaign.pk)


def test_a_rating_stored_while_the_numbers_are_computed_makes_them_stale(campaign, monkeypatch):
    """The epochs are read before the inputs: a rating committed after they were read, whenever it
    lands while the numbers are computed, moves the counter past what the numbers are stored with."""
    rate(campaign, "rater-a", 1)
    compute = campaign_agreement.compute_results

    def with_a_rating_meanwhile(inputs):
        rate(campaign, "rater-b", 3)
        return compute(inputs)

    monkeypatch.setattr(campaign_agreement, "compute_results", with_a_rating_meanwhile)
    raced, current = results_for_page(campaign, **NO_QUEUE)
    assert current  # as computed from the inputs read before the rating
    monkeypatch.setattr(campaign_agreement, "compute_results", compute)
    stored = CampaignResult.objects.get(campaign=campaign)
    assert stored.epochs["ratings"] != results_state(campaign.pk).epochs["ratings"]
    after = shown(campaign)
    assert after["inputs_sha256"] != raced["inputs_sha256"]
    assert after["inputs_sha256"] == campaign_agreement.results_inputs(campaign)[1]


def test_the_grade_campaign_s_counter_moves_with_everything_its_numbers_read(campaign, cast):
    rate(campaign, "rater-a", 1)
    rate(campaign, "rater-b", 2)
    item = HumanGrade.objects.filter(campaign=campaign).first().assignment.item
    project = campaign.project
    add_raters(project, ["rater-d"])
    changes = {
        "a flag": lambda: HumanGrade.objects.filter(campaign=campaign).update(flagged=True),
        "a rater": lambda: CampaignRater.objects.create(campaign=campaign,
                                                        user=get_user_model().objects.get(username="rater-d")),
        "a gold grade": lambda: gold_set(campaign=campaign, number=item.number, grade=2),
        "an adjudication": lambda: Adjudication.objects.create(item=item, grade=1, decided_at=timezone.now()),
        "the hidden repeats": lambda: RatingCampaign.objects.filter(pk=campaign.pk).update(repeat_percent=10),
        "the run's predictions": lambda: Prediction.objects.filter(run=campaign.run).update(answer_sha256="x" * 64),
        "the run's grades": lambda: Grade.objects.filter(run=campaign.run).update(score=0),
        "the protocol's contrasts": lambda: Protocol.objects.filter(pk=campaign.run.protocol_id).update(contrasts=[]),
        "the protocol's bootstrap": lambda: Protocol.objects.filter(pk=campaign.run.protocol_id).update(
            bootstrap={"seed": 3, "draws": 200}),
        "a rating deleted": lambda: HumanGrade.objects.filter(campaign=campaign).delete(),
    }
    for what, change in changes.items():
        assert moves(campaign, change), what
    # not moved: the campaign's name, status and another campaign's rating
    assert not moves(campaign, lambda: RatingCampaign.objects.filter(pk=campaign.pk).update(name="renamed",
                                                                                       status="closed"))


def test_the_project_tasks_epoch_is_part_of_the_check(campaign):
    rate(campaign, "rater-a", 1)
    shown(campaign)
    stored = CampaignResult.objects.get(campaign=campaign).epochs
    session = RatingItem.objects.filter(campaign=campaign).first().task.session
    from experiments.models import Session
    Session.objects.filter(pk=session.pk).update(person_id=session.person_id)  # a statement on a session
    assert results_state(campaign.pk).epochs["tasks"] > stored["tasks"]
    assert results_state(campaign.pk).stored_epochs != results_state(campaign.pk).current(
        campaign_agreement.GRADES.version)


def test_numbers_stored_by_another_version_of_the_code_are_computed_again(campaign, monkeypatch):
    rate(campaign, "rater-a", 1)
    shown(campaign)
    monkeypatch.setattr(campaign_agreement, "GRADES", campaign_agreement.ResultsKind(
        **{**campaign_agreement.GRADES.__dict__, "version": "another"}))
    computed = []
    monkeypatch.setattr(campaign_agreement, "results_inputs",
                        lambda c, inputs=campaign_agreement.results_inputs: computed.append(1) or inputs(c))
    shown(campaign)
    assert computed and CampaignResult.objects.get(campaign=campaign).epochs["version"] == "another"


@pytest.fixture
def pairs(rated_run, cast):
    campaign = pairwise_campaign_create(run=rated_run, name="pairs", conditions=CONDITIONS, raters=RATERS,
                                        user=cast["owner"], seed=11, ratings_per_item=2)
    rate_all(campaign)
    return campaign


def test_pairwise_preferences_and_the_judge_run_move_the_counter(pairs, cast, monkeypatch):
    page = pairwise_results_for_page
    first = shown(pairs, page)
    monkeypatch.setattr(pairwise, "results_inputs", lambda c: pytest.fail("inputs read on a cached view"))
    assert shown(pairs, page) == first
    monkeypatch.undo()
    grade = HumanGrade.objects.filter(campaign=pairs).first()
    flipped = {"a": "b", "b": "tie", "tie": "a"}[grade.preference]
    assert moves(pairs, lambda: HumanGrade.objects.filter(pk=grade.pk).update(preference=flipped))
    assert shown(pairs, page)["win_rates"] == pairwise.pairwise_results(pairs, use_cache=False)["win_rates"]
    assert moves(pairs, lambda: Assignment.objects.filter(pk=grade.assignment_id).update(x_on_a=False)
                 if grade.assignment.x_on_a else Assignment.objects.filter(pk=grade.assignment_id).update(x_on_a=True))
    run = judge_over(pairs, cast)  # its slots, calls and its state moved the counter
    assert shown(pairs, page)["llm_judge"]["run"] == run.pk
    call = ModelCall.objects.filter(run=run, phase="judging", outcome="ok").first()
    other = '{"preferred": "A"}' if "tie" in call.text else '{"preferred": "tie"}'
    assert moves(pairs, lambda: ModelCall.objects.filter(pk=call.pk).update(text=other))
    assert not moves(pairs, lambda: ModelCall.objects.filter(pk=call.pk).update(lease_until=timezone.now()))
    assert moves(pairs, lambda: Slot.objects.filter(pk=call.slot_id).update(status="failed"))
    assert moves(pairs, lambda: Protocol.objects.filter(pk=run.protocol_id).update(
        pairwise_pairs=[[y, x] for x, y in run.protocol.pairwise_pairs]))
    assert moves(pairs, lambda: Run.objects.filter(pk=run.pk).update(status=Run.Status.STOPPED))
    assert shown(pairs, page)["llm_judge"] is None  # no finished judge run any more
    # another run's answers move nothing here
    other_run = Run.objects.create(protocol=pairs.run.protocol, status=Run.Status.FINISHED)
    answer = Prediction.objects.filter(run=pairs.run).first()
    assert not moves(pairs, lambda: Prediction.objects.create(
        run=other_run, task_id=answer.task_id, condition=answer.condition, label=answer.label, status=answer.status,
        text=answer.text, answer_sha256=answer.answer_sha256))
    assert moves(pairs, lambda: Prediction.objects.filter(run=pairs.run, pk=answer.pk).update(text="other"))
    assert moves(pairs, lambda: Assignment.objects.filter(campaign=pairs).delete())
    assert shown(pairs, page)["ratings"] == 0


def test_content_answers_move_the_counter_and_are_never_served_stale(cast, project):
    run = finished_run(project, people=3, conditions=[CONDITIONS[0], REWORDED, CONDITIONS[1], PARAPHRASED])
    add_raters(project)
    campaign = content_check_campaign_create(run=run, name="check", raters=RATERS, user=cast["owner"], seed=4,
                                             ratings_per_item=2)
    page = content_check_results_for_page
    rate(campaign, "rater-a", None, same_content="yes")
    first = shown(campaign, page)
    assert first["ratings"] == 1
    assert moves(campaign, lambda: rate(campaign, "rater-b", None, same_content="no"))
    assert shown(campaign, page)["ratings"] == 2
    assert moves(campaign, lambda: HumanGrade.objects.filter(campaign=campaign, same_content="no")
                 .update(same_content="partly"))
    assert shown(campaign, page) == content_check.content_check_results(campaign)
    assert shown(campaign, page)["shares"] != first["shares"]
    assert moves(campaign, lambda: Grade.objects.filter(run=run).update(score=1))
    assert moves(campaign, lambda: HumanGrade.objects.filter(campaign=campaign).delete())
    assert shown(campaign, page)["ratings"] == 0


def test_a_deleted_campaign_leaves_no_counter_and_truncate_marks_every_result_stale(campaign):
    rate(campaign, "rater-a", 1)
    shown(campaign)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE annotations_adjudication")
    assert CampaignResult.objects.get(campaign=campaign).epochs is None
    pk = campaign.pk
    HumanGrade.objects.filter(campaign=campaign).delete()
    RatingCampaign.objects.filter(pk=pk).delete()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM annotations_results_epoch WHERE campaign_id = %s", [pk])
        assert cursor.fetchone()[0] == 0


def pairwise_judge_protocol(pairs) -> Protocol:
    """A pairwise-judge protocol over the campaign's run, as a re-grade makes one."""
    base = pairs.run.protocol
    return Protocol.objects.create(
        project=base.project, name="judge", cohort=base.cohort, conditions=list(base.conditions),
        generator=base.generator, judge=base.judge, regrade_of=pairs.run, kind=Protocol.Kind.PAIRWISE,
        pairwise_pairs=[[p["x"], p["y"]] for p in pairs.pairs])


def test_a_judge_run_s_calls_move_the_counter_only_once_it_has_finished(pairs):
    shown(pairs, pairwise_results_for_page)
    protocol = pairwise_judge_protocol(pairs)
    assert not moves(pairs, lambda: Run.objects.create(protocol=protocol))  # not finished: not read
    run = Run.objects.get(protocol=protocol)
    now = timezone.now()

    def call(key, outcome="ok", text='{"preferred": "A"}', model=""):
        slot = Slot.objects.create(run=run, phase="judging", key=key, role=Slot.Role.JUDGE, system="", user="",
                                   request_sha256="", status=Slot.Status.OK)
        return ModelCall.objects.create(slot=slot, run=run, phase="judging", attempt=1, reserved_at=now,
                                        lease_until=now, outcome=outcome, text=text, model_version=model)

    assert not moves(pairs, lambda: call("k1"))  # a running judge's receipt
    assert moves(pairs, lambda: Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED))
    assert moves(pairs, lambda: call("k2"))  # a receipt landing after the finish
    assert not moves(pairs, lambda: call("k3", outcome=ModelCall.Outcome.IN_FLIGHT, text=None))  # a reservation
    reserved = ModelCall.objects.get(slot__key="k3")
    assert not moves(pairs, lambda: ModelCall.objects.filter(pk=reserved.pk).update(outcome="transient"))
    assert moves(pairs, lambda: ModelCall.objects.filter(pk=reserved.pk).update(model_version="offline"))
    assert moves(pairs, lambda: ModelCall.objects.filter(pk=reserved.pk).update(outcome="ok", text="{}"))
    assert moves(pairs, lambda: ModelCall.objects.filter(slot__key="k1").delete())


def test_a_statement_changing_many_rows_moves_the_counter_once(campaign):
    for grade in range(3):
        rate(campaign, "rater-a", grade)
        rate(campaign, "rater-b", grade)
    before = results_epoch(campaign.pk)
    assert Assignment.objects.filter(campaign=campaign).update(x_on_a=True) > 6
    assert results_epoch(campaign.pk) == before + 1
    # ratings move no counter (0011): their digest changes, once, whatever the number of rows
    digest = results_state(campaign.pk).epochs["ratings"]
    assert HumanGrade.objects.filter(campaign=campaign).update(flagged=True) == 6
    assert results_epoch(campaign.pk) == before + 1 and results_state(campaign.pk).epochs["ratings"] != digest
    assert not moves(campaign, lambda: HumanGrade.objects.filter(campaign=campaign).update(flagged=True))


def _noted() -> tuple:
    """What the row triggers noted and no statement trigger moved yet (migration 0012): empty between statements."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(current_setting('ownwords.results_campaigns', true), ''), "
                       "COALESCE(current_setting('ownwords.results_judge_runs', true), '')")
        return cursor.fetchone()


def test_predictions_and_grades_move_their_campaigns_once_per_statement_and_other_runs_move_nothing(campaign):
    run = campaign.run
    answers = Prediction.objects.filter(run=run)
    assert answers.count() > 1
    before = results_epoch(campaign.pk)
    # many rows of the campaign's run in one statement: one move, the counter row written once
    assert answers.update(score=1) > 1
    assert results_epoch(campaign.pk) == before + 1 and _noted() == ("", "")
    # an insert, a grade's upsert (its INSERT and UPDATE fire in one statement) and a delete move it too
    answer = answers.first()
    grade = Grade.objects.filter(run=run).first()
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO experiments_grade (run_id, task_id, answer_sha256, status, score, rationale, "
                       "parse_error) VALUES (%s, %s, %s, 'ok', 2, '', '') ON CONFLICT (run_id, task_id, answer_sha256) "
                       "DO UPDATE SET score = EXCLUDED.score", [run.pk, grade.task_id, grade.answer_sha256])
    assert results_epoch(campaign.pk) == before + 2
    assert moves(campaign, lambda: Prediction.objects.create(
        run=run, task_id=answer.task_id, condition=answer.condition, label="added", status=answer.status,
        text=answer.text, answer_sha256=answer.answer_sha256))
    assert moves(campaign, lambda: Prediction.objects.filter(run=run, label="added").delete())
    # the answers and grades of a run no campaign reads (an engine's run) move nothing, note nothing
    other = Run.objects.create(protocol=run.protocol)
    assert not moves(campaign, lambda: Prediction.objects.create(
        run=other, task_id=answer.task_id, condition=answer.condition, label=answer.label, status=answer.status,
        text=answer.text, answer_sha256=answer.answer_sha256))
    assert not moves(campaign, lambda: Prediction.objects.filter(run=other).update(text="rewritten"))
    assert not moves(campaign, lambda: Grade.objects.create(run=other, task_id=grade.task_id,
                                                           answer_sha256=grade.answer_sha256, status="ok", score=1))
    assert _noted() == ("", "")
    # a prediction moved from that run to the campaign's: the campaign over its new run moves
    assert moves(campaign, lambda: Prediction.objects.filter(run=other).update(run=run, label="moved"))


def test_a_statement_rolled_back_leaves_no_note_and_moves_nothing(campaign):
    from django.db import DatabaseError, transaction
    before = results_epoch(campaign.pk)
    with pytest.raises(DatabaseError), transaction.atomic():
        Prediction.objects.filter(run=campaign.run).update(score=2)
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")
    assert results_epoch(campaign.pk) == before and _noted() == ("", "")
    # within a transaction that goes on, a savepoint rolled back takes its note with it
    with transaction.atomic():
        with pytest.raises(DatabaseError), transaction.atomic():
            with connection.cursor() as cursor:
                # the row trigger notes the campaign, then the statement fails (a NOT NULL column set to NULL)
                cursor.execute("UPDATE experiments_prediction SET label = NULL WHERE run_id = %s", [campaign.run_id])
        assert _noted() == ("", "")
    assert results_epoch(campaign.pk) == before


def test_a_reservation_of_a_judge_call_notes_nothing(pairs):
    """A reservation (no outcome, no model yet) meets none of the judge call's conditions: no function runs."""
    protocol = pairwise_judge_protocol(pairs)
    run = Run.objects.create(protocol=protocol, status=Run.Status.FINISHED)
    slot = Slot.objects.create(run=run, phase="judging", key="k1", role=Slot.Role.JUDGE, system="", user="",
                               request_sha256="", status=Slot.Status.PENDING)
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT tgname FROM pg_trigger WHERE tgrelid = 'experiments_modelcall'::regclass "
                       "AND tgname LIKE 'results_%%' AND NOT tgisinternal ORDER BY tgname")
        assert [name for (name,) in cursor.fetchall()] == [
            "results_call_moved", "results_move_noted", "results_note_judge_run_delete",
            "results_note_judge_run_insert", "results_truncated"]
    assert not moves(pairs, lambda: ModelCall.objects.create(slot=slot, run=run, phase="judging", attempt=1,
                                                            reserved_at=now, lease_until=now))
    assert _noted() == ("", "")
    # its receipt and its slot's, in one statement as the journal makes them, move the campaign over
    # the run it judges (the run is finished); its deletion, once answered, moves it again
    before = results_epoch(pairs.pk)
    with connection.cursor() as cursor:
        cursor.execute("WITH attempt AS (UPDATE experiments_modelcall SET outcome = 'ok', text = %s WHERE slot_id = %s "
                       "RETURNING slot_id) UPDATE experiments_slot SET status = 'ok' WHERE id IN (SELECT slot_id FROM attempt)",
                       ['{"preferred": "A"}', slot.pk])
    assert results_epoch(pairs.pk) > before and _noted() == ("", "")
    assert moves(pairs, lambda: ModelCall.objects.filter(slot=slot).delete())
    assert _noted() == ("", "")
    # while the judge run is not finished, its receipts move nothing and leave no note
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    call = ModelCall.objects.create(slot=slot, run=run, phase="judging", attempt=2, reserved_at=now, lease_until=now)
    assert not moves(pairs, lambda: ModelCall.objects.filter(pk=call.pk).update(outcome="ok", text="{}"))
    assert _noted() == ("", "")


def _row_function_calls() -> int:
    """How often this transaction called 0009's row function (track_functions, set for it by the test)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(sum(calls), 0) FROM pg_stat_xact_user_functions "
                       "WHERE funcname = 'annotations_results_row_moved'")
        return cursor.fetchone()[0]


def test_a_receipt_of_a_call_in_flight_calls_no_function_and_a_late_one_still_moves_the_counter(pairs):
    """Migration 0014: the journal's receipt (its call and its slot, both in flight, settled in one
    statement) fires neither judge trigger: their run cannot have finished. A receipt that lands after
    its lease ran out (the call already marked unknown) on a run finished meanwhile still moves the counter."""
    protocol = pairwise_judge_protocol(pairs)
    run = Run.objects.create(protocol=protocol, status=Run.Status.RUNNING, phase="judging")
    now = timezone.now()
    slots = [Slot.objects.create(run=run, phase="judging", key=key, role=Slot.Role.JUDGE, system="", user="",
                                 request_sha256="", status=Slot.Status.IN_FLIGHT) for key in ("k1", "k2")]
    for slot in slots:
        ModelCall.objects.create(slot=slot, run=run, phase="judging", attempt=1, reserved_at=now, lease_until=now)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL track_functions = 'pl'")

    def receipt(slot, outcome_before):
        with connection.cursor() as cursor:
            cursor.execute("WITH attempt AS (UPDATE experiments_modelcall SET outcome = 'ok', text = %s, "
                           "model_version = 'judge-1' WHERE slot_id = %s AND outcome = %s RETURNING slot_id) "
                           "UPDATE experiments_slot SET status = 'ok' WHERE id IN (SELECT slot_id FROM attempt) "
                           "AND status = 'in_flight'", ['{"preferred": "A"}', slot.pk, outcome_before])

    before = results_epoch(pairs.pk)
    receipt(slots[0], "")
    assert ModelCall.objects.get(slot=slots[0]).outcome == "ok" and Slot.objects.get(pk=slots[0].pk).status == "ok"
    assert _row_function_calls() == 0 and results_epoch(pairs.pk) == before
    # the other's lease ran out (`journal.expire_leases`), the run finished; then its answer lands
    ModelCall.objects.filter(slot=slots[1]).update(outcome=ModelCall.Outcome.UNKNOWN)
    Slot.objects.filter(pk=slots[1].pk).update(status=Slot.Status.UNKNOWN)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED, phase="analysis")
    before, calls = results_epoch(pairs.pk), _row_function_calls()  # the finish called it too (the run moved)
    receipt(slots[1], ModelCall.Outcome.UNKNOWN)
    assert ModelCall.objects.get(slot=slots[1]).outcome == "ok"
    assert _row_function_calls() == calls + 1 and results_epoch(pairs.pk) > before
