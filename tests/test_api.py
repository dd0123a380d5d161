"""The read-only JSON API (/api/v1/, experiments/web/api): tokens, the role matrix over every
endpoint, audit of text reads, cursor pages, the rate limit, the schema, hostile cursors, and
README's notebook snippet run against a live server."""
from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.urls import URLResolver, get_resolver

from experiments.analysis.dashboard import dashboard_cached, dashboard_refresh
from experiments.analysis.exports import scores_package_rows
from experiments.core.conditions import FINAL
from experiments.data.api_tokens import token_create, token_revoke, token_sha256
from experiments.models import ApiToken, AuditEntry, Membership, Prediction, Project, Role, Session, Turn
from experiments.web.api import auth as api_auth
from tests.test_browser_session import browser  # noqa: F401 - the shared Chromium fixture

REPO = Path(__file__).resolve().parent.parent
TEXT = "keeps bees"  # in every participant answer of the finished run (tests/annotations_helpers.py)


def api_get(client, path, token, **params):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.get("/api/v1" + path, params, **headers)


@pytest.fixture
def world(cast, project):
    from annotations.campaigns import campaign_create
    from tests.annotations_helpers import CONDITIONS, add_raters, finished_run
    run = finished_run(project, people=3)
    if dashboard_cached(run) is None:
        dashboard_refresh(run)
    add_raters(project, ["rater-a", "rater-b"])
    campaign = campaign_create(run=run, name="first", conditions=CONDITIONS, raters=["rater-a", "rater-b"],
                               user=cast["owner"], seed=11)
    session = Session.objects.filter(project=project).order_by("pk").first()
    tokens = {who: token_create(user, f"{who} notebook")[1] for who, user in cast.items()}
    revoked_row, tokens["revoked"] = token_create(cast["owner"], "old")
    token_revoke(cast["owner"], revoked_row.pk)
    tokens["none"] = None
    return {"run": run, "campaign": campaign, "session": session, "tokens": tokens, "users": cast}


def endpoints(world) -> dict[str, str]:
    """Every endpoint of the API (path → 'numbers' or 'text'), filled in from the world."""
    run, slug = world["run"].pk, "alpha"
    return {
        "/projects": "list",
        f"/projects/{slug}/runs": "numbers",
        f"/projects/{slug}/runs/{run}/conditions": "numbers",
        f"/projects/{slug}/runs/{run}/export": "numbers",
        f"/projects/{slug}/runs/{run}/grades": "numbers",
        f"/projects/{slug}/runs/{run}/contrasts": "numbers",
        f"/projects/{slug}/campaigns": "numbers",
        f"/projects/{slug}/campaigns/{world['campaign'].pk}/results": "numbers",
        f"/projects/{slug}/runs/{run}/predictions": "text",
        f"/projects/{slug}/sessions": "text",
        f"/projects/{slug}/sessions/{world['session'].external_id}/turns": "text",
    }


EXPECTED = {  # who → {kind of endpoint → status}
    "owner": {"list": 200, "numbers": 200, "text": 200},
    "analyst": {"list": 200, "numbers": 200, "text": 200},
    "viewer": {"list": 200, "numbers": 200, "text": 403},
    "rater": {"list": 403, "numbers": 403, "text": 403},
    "outsider": {"list": 200, "numbers": 404, "text": 404},
    "revoked": {"list": 401, "numbers": 401, "text": 401},
    "none": {"list": 401, "numbers": 401, "text": 401},
}


def test_the_role_matrix_over_every_endpoint(client, world):
    found, wanted = {}, {}
    for who, token in world["tokens"].items():
        for path, kind in endpoints(world).items():
            response = api_get(client, path, token)
            found[(who, path)], wanted[(who, path)] = response.status_code, EXPECTED[who][kind]
            assert response["Content-Type"].startswith("application/json"), (who, path)
            if response.status_code != 200:
                assert response.json()["detail"], (who, path)  # a message says why
    assert found == wanted


def test_the_projects_list_holds_only_the_users_readable_projects(client, world):
    owner = api_get(client, "/projects", world["tokens"]["owner"]).json()
    assert [(p["slug"], p["role"]) for p in owner["items"]] == [("alpha", "owner")]
    outsider = api_get(client, "/projects", world["tokens"]["outsider"]).json()
    assert [p["slug"] for p in outsider["items"]] == ["other"]
    # a member of two projects: each once, with its own role; a rater role elsewhere adds nothing
    Membership.objects.create(project=Project.objects.get(slug="alpha"), user=world["users"]["outsider"],
                              role=Role.VIEWER)
    third = Project.objects.create(slug="third", name="Third")
    Membership.objects.create(project=third, user=world["users"]["outsider"], role=Role.RATER)
    outsider = api_get(client, "/projects", world["tokens"]["outsider"]).json()
    assert sorted((p["slug"], p["role"]) for p in outsider["items"]) == [("alpha", "viewer"), ("other", "owner")]


def test_viewers_never_receive_participant_text(client, world):
    owner_body = api_get(client, f"/projects/alpha/runs/{world['run'].pk}/predictions", world["tokens"]["owner"])
    assert TEXT in owner_body.content.decode()  # the check below could find it
    for path in endpoints(world):
        response = api_get(client, path, world["tokens"]["viewer"])
        assert TEXT not in response.content.decode(), path
        assert "Tell me about" not in response.content.decode(), path


def test_a_session_cookie_opens_nothing(client, world):
    client.force_login(world["users"]["owner"])
    response = client.get("/api/v1/projects")
    assert response.status_code == 401 and "token" in response.json()["detail"]
    # A session user does not override the token's user either: the viewer's token stays a viewer's.
    response = api_get(client, f"/projects/alpha/runs/{world['run'].pk}/predictions", world["tokens"]["viewer"])
    assert response.status_code == 403


def test_a_run_or_session_of_another_project_is_not_found(client, world):
    other = Project.objects.get(slug="other")
    Membership.objects.create(project=other, user=world["users"]["owner"], role=Role.OWNER)
    token = world["tokens"]["owner"]
    assert api_get(client, f"/projects/other/runs/{world['run'].pk}/export", token).status_code == 404
    assert api_get(client, f"/projects/other/sessions/{world['session'].external_id}/turns", token).status_code == 404
    assert api_get(client, "/projects/alpha/runs/999999999/grades", token).status_code == 404
    assert api_get(client, "/projects/nowhere/runs", token).status_code == 404


def test_revoked_tokens_answer_401_and_only_the_hash_is_stored(client, world):
    token = world["tokens"]["analyst"]
    row = ApiToken.objects.get(key_sha256=token_sha256(token))
    assert token not in {row.key_sha256, row.name} and len(row.key_sha256) == 64
    assert api_get(client, "/projects", token).status_code == 200
    row.refresh_from_db()
    assert row.last_used_at is not None
    assert token_revoke(world["users"]["analyst"], row.pk)
    response = api_get(client, "/projects", token)
    assert response.status_code == 401 and response.json()["detail"] == api_auth.BAD_TOKEN
    assert api_get(client, "/projects", token[:-1] + "x").status_code == 401
    assert api_get(client, "/projects", None).json()["detail"] == api_auth.MISSING_TOKEN


def test_text_reads_are_audited_like_the_pages(client, world):
    run, session = world["run"], world["session"]
    AuditEntry.objects.all().delete()
    api_get(client, f"/projects/alpha/runs/{run.pk}/predictions", world["tokens"]["analyst"], limit=5)
    api_get(client, f"/projects/alpha/sessions/{session.external_id}/turns", world["tokens"]["owner"])
    api_get(client, f"/projects/alpha/runs/{run.pk}/export", world["tokens"]["viewer"])
    api_get(client, f"/projects/alpha/runs/{run.pk}/predictions", world["tokens"]["viewer"])  # 403: none
    entries = list(AuditEntry.objects.order_by("pk").values_list("username", "kind", "target"))
    assert entries == [
        ("analyst-user", "task", f"task list of run {run.pk}, API page after answer 0 (5 answers)"),
        ("owner-user", "session", f"session {session.external_id}"),
        ("viewer-user", "export", f"run {run.pk}: task-level scores (API)"),
    ]
    assert AuditEntry.objects.get(kind="session").path.startswith("/api/v1/projects/alpha/sessions/")


def test_the_export_sends_the_csv_numbers_and_the_contrasts_the_dashboard(client, world):
    run = world["run"]
    _, rows = scores_package_rows(run)
    body = api_get(client, f"/projects/alpha/runs/{run.pk}/export", world["tokens"]["viewer"], limit=5000).json()
    assert body["next_cursor"] is None
    assert [{k: v for k, v in r.items() if k != "row"} for r in body["items"]] == [
        {k: (None if v == "" else v) for k, v in r.items()} for r in rows]
    contrasts = api_get(client, f"/projects/alpha/runs/{run.pk}/contrasts", world["tokens"]["viewer"]).json()
    payload = dashboard_cached(run).payload["contrasts"]
    assert [{k: v for k, v in c.items() if k != "row"} for c in contrasts["items"]] == payload
    grades = api_get(client, f"/projects/alpha/runs/{run.pk}/grades", world["tokens"]["viewer"]).json()["items"]
    final = Prediction.objects.filter(run=run, label=FINAL)
    assert sorted((g["task_id"], g["condition"], g["grade"]) for g in grades) == sorted(
        final.values_list("task_id", "condition", "score"))
    assert all(g["score"] == (None if g["grade"] is None else g["grade"] / 3) for g in grades)


def test_pages_miss_no_row_and_repeat_none_with_inserts_between_them(client, world):
    run, token = world["run"], world["tokens"]["owner"]
    path = f"/projects/alpha/runs/{run.pk}/predictions"
    seen, cursor, added, pages = [], None, [], 0
    template = Prediction.objects.filter(run=run).order_by("pk").first()
    while True:
        body = api_get(client, path, token, limit=4, **({"cursor": cursor} if cursor else {})).json()
        assert len(body["items"]) <= 4
        seen += [p["id"] for p in body["items"]]
        pages += 1
        # A new answer lands between pages (as a running run writes them).
        added.append(Prediction.objects.create(run=run, task_id=template.task_id, condition=template.condition,
                                               label=f"x{pages}", status="ok", text="new").pk)
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert pages > 3
    assert len(seen) == len(set(seen))
    everything = set(Prediction.objects.filter(run=run).values_list("pk", flat=True))
    assert set(seen) == everything - {added[-1]}  # all but the one added after the last page
    # the numeric export (a computed list) pages by position, each page the same rows as the whole list
    from experiments.analysis.export_pages import scores_package_page
    whole = scores_package_rows(run)[1]
    for start, stop in ((0, 1), (0, 2), (1, 5), (2, 9), (7, 8), (len(whole) - 3, len(whole)), (5, len(whole) + 9)):
        assert scores_package_page(run, start, stop)[1] == whole[start:stop], (start, stop)
    rows, cursor = [], None
    while True:
        body = api_get(client, f"/projects/alpha/runs/{run.pk}/export", token, limit=2,
                       **({"cursor": cursor} if cursor else {})).json()
        rows += body["items"]
        if not (cursor := body["next_cursor"]):
            break
    assert [r["row"] for r in rows] == list(range(1, len(scores_package_rows(run)[1]) + 1))


def test_a_runs_pages_between_another_runs_answers_are_its_answers_as_stored(client, world):
    """The pages read their own index range (`web.api.text_sql`): with another run's answers before,
    between and after this run's, every answer of this run comes once, by id, each field as stored."""
    from django.db.models import F
    from experiments.models import Run
    run, token = world["run"], world["tokens"]["analyst"]
    other = Run.objects.create(protocol=run.protocol)
    template = Prediction.objects.filter(run=run).order_by("pk").first()
    for i in range(7):  # the other run's, then this run's, alternating
        for owner in (other, run):
            Prediction.objects.create(run=owner, task_id=template.task_id, condition=template.condition,
                                      label=f"y{i}", status="ok", text=f"answer {i} of run {owner.pk}", score=i % 4)
    seen, cursor = [], None
    while True:
        body = api_get(client, f"/projects/alpha/runs/{run.pk}/predictions", token, limit=3,
                       **({"cursor": cursor} if cursor else {})).json()
        seen += body["items"]
        if not (cursor := body["next_cursor"]):
            break
    stored = list(Prediction.objects.filter(run=run).order_by("pk").values(
        "id", "task_id", "condition", "label", "status", "text", "chosen_label", "copied_label", "evidence_chars",
        "budget", grade=F("score")))
    assert seen == stored and len(stored) > 7


def test_the_servers_start_freezes_what_it_made_out_of_the_collectors_walk():
    """ownwords_site/wsgi.py (runserver and production servers load it) imports every view, then
    gc.freeze(): a full collection no longer walks the start's ~190,000 objects inside a request
    (127-174 ms of CPU each, several a pass of benchmarks/api_pages.py, before)."""
    import os
    import subprocess
    import sys
    probe = ("import gc, sys; import ownwords_site.wsgi; "
             "print(gc.get_freeze_count(), 'experiments.web.api.text' in sys.modules, len(gc.get_objects()))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "SECRET_KEY": "test-only",
                              "DJANGO_SETTINGS_MODULE": "ownwords_site.settings"})
    frozen, views_loaded, walked = out.stdout.split()
    assert int(frozen) > 50_000 and views_loaded == "True" and int(walked) < int(frozen) / 10, out.stderr[-500:]


def test_turns_come_in_the_sessions_order(client, world):
    session = world["session"]
    body = api_get(client, f"/projects/alpha/sessions/{session.external_id}/turns", world["tokens"]["owner"],
                   limit=5000).json()
    assert [t["index"] for t in body["items"]] == list(Turn.objects.filter(session=session)
                                                        .order_by("index").values_list("index", flat=True))


def b64(text: bytes) -> str:
    return base64.urlsafe_b64encode(text).decode().rstrip("=")


@pytest.mark.parametrize("params", [
    {"cursor": "!!!"}, {"cursor": "a" * 65}, {"cursor": "x"}, {"cursor": b64(b"-1")}, {"cursor": b64(b"1e5")},
    {"cursor": b64(b"9" * 30)}, {"cursor": b64(b"9223372036854775808")}, {"cursor": b64("١٢".encode())},
    {"cursor": b64(b"\xff\xfe")}, {"cursor": b64(b"12 ")}, {"cursor": "MQ=="}, {"cursor": "a\x00"},
    {"limit": "0"}, {"limit": "5001"}, {"limit": "abc"}, {"limit": "1" * 30}, {"limit": "-3"},
])
def test_hostile_cursor_and_limit_values_are_a_400(client, world, params):
    run = world["run"].pk
    for path in (f"/projects/alpha/runs/{run}/predictions", f"/projects/alpha/runs/{run}/export"):
        response = api_get(client, path, world["tokens"]["owner"], **params)
        assert response.status_code == 400, (path, params, response.content[:200])


def test_a_cursor_past_the_end_is_an_empty_last_page(client, world):
    body = api_get(client, f"/projects/alpha/runs/{world['run'].pk}/export", world["tokens"]["owner"],
                   cursor=b64(b"9223372036854775807")).json()
    assert body == {"items": [], "next_cursor": None, "limit": 500}


@override_settings(OWNWORDS_API_RATE_PER_MINUTE=3)
def test_the_rate_limit_is_per_token_with_retry_after(client, world, monkeypatch):
    monkeypatch.setattr(api_auth, "clock", lambda: 1_899_999_960.0 + 20)  # 20 s into a minute
    owner, analyst = world["tokens"]["owner"], world["tokens"]["analyst"]
    assert [api_get(client, "/projects", owner).status_code for _ in range(3)] == [200, 200, 200]
    refused = api_get(client, "/projects", owner)
    assert refused.status_code == 429 and refused["Retry-After"] == "40" and "rate limit" in refused.json()["detail"]
    assert api_get(client, "/projects", analyst).status_code == 200  # another token has its own count
    monkeypatch.setattr(api_auth, "clock", lambda: 1_899_999_960.0 + 61)  # the next minute
    assert api_get(client, "/projects", owner).status_code == 200


def api_routes() -> set[str]:
    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            else:
                yield prefix + str(p.pattern)
    return {r for r in walk(get_resolver().url_patterns) if r.startswith("api/v1/")}


def test_the_openapi_schema_lists_every_endpoint_and_the_docs_use_no_other_host(client, world):
    assert client.get("/api/v1/openapi.json").status_code == 302  # signed-in users only, like every page
    # only the roles that may hold a token read the schema: it names judges and grades, never for raters
    for who in ("rater", "viewer"):
        client.force_login(world["users"][who])
        assert client.get("/api/v1/openapi.json").status_code == 403, who
        assert client.get("/api/v1/docs").status_code == 403, who
    client.force_login(world["users"]["analyst"])
    schema = client.get("/api/v1/openapi.json").json()
    served = {re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", "/" + r) for r in api_routes()} - {
        "/api/v1/openapi.json", "/api/v1/docs", "/api/v1/"}  # the last: ninja's root, a 404
    assert len(served) == 11 and set(schema["paths"]) == served
    assert all(list(ops) == ["get"] for ops in schema["paths"].values())  # read-only
    docs = client.get("/api/v1/docs")
    html = docs.content.decode()
    assert docs.status_code == 200 and "/static/ninja/swagger-ui-bundle.js" in html
    assert not re.search(r"""(src|href)=["']https?://""", html)


def test_the_token_page_creates_shows_once_and_revokes(client, world):
    owner = world["users"]["owner"]
    client.force_login(owner)
    response = client.post("/account/tokens/", {"name": "laptop"})
    token = re.search(r'id="token-value">(ow_[\w-]+)<', response.content.decode()).group(1)
    assert response["Cache-Control"] == "no-store"
    row = ApiToken.objects.get(user=owner, name="laptop")
    assert row.key_sha256 == token_sha256(token)
    assert token not in client.get("/account/tokens/").content.decode()  # shown once
    assert api_get(Client(), "/projects", token).status_code == 200
    client.post(f"/account/tokens/{row.pk}/revoke/")
    assert api_get(Client(), "/projects", token).status_code == 401
    # another user's token is not theirs to revoke
    other_row = ApiToken.objects.get(key_sha256=token_sha256(world["tokens"]["analyst"]))
    client.post(f"/account/tokens/{other_row.pk}/revoke/")
    assert ApiToken.objects.get(pk=other_row.pk).revoked_at is None
    # a viewer (of every project they are in) may not create one
    viewer = Client()
    viewer.force_login(world["users"]["viewer"])
    assert viewer.post("/account/tokens/", {"name": "x"}).status_code == 403
    assert "Only owners and analysts" in viewer.get("/account/tokens/").content.decode()
    assert Client().get("/account/tokens/").status_code == 302  # login required
    assert 'href="/account/tokens/"' in client.get("/").content.decode()  # linked from the projects list


def readme_snippet() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Notebooks: the read-only JSON API\n", 1)[1]
    return section.split("```python\n", 1)[1].split("\n```", 1)[0]


@pytest.mark.django_db(transaction=True)
def test_the_readme_notebook_snippet_runs_against_a_live_server(live_server, monkeypatch, capsys):
    from tests.annotations_helpers import finished_run
    project = Project.objects.create(slug="notebook", name="Notebook")
    user = get_user_model().objects.create_user("nb-analyst", password="pw-for-tests-only")
    Membership.objects.create(project=project, user=user, role=Role.ANALYST)
    run = finished_run(project, people=4)
    if dashboard_cached(run) is None:
        dashboard_refresh(run)
    monkeypatch.setenv("OWNWORDS_API", live_server.url + "/api/v1")
    monkeypatch.setenv("OWNWORDS_TOKEN", token_create(user, "nb")[1])
    monkeypatch.setenv("OWNWORDS_PROJECT", project.slug)
    monkeypatch.setenv("OWNWORDS_RUN", str(run.pk))
    exec(compile(readme_snippet(), "README.md (notebook snippet)", "exec"), {"__name__": "readme_snippet"})
    printed = capsys.readouterr().out
    contrast = dashboard_cached(run).payload["contrasts"][0]
    assert contrast["name"] in printed and f"{contrast['estimate']:+.4f}" in printed



@pytest.fixture
def csp_owner(transactional_db):
    """An owner (the schema is for the roles that may hold a token), made before Playwright starts its
    loop: an ORM call while it runs opens a connection in another async context, never closed, and
    PostgreSQL then cannot drop the test database."""
    from tests.test_browser_csp import PASSWORD
    owner = get_user_model().objects.create_user("cspowner", password=PASSWORD)
    Membership.objects.create(project=Project.objects.create(slug="csp-api", name="CSP"), user=owner, role=Role.OWNER)
    return owner.username


@pytest.mark.slow
def test_the_docs_page_draws_under_the_policy_without_a_violation(csp_owner, live_server, browser):  # noqa: F811
    """Swagger UI from ninja's own static files: it draws the API's title under the site's CSP, no violation."""
    from tests.test_browser_csp import LISTEN, login
    context = browser.new_context()
    context.add_init_script(LISTEN)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    login(page, live_server.url, csp_owner)
    page.goto(live_server.url + "/api/v1/docs")
    page.locator(".swagger-ui .info .title", has_text="OwnWords Lab API").wait_for()
    page.locator(".opblock-summary-path", has_text="/projects/{slug}/runs/{run_id}/export").first.wait_for()
    violations = page.evaluate("window.__csp")
    context.close()
    assert violations == [] and errors == []
