"""Access checks for project pages (docs/design.md §2), in one place, and who may spend money (`may_spend`).

Every view starts with `membership_for(request, slug, roles=...)`: a project the
user is not a member of does not exist for them (404); a member whose role may not
use the page gets 403.
"""
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, Q, Subquery
from django.http import Http404

from experiments.execution.endpoints import configured_endpoints
from experiments.models import EndpointGrant, Membership, Project, Protocol, Role, Run

EVERY_ROLE = frozenset(Role)
TEXT_READERS = frozenset({Role.OWNER, Role.ANALYST})
OWNERS = frozenset({Role.OWNER})


# A superuser who is not a member reads every project as an analyst: every page and text, each
# read audited like anyone's, but no owner's action (members, imports, seals, spending) and no
# rater's queue. A membership of their own, if any, decides instead.
SUPERUSER_ROLE = Role.ANALYST


def superuser_membership(user, project: Project) -> Membership:
    """The unsaved membership a non-member superuser acts under (see SUPERUSER_ROLE)."""
    return Membership(project=project, user=user, role=SUPERUSER_ROLE)


def memberships_of(user) -> list[Membership]:
    """The user's memberships by project slug; for a superuser, every project (their own role where
    they are a member, SUPERUSER_ROLE elsewhere)."""
    own = list(Membership.objects.filter(user=user).select_related("project").order_by("project__slug"))
    if not user.is_superuser:
        return own
    mine = {m.project_id for m in own}
    others = [superuser_membership(user, p) for p in Project.objects.exclude(pk__in=mine)]
    return sorted(own + others, key=lambda m: m.project.slug)


def membership_for(request, slug: str, *, roles=EVERY_ROLE) -> Membership:
    """The user's membership of project `slug`, checked against `roles`."""
    membership = (
        Membership.objects.select_related("project")
        .filter(project__slug=slug, user=request.user)
        .first()
    )
    if membership is None and request.user.is_superuser:
        project = Project.objects.filter(slug=slug).first()
        membership = superuser_membership(request.user, project) if project is not None else None
    if membership is None:
        raise Http404("No such project")
    if membership.role not in roles:
        raise PermissionDenied(f"The {membership.role} role cannot use this page")
    return membership


# Every role but the blinded rater: protocols and runs show condition names and aggregate
# counts, which a rater must never see (docs/design.md §2), but no participant text.
AGGREGATE_READERS = frozenset({Role.OWNER, Role.ANALYST, Role.VIEWER})


def protocol_for(request, slug: str, pk: int, *, roles=AGGREGATE_READERS):
    """(membership, protocol) for protocol `pk` of project `slug`, checked against `roles`.

    A protocol of another project is not found (404), like the project itself.
    """
    membership = membership_for(request, slug, roles=roles)
    protocol = (
        Protocol.objects.select_related("cohort", "sealed_by", "created_by")
        .filter(project=membership.project, pk=pk)
        .first()
    )
    if protocol is None:
        raise Http404("No such protocol")
    return membership, protocol


def run_for(request, slug: str, pk: int, *, roles=AGGREGATE_READERS):
    """(membership, run) for run `pk` of project `slug`, checked against `roles`.

    One query for both (run pages are polled and paged through): the run of that project with
    the user's membership of it. No run there, or no membership, is the same 404.
    """
    mine = Membership.objects.filter(project=OuterRef("protocol__project"), user=request.user)
    run = (
        Run.objects.select_related("protocol__project", "protocol__cohort", "protocol__sealed_by", "created_by")
        .filter(protocol__project__slug=slug, pk=pk)
        .annotate(member_pk=Subquery(mine.values("pk")[:1]), member_role=Subquery(mine.values("role")[:1]))
        .first()
    )
    if run is not None and run.member_pk is None and request.user.is_superuser:
        run.member_role = SUPERUSER_ROLE
    elif run is None or run.member_pk is None:
        raise Http404("No such run")
    if run.member_role not in roles:
        raise PermissionDenied(f"The {run.member_role} role cannot use this page")
    membership = Membership(pk=run.member_pk, project=run.protocol.project, user=request.user, role=run.member_role)
    return membership, run


def runs_for(request, slug: str, *, roles=AGGREGATE_READERS):
    """(membership, runs) for the runs the query names (`run` repeated) in project `slug`, checked
    against `roles`: in the order given, each once.

    A run of another project, or a value that is no run id, is not found (404), like the project.
    """
    membership = membership_for(request, slug, roles=roles)
    try:
        ids = list(dict.fromkeys(int(v) for v in request.GET.getlist("run")))
    except ValueError:
        raise Http404("No such run")
    found = {r.pk: r for r in Run.objects.select_related("protocol__cohort")
             .filter(protocol__project=membership.project, pk__in=ids)}
    if len(found) != len(ids):
        raise Http404("No such run")
    return membership, [found[i] for i in ids]


# --- who may spend money ---------------------------------------------------------------------

# The offline stand-in costs nothing; every other provider is a paid service.
FREE_PROVIDERS = frozenset({"offline"})


def calls_paid_provider(protocol) -> bool:
    """Whether a run of `protocol` sends requests to a paid provider.

    A re-grade-only protocol sends only its judge's requests (App. H); its generator is a copy.
    """
    return any(not isinstance(c, dict) or c.get("provider") not in FREE_PROVIDERS for c in _senders(protocol))


def may_spend(membership, protocol) -> bool:
    """Whether this member may seal, start, pause, resume, re-issue or continue (accept missing)
    runs of `protocol` — the one rule for every action that spends, or stops spending, money.

    Owners always; analysts for protocols that call no paid provider, and for paid ones only
    when the project delegates spending to them (`Project.analysts_may_spend`). Whoever may
    start a run may also pause it: the same rule decides both. Raters and viewers never.
    On top of the role, each paid endpoint the protocol sends to needs the administrator's grant
    for the user (`grant_refusal`).
    """
    return _role_refusal(membership, protocol) is None and grant_refusal(membership.user, protocol) is None


def _role_refusal(membership, protocol) -> str | None:
    if membership is None or membership.role not in TEXT_READERS:
        return "only owners (and analysts the project allows) may seal, start, pause or resume runs"
    if membership.role == Role.ANALYST and not membership.project.analysts_may_spend and calls_paid_provider(protocol):
        return ("this protocol calls a paid provider: only owners may seal, start, pause or resume its runs "
                "(an owner may delegate this to analysts in the project's settings)")
    return None


def spending_refusal(membership, protocol) -> str:
    """Why `may_spend` said no, in words for a page or a shell."""
    return _role_refusal(membership, protocol) or grant_refusal(membership.user, protocol) or ""


# --- the administrator's grants per paid endpoint ----------------------------------------------

def _senders(protocol) -> list:
    return [protocol.judge] if protocol.regrade_of_id is not None else [protocol.generator, protocol.judge]


def config_grant_refusal(user, config) -> str | None:
    """Why `user` may not spend through `config` (a model configuration as stored), or None.

    The offline stand-in is free for all and a superuser holds every grant; otherwise the user,
    or one of their groups, needs a grant for an endpoint of the list that admits this
    configuration (its provider, URL and key variable). A configuration no endpoint admits is
    left to sealing, which refuses it with its own message.
    """
    if not isinstance(config, dict) or config.get("provider") in FREE_PROVIDERS:
        return None
    provider, base_url, key = (str(config.get(k) or "") for k in ("provider", "base_url", "api_key_env"))
    names = [e.name for e in configured_endpoints() if e.admits(provider, base_url) and e.allows_key(key or None)]
    if not names or (user is not None and user.is_superuser):
        return None
    if user is not None and EndpointGrant.objects.filter(endpoint__in=names).filter(
            Q(user=user) | Q(group__in=user.groups.all())).exists():
        return None
    who = user.get_username() if user is not None else "nobody"
    return (f"the endpoint {names[0]} is a paid service: spending on it needs a grant from the administrator, "
            f"and {who} holds none (the administrator grants it in the admin's endpoint grants or with "
            f"manage.py endpoint_grants grant '{names[0]}' --user {who})")


def grant_refusal(user, protocol) -> str | None:
    """Why `user` holds no grant for a paid endpoint `protocol` sends to, or None."""
    return next((why for why in (config_grant_refusal(user, c) for c in _senders(protocol)) if why), None)


# --- who may create projects -------------------------------------------------------------------

def may_create_projects(user) -> bool:
    """Any signed-in account, unless the administrator turned that off
    (OWNWORDS_ANYONE_MAY_CREATE_PROJECTS=0): then staff and holders of experiments.add_project."""
    if settings.OWNWORDS_ANYONE_MAY_CREATE_PROJECTS:
        return user.is_authenticated
    return user.is_authenticated and (user.is_staff or user.has_perm("experiments.add_project"))


PROJECT_CREATION_REFUSAL = ("On this server only the administrator's staff (and accounts given the "
                            "“add project” permission) create projects; ask the administrator for one, "
                            "or to be added to an existing project.")


def require_spending(membership, protocol) -> None:
    """PermissionDenied unless `may_spend`; views call this right after their access helper."""
    if not may_spend(membership, protocol):
        raise PermissionDenied(spending_refusal(membership, protocol))


def spender(protocol, username: str):
    """(user, None) when `username` may spend on `protocol`, else (None, why): for management commands."""
    membership = (
        Membership.objects.select_related("user", "project")
        .filter(project_id=protocol.project_id, user__username=username)
        .first()
    )
    if membership is None:
        return None, f"{username!r} is not a member of project '{protocol.project.slug}'"
    if not may_spend(membership, protocol):
        return None, f"{username!r} may not do this: {spending_refusal(membership, protocol)}"
    return membership.user, None


def member_with_role(project, username: str, *, roles):
    """The user called `username` when they hold one of `roles` in `project`, else None.

    Management commands take `--user` to record who acted; the same roles apply as on the pages.
    """
    membership = (
        Membership.objects.select_related("user")
        .filter(project=project, user__username=username, role__in=roles)
        .first()
    )
    return membership.user if membership else None
