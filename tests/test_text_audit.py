"""Every view of participant text is audited: the adjudication page, and the
admin's change and list views of the models that hold such text (sessions with their turns,
turns, screener answers, cohort questions, Mem0's memories, survey exclusions)."""
import pytest
from django.contrib.auth import get_user_model

from annotations.models import Assignment
from annotations.rating import rating_record
from experiments.data.audit_log import Kind
from experiments.models import AuditEntry, CohortTask, ScreenerItem, Session, Turn
from experiments.data.sessions import cohort_draw

ADMIN_MODELS = {"session": Session, "turn": Turn, "screeneritem": ScreenerItem, "cohorttask": CohortTask}


def entries(**filters):
    return list(AuditEntry.objects.filter(**filters).values_list("username", "kind", "target"))


def test_the_adjudication_page_is_audited(client, cast, campaign):
    a, b = (get_user_model().objects.get(username=name) for name in ("rater-a", "rater-b"))
    shared = Assignment.objects.filter(campaign=campaign, rater=a).first().item
    for user, grade in ((a, 0), (b, 3)):  # two grades apart: disputed
        rating_record(campaign=campaign, user=user, assignment_id=Assignment.objects.get(item=shared, rater=user).pk,
                      grade=grade)
    client.force_login(cast["owner"])
    before = AuditEntry.objects.count()
    page = client.get(f"/p/alpha/ratings/{campaign.pk}/adjudication/").content.decode()
    assert shared.task.answer_turn.text in page  # the real answer is shown ...
    assert AuditEntry.objects.count() == before + 1  # ... and recorded
    entry = AuditEntry.objects.latest("pk")
    assert (entry.username, entry.kind, entry.project_id) == ("owner-user", Kind.TASK, campaign.project_id)
    assert f"adjudication of campaign {campaign.pk}" in entry.target and entry.path.endswith("/adjudication/")


@pytest.fixture
def superuser(imported):
    cohort_draw(project=imported, name="c1", size=2, seed=1)
    return get_user_model().objects.create_superuser("root", password="a-long-test-password")


@pytest.mark.parametrize("model", sorted(ADMIN_MODELS))
def test_the_admin_audits_each_view_of_participant_text(client, superuser, imported, model):
    client.force_login(superuser)
    obj = ADMIN_MODELS[model].objects.order_by("pk").first()
    page = client.get(f"/admin/experiments/{model}/{obj.pk}/change/")
    assert page.status_code == 200
    assert entries(username="root", project=imported) == [
        ("root", Kind.TASK if model == "cohorttask" else Kind.SESSION,
         f"admin: {ADMIN_MODELS[model]._meta.verbose_name} {obj.pk}")]
    AuditEntry.objects.all().delete()
    listing = client.get(f"/admin/experiments/{model}/")
    assert listing.status_code == 200
    [(_, _, target)] = entries(username="root", project=imported)
    assert target.startswith(f"admin: list of {ADMIN_MODELS[model]._meta.verbose_name_plural}, page ")


def test_the_session_change_view_shows_turns_and_says_so(client, superuser, imported):
    client.force_login(superuser)
    session = Session.objects.get(external_id="sess-a")
    body = client.get(f"/admin/experiments/session/{session.pk}/change/").content.decode()
    assert "I would say it depends on the day really" in body
    assert AuditEntry.objects.filter(project=imported, username="root", kind=Kind.SESSION).count() == 1


def test_the_audited_admin_classes_cover_every_model_holding_text():
    from django.contrib import admin

    from experiments.data.audit_log import AuditedTextAdmin
    holding_text = {"session", "turn", "screeneritem", "cohorttask", "mem0extraction", "surveyexclusion"}
    audited = {m._meta.model_name for m, a in admin.site._registry.items() if isinstance(a, AuditedTextAdmin)}
    assert holding_text <= audited
