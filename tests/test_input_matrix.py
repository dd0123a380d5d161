"""The NUL/overflow matrix: every GET and POST parameter of every page, sent with a NUL,
a lone surrogate (`%ED%A0%80` in the query string or form body) and a 30-digit integer, answers 400
or a normal page — never 500, never an error from the database.

The pages are the site's URL patterns (the admin and the job dashboard aside), filled in from one
project holding data (a finished run, a campaign with raters, an unsealed protocol); the GET
parameters are every name a view reads (checked against the source below), the POST parameters
every field of every form the owner and a rater are shown, sent to that form's page.
"""
from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import URLResolver, get_resolver, resolve, Resolver404

from annotations.core.result_tables import CSV_TABLES as CAMPAIGN_TABLES
from experiments.data.api_tokens import token_create
from experiments.models import CohortTask, Membership, Project, Protocol, Role
from experiments.web.analysis.views import CSV_TABLES as RUN_TABLES
from ownwords_site.middleware import ID_PARAMETERS, PAGING_PARAMETERS

INTEGER_PARAMETERS = ID_PARAMETERS | PAGING_PARAMETERS

pytestmark = pytest.mark.django_db  # each test in a transaction, on top of the module's world

REPO = Path(__file__).resolve().parent.parent
SLUG = "matrix"
GET_PARAMETERS = ["page", "run", "q", "user", "kind", "format", "condition", "grade", "a", "ga", "b", "gb", "study",
                  "person", "chosen", "answered", "filter", "sort", "missing", "copied", "next",
                  "cursor", "limit"]  # the last two: the JSON API's pages (experiments/web/api/paging.py)
NUL, SURROGATE, HUGE = "a\x00b", "%ED%A0%80", "1" * 30
SKIPPED_PREFIXES = ("admin/", "django-rq/")
# The JSON API: sent with the owner's token (a session opens nothing there), its rate limit lifted.
API_PREFIX = "api/v1/"


def routes() -> list[tuple[str, str]]:
    """(route, url name) of every page of the two apps and the login."""
    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            else:
                yield prefix + str(p.pattern), p.name
    return [(r, n) for r, n in walk(get_resolver().url_patterns)
            if n and not r.startswith(SKIPPED_PREFIXES) and n != "logout"]


ROUTES = routes()


def path_for(route: str, world: dict) -> str:
    """The route with its parameters filled from the world."""
    def value(match):
        converter, name = match.group(1), match.group(2)
        before = route[:match.start()]
        if name == "slug":
            return SLUG
        if name == "pk":
            for segment, key in (("cohorts/", "cohort"), ("protocols/", "protocol"), ("runs/", "run"),
                                 ("ratings/", "campaign"), ("surveys/", "nothing"), ("tokens/", "revocable_token")):
                if before.endswith(segment):
                    return str(world[key])
        if name in world:
            return str(world[name])
        if name == "table":
            return "contrasts" if "survey" in route else (next(iter(CAMPAIGN_TABLES)) if "ratings" in route
                                                          else next(iter(RUN_TABLES)))
        raise AssertionError(f"no value for {converter}:{name} in {route}")
    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", value, route)


class Forms(HTMLParser):
    """The POST forms of a page: action → {field name: value}."""

    def __init__(self, page_path: str):
        super().__init__()
        self.page_path, self.forms, self.current = page_path, {}, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and (attrs.get("method") or "get").lower() == "post":
            action = urlsplit(attrs.get("action") or self.page_path).path
            self.current = self.forms.setdefault(action, {})
        elif tag in ("input", "select", "textarea") and self.current is not None and attrs.get("name"):
            if attrs.get("type") not in ("file", "submit"):
                self.current.setdefault(attrs["name"], attrs.get("value") or "")

    def handle_endtag(self, tag):
        if tag == "form":
            self.current = None


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """One project with data, its owner and raters; every page's POST fields, found on the pages."""
    from annotations.campaigns import campaign_create
    from annotations.invites import invite_create
    from tests.annotations_helpers import CONDITIONS, RATERS, add_raters, finished_run
    with django_db_blocker.unblock():
        project = Project.objects.create(slug=SLUG, name="Matrix")
        owner = get_user_model().objects.create_user("matrix-owner", password="pw-for-tests-only")
        Membership.objects.create(project=project, user=owner, role=Role.OWNER)
        analyst = get_user_model().objects.create_user("matrix-analyst", password="pw-for-tests-only")
        member = Membership.objects.create(project=project, user=analyst, role=Role.ANALYST)
        run = finished_run(project, people=3)
        raters = add_raters(project, [f"matrix-{name}" for name in RATERS[:2]])
        campaign = campaign_create(run=run, name="m", conditions=CONDITIONS, raters=[u.username for u in raters],
                                   user=owner, seed=1)
        draft = Protocol.objects.create(project=project, name="draft", cohort=run.protocol.cohort,
                                        conditions=list(run.protocol.conditions), generator=run.protocol.generator,
                                        judge=run.protocol.judge)
        task = CohortTask.objects.filter(cohort=run.protocol.cohort).order_by("position").first().task
        invite = invite_create(campaign=campaign, by=owner)  # the public accept page and the revoke button
        world = {"cohort": run.protocol.cohort_id, "protocol": draft.pk, "run": run.pk, "run_pk": run.pk,
                 "campaign": campaign.pk, "member_pk": member.pk, "task_pk": task.pk,
                 "session_id": task.session.external_id, "job_id": "no-such-job", "fmt": "csv", "respondent": 1,
                 "nothing": 1, "owner": owner, "rater": raters[0], "token": invite.token,
                 "invite_pk": invite.invite.pk, "run_id": run.pk, "campaign_id": campaign.pk,
                 "api_token": token_create(owner, "matrix")[1],
                 "revocable_token": token_create(owner, "matrix: the revoke button's")[0].pk}
        world["post_fields"] = discovered_forms(world)
        try:
            yield world
        finally:  # empty, as the next test module expects it (a transactional test ends the same way)
            call_command("flush", interactive=False, verbosity=0)


def discovered_forms(world) -> dict[str, dict[str, str]]:
    """url name → the fields of every POST form that sends to it, on every page the owner or a rater opens."""
    found: dict[str, dict[str, str]] = {}
    for who in ("owner", "rater"):
        client = Client()
        client.force_login(world[who])
        for route, _ in ROUTES:
            path = path_for(route, world)
            response = client.get(path)
            if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
                continue
            parser = Forms(path)
            parser.feed(response.content.decode())
            for action, fields in parser.forms.items():
                try:
                    name = resolve(action).url_name
                except Resolver404:
                    continue
                for field, value in fields.items():
                    found.setdefault(name, {}).setdefault(field, value)
    return found


def bad_query(name: str, kind: str) -> str:
    return f"{quote(name)}={SURROGATE if kind == 'surrogate' else quote(NUL if kind == 'nul' else HUGE)}"


def bad_form(fields: dict, name: str, kind: str) -> str:
    others = urlencode({k: v for k, v in fields.items() if k != name})
    return "&".join(filter(None, [others, bad_query(name, kind)]))


def answer(client, method: str, path: str, *, query: str = "", body: str = "") -> str:
    """'' when the page answered 400 or normally; else what went wrong."""
    try:
        if method == "get":
            response = client.get(path + "?" + query)
        else:
            response = client.generic("POST", path + ("?" + query if query else ""), body,
                                      content_type="application/x-www-form-urlencoded")
    except Exception as exc:  # the test client re-raises a view's exception: that was a 500
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    return "" if response.status_code < 500 else f"HTTP {response.status_code}"


@pytest.mark.parametrize("route,name", ROUTES, ids=[n for _, n in ROUTES])
def test_no_parameter_of_any_page_reaches_the_database_unusable(client, world, route, name, request):
    client.force_login(world["rater"] if name.startswith("rate_") else world["owner"])
    if route.startswith(API_PREFIX):
        client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {world['api_token']}"
        override = override_settings(OWNWORDS_API_RATE_PER_MINUTE=10**9)
        override.enable()
        request.addfinalizer(override.disable)
    path = path_for(route, world)
    # Every answer carries the Content-Security-Policy, whatever its status.
    assert "script-src 'self'" in client.get(path)["Content-Security-Policy"]
    problems = []
    fields = world["post_fields"].get(name, {})
    for kind in ("nul", "surrogate", "huge"):
        # Each parameter alone where a refusal of one would hide the others (a NUL anywhere, a page
        # or an id); the other parameters all at once, which the views read together anyway (fast).
        alone = GET_PARAMETERS if kind == "nul" else [p for p in GET_PARAMETERS if p in INTEGER_PARAMETERS]
        together = [p for p in GET_PARAMETERS if p not in alone]
        for query in [bad_query(p, kind) for p in alone] + ["&".join(bad_query(p, kind) for p in together)]:
            if problem := answer(client, "get", path, query=query):
                problems.append(f"GET {query}: {problem}")
        # A form field alone (the rest of the form as the page filled it, so a form otherwise valid
        # takes the value on); the surrogate, which arrives as U+FFFD, in every field at once.
        bodies = ([(", ".join(fields), "&".join(bad_query(p, kind) for p in fields))] if kind == "surrogate"
                  else [(p, bad_form(fields, p, kind)) for p in fields])
        for parameter, body in bodies if fields else []:
            if problem := answer(client, "post", path, body=body):
                problems.append(f"POST {parameter}={kind}: {problem}")
    assert not problems, "\n".join(problems)


def test_a_nul_in_any_key_or_value_is_a_clear_400(client, world):
    client.force_login(world["owner"])
    for query in ("q=a%00b", "a%00b=1", "page=" + HUGE, "run=" + HUGE, "run=abc"):
        response = client.get(f"/p/{SLUG}/search/?{query}")
        assert response.status_code == 400, query
        assert "Nothing was changed" in response.content.decode()
    response = client.post(f"/p/{SLUG}/ratings/{world['campaign']}/gold/", {"number": "1\x00", "grade": "1"})
    assert response.status_code == 400
    response = client.get(f"/p/{SLUG}/runs/{HUGE}/")
    assert response.status_code == 400


def test_a_nul_in_a_form_changes_nothing(client, world):
    client.force_login(world["owner"])
    before = (Project.objects.count(), Membership.objects.count())
    for url, data in (("/projects/new/", {"name": "Nul\x00", "slug": "nul"}),
                      (f"/p/{SLUG}/members/add/", {"username": "matrix-rater-a\x00", "role": "viewer"}),
                      (f"/p/{SLUG}/cohorts/draw/", {"name": "c\x00", "size": "1", "seed": "1"})):
        response = client.post(url, data)
        assert response.status_code == 400 and "NUL character" in response.content.decode(), url
    assert (Project.objects.count(), Membership.objects.count()) == before


def test_the_parameter_list_holds_every_name_a_view_reads():
    read = set()
    for folder in ("experiments", "annotations", "ownwords_site"):
        for path in (REPO / folder).rglob("*.py"):
            read |= set(re.findall(r'GET\.(?:get|getlist)\("(\w+)"', path.read_text()))
    query = (REPO / "experiments" / "analysis" / "explorer_query.py").read_text()
    read |= set(re.findall(r'\bget(?:_list)?\("(\w+)"', query))
    assert read <= set(GET_PARAMETERS), read - set(GET_PARAMETERS)
    # The forms were found: the matrix sends to the pages' POST fields, not to nothing.
    assert len(ROUTES) > 60
