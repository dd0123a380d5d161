"""Who may spend money: the whole permission matrix, on the pages and in the shell.

Owners seal, start, pause, resume and decide about slots without an answer (re-issue, continue
with them missing) for every protocol; analysts do so for protocols that call no paid provider,
and for paid ones only when the project delegates spending to them; raters and viewers never;
a member of another project finds nothing. One rule decides all of it: `access.may_spend`.
A refused action changes nothing.
"""
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from experiments.access import may_spend
from experiments.execution import control, driver, progress
from experiments.execution.sealing import protocol_seal
from experiments.models import Amendment, EndpointGrant, Membership, Protocol, Run, Slot
from experiments.models.runs import Phase
from experiments.data.sessions import cohort_draw

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
# A paid provider; nothing is ever sent to it here (no worker serves the queue in these tests).
PAID = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "gpt-test-1"}
PROVIDERS = {"paid": PAID, "offline": OFFLINE}
MEMORY = "memory(concrete,100w)+one-shot"
OWNWORDS = "ownwords(B=|memory|)"

ACTORS = ["owner", "analyst", "delegated analyst", "rater", "viewer", "outsider"]
ACTIONS = ["seal", "start", "pause", "resume", "reissue", "accept-missing"]


def allowed(actor: str, kind: str) -> bool:
    """The rule, written out once more by hand: what the matrix must show."""
    return actor == "owner" or actor == "delegated analyst" or (actor == "analyst" and kind == "offline")


def refused_status(actor: str) -> int:
    return 404 if actor == "outsider" else 403


def _protocol(world, name, *, sealed):
    protocol = Protocol.objects.create(
        project=world["project"], name=name, cohort=world["cohort"], conditions=[MEMORY, OWNWORDS],
        generator=world["config"], judge=world["config"], concurrency={world["config"]["provider"]: 2},
        bootstrap={"seed": 7, "draws": 200})
    return protocol_seal(protocol=protocol, user=None) if sealed else protocol


def _run(world, status=Run.Status.RUNNING):
    run = Run.objects.create(protocol=world["sealed"])
    control.run_start(run=run)
    driver.run_drive(run.pk)  # plans the memories; nothing is sent
    if status == Run.Status.PAUSED:
        control.run_pause(run=run, user=None, reason="set up")
    return run


def _with_unknown(world):
    run = _run(world)
    Slot.objects.filter(pk=Slot.objects.filter(run=run).order_by("pk").first().pk).update(
        status=Slot.Status.UNKNOWN)
    return run


def _at_decision(world):
    """Paused at the end of the memories: every slot answered but one unknown."""
    run = _run(world)
    slots = Slot.objects.filter(run=run, phase=Phase.MEMORIES).order_by("pk")
    slots.update(status=Slot.Status.OK)
    Slot.objects.filter(pk=slots.first().pk).update(status=Slot.Status.UNKNOWN)
    with_lock = Run.objects.get(pk=run.pk)
    control.decision_pause(with_lock)
    return run


SETUPS = {
    # action: (url name, object it acts on, POST data)
    "seal": ("protocol_seal", lambda w: w["draft"], {"confirm": "yes"}),
    "start": ("run_create", lambda w: w["sealed"], {}),
    "pause": ("run_pause", lambda w: _run(w), {"reason": "costs"}),
    "resume": ("run_resume", lambda w: _run(w, Run.Status.PAUSED), {"reason": "go on"}),
    "reissue": ("run_reissue", _with_unknown, {"reason": "worker died"}),
    "accept-missing": ("run_accept_missing", _at_decision, {"reason": "as the paper"}),
}


@pytest.fixture(params=sorted(PROVIDERS))
def world(request, imported, cast, monkeypatch):
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    kind = request.param
    users = dict(cast)
    delegated = type(cast["owner"]).objects.create_user(username="delegated-user", password="pw-for-tests-only")
    Membership.objects.create(project=imported, user=delegated, role="analyst")
    users["delegated analyst"] = delegated
    # The administrator's grant for the paid endpoint, to everyone here: this file is about the
    # project roles on top of it (tests/test_endpoint_grants.py: without a grant).
    for user in users.values():
        EndpointGrant.objects.create(endpoint="test-loopback", user=user)
    cohort = cohort_draw(project=imported, name="c1", size=2, seed=1)
    world = {"project": imported, "cohort": cohort, "config": PROVIDERS[kind], "kind": kind, "users": users}
    world["draft"] = _protocol(world, "draft", sealed=False)
    world["sealed"] = _protocol(world, "sealed", sealed=True)
    return world


def _delegate_if(world, actor):
    """Analysts spend on paid protocols only when the project says so; the delegated analyst's project does."""
    world["project"].analysts_may_spend = actor == "delegated analyst"
    world["project"].save(update_fields=["analysts_may_spend"])


def _snapshot():
    return {
        "sealed": list(Protocol.objects.order_by("pk").values_list("pk", "sealed_at")),
        "runs": list(Run.objects.order_by("pk").values_list("pk", "status", "phase", "circuit_open")),
        "amendments": Amendment.objects.count(),
        "slots": list(Slot.objects.order_by("pk").values_list("status", "amended_attempts")),
    }


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("actor", ACTORS)
def test_the_pages_let_exactly_those_who_may_spend_act(client, world, actor, action):
    url_name, target, data = SETUPS[action]
    obj = target(world)
    _delegate_if(world, actor)
    client.force_login(world["users"][actor])
    before = _snapshot()
    response = client.post(reverse(url_name, args=[world["project"].slug, obj.pk]), data)
    if allowed(actor, world["kind"]):
        assert response.status_code == 302, response.content[:300]
        assert _snapshot() != before, f"{actor} may {action} but nothing changed"
    else:
        assert response.status_code == refused_status(actor)
        assert _snapshot() == before


COMMANDS = {
    # action: (command, object it acts on, extra options)
    "seal": ("protocol_seal", lambda w: w["draft"], {}),
    "start": ("run_start", lambda w: w["sealed"], {}),
    "pause": ("run_pause", lambda w: _run(w), {"reason": "costs"}),
    "resume": ("run_resume", lambda w: _run(w, Run.Status.PAUSED), {"reason": "go on"}),
    "reissue": ("run_reissue", _with_unknown, {"reason": "worker died", "yes": True}),
    "accept-missing": ("run_accept_missing", _at_decision, {"reason": "as the paper"}),
}


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("actor", ACTORS)
def test_the_commands_let_exactly_those_who_may_spend_act(world, actor, action):
    command, target, options = COMMANDS[action]
    obj = target(world)
    _delegate_if(world, actor)
    before = _snapshot()
    username = world["users"][actor].username
    if allowed(actor, world["kind"]):
        call_command(command, str(obj.pk), user=username, **options)
        assert _snapshot() != before
    else:
        with pytest.raises(CommandError, match=f"'{username}' (may not do this|is not a member)"):
            call_command(command, str(obj.pk), user=username, **options)
        assert _snapshot() == before


@pytest.mark.parametrize("actor", ACTORS)
def test_the_run_page_offers_the_actions_only_to_those_who_may_spend(client, world, actor):
    run = _at_decision(world)
    _delegate_if(world, actor)
    client.force_login(world["users"][actor])
    response = client.get(reverse("run_detail", args=[world["project"].slug, run.pk]))
    if actor == "outsider" or actor == "rater":
        assert response.status_code == refused_status(actor)
        return
    body = response.content.decode()
    shown = 'id="accept-missing-form"' in body and 'id="reissue-form"' in body
    assert shown == allowed(actor, world["kind"])
    assert "Waiting for an owner&#x27;s decision" in body or "Waiting for an owner's decision" in body  # everyone sees why


def test_may_spend_is_the_rule_for_each_role(world):
    project = world["project"]
    memberships = {m.role: m for m in Membership.objects.filter(project=project).exclude(user__username="delegated-user")}
    for delegate in (False, True):
        project.analysts_may_spend = delegate
        project.save()
        for role, membership in memberships.items():
            membership.project = project
            actor = {"analyst": "delegated analyst" if delegate else "analyst"}.get(role, role)
            assert may_spend(membership, world["sealed"]) == allowed(actor, world["kind"]), (role, delegate)
    assert may_spend(None, world["sealed"]) is False


def test_whoever_may_start_may_pause_the_run_they_started(client, world):
    """The delegated analyst starts a paid run and pauses it; without the setting, neither."""
    world["project"].analysts_may_spend = True
    world["project"].save()
    client.force_login(world["users"]["delegated analyst"])
    client.post(reverse("run_create", args=[world["project"].slug, world["sealed"].pk]))
    run = Run.objects.get()
    assert run.created_by == world["users"]["delegated analyst"] and run.status == Run.Status.RUNNING
    client.post(reverse("run_pause", args=[world["project"].slug, run.pk]), {"reason": "enough"})
    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED


@pytest.mark.parametrize("actor", ["owner", "analyst", "delegated analyst"])
def test_the_protocol_page_offers_seal_and_run_only_to_those_who_may_spend(client, world, actor):
    _delegate_if(world, actor)
    client.force_login(world["users"][actor])
    slug = world["project"].slug
    draft = client.get(reverse("protocol_detail", args=[slug, world["draft"].pk])).content.decode()
    sealed = client.get(reverse("protocol_detail", args=[slug, world["sealed"].pk])).content.decode()
    offered = (reverse("protocol_seal", args=[slug, world["draft"].pk]) in draft,
               reverse("run_create", args=[slug, world["sealed"].pk]) in sealed)
    assert offered == (allowed(actor, world["kind"]),) * 2
