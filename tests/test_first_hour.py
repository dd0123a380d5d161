"""A researcher's first hour: a superuser sees every project (as an analyst, audited), a project a
command creates names its owner, and pages go out compressed."""
import gzip
import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import reverse

from experiments.access import SUPERUSER_ROLE
from experiments.data.audit_log import Kind
from experiments.models import AuditEntry, Membership, Project, Role
from tests.test_import_sessions import good_session


@pytest.fixture
def superuser(db):
    return get_user_model().objects.create_superuser(username="root-admin", password="pw-for-tests-only")


def test_a_superuser_sees_every_project_as_an_analyst_and_their_reads_are_audited(client, imported, superuser):
    Project.objects.create(slug="lonely", name="No members at all")
    client.force_login(superuser)
    listing = client.get(reverse("project_list")).content.decode()
    assert "alpha" in listing and "lonely" in listing and "superuser, not a member" in listing
    assert SUPERUSER_ROLE == Role.ANALYST
    assert client.get(reverse("project_detail", args=["lonely"])).status_code == 200
    session = client.get(reverse("session_detail", args=[imported.slug, "sess-a"]))
    assert session.status_code == 200
    entry = AuditEntry.objects.get(project=imported, kind=Kind.SESSION)
    assert entry.username == "root-admin"
    # an analyst's reach, not an owner's: no members page, no import, no membership made
    assert client.get(reverse("project_members", args=[imported.slug])).status_code == 403
    assert client.get(reverse("session_import", args=[imported.slug])).status_code == 403
    assert not Membership.objects.filter(user=superuser).exists()
    assert client.get(reverse("project_detail", args=["no-such-project"])).status_code == 404


def test_a_superuser_with_a_membership_has_that_role(client, imported, superuser):
    Membership.objects.create(project=imported, user=superuser, role=Role.VIEWER)
    client.force_login(superuser)
    assert client.get(reverse("session_detail", args=[imported.slug, "sess-a"])).status_code == 403


def test_an_ordinary_user_still_sees_only_their_projects(client, cast):
    Project.objects.create(slug="lonely", name="No members at all")
    client.force_login(cast["viewer"])
    assert "lonely" not in client.get(reverse("project_list")).content.decode()
    assert client.get(reverse("project_detail", args=["lonely"])).status_code == 404


def _jsonl(tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(good_session()) + "\n")
    return path


def test_an_import_that_creates_a_project_makes_its_owner_through_the_members_service(db, tmp_path):
    owner = get_user_model().objects.create_user(username="pi", password="pw-for-tests-only")
    out = StringIO()
    call_command("import_sessions", str(_jsonl(tmp_path)), "--project", "fresh", "--owner", "pi", stdout=out)
    project = Project.objects.get(slug="fresh")
    assert Membership.objects.get(project=project).user == owner
    assert Membership.objects.get(project=project).role == Role.OWNER
    assert AuditEntry.objects.filter(project=project, kind=Kind.MEMBER, target__contains="as its owner").exists()


def test_an_import_without_an_owner_says_who_can_see_the_project(db, tmp_path):
    out = StringIO()
    call_command("import_sessions", str(_jsonl(tmp_path)), "--project", "orphan", stdout=out)
    assert "without an owner" in out.getvalue() and "--owner" in out.getvalue()


def test_an_unknown_owner_imports_nothing_and_creates_no_project(db, tmp_path):
    with pytest.raises(CommandError, match="no account called 'nobody'"):
        call_command("import_sessions", str(_jsonl(tmp_path)), "--project", "never", "--owner", "nobody",
                     stdout=StringIO())
    assert not Project.objects.filter(slug="never").exists()


def test_pages_are_compressed_for_browsers_that_ask(client, cast):
    client.force_login(cast["owner"])
    response = client.get(reverse("project_detail", args=["alpha"]), HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200 and response["Content-Encoding"] == "gzip"
    assert "Alpha study" in gzip.decompress(response.content).decode()


@pytest.mark.parametrize("turn, shown", [
    ("That sounds really rewarding. Thank you. What do you do on a free weekend?", "What do you do on a free weekend?"),
    ("Great. Can you say more? I mean about the studio.", "Can you say more?"),
    ("Tell me about your week", "Tell me about your week"),
    ("I see. And then \u201cwhy did you stay?\u201d Take your time.", "And then \u201cwhy did you stay?\u201d"),
    ("Thanks. " + "very " * 60 + "long question?", "very " * 27 + "very…"),
    ("", ""),
])
def test_the_question_column_shows_the_question_not_the_acknowledgement(turn, shown):
    from experiments.core.question_text import question_sentences
    assert question_sentences(turn) == shown
    assert len(question_sentences(turn)) <= 140


def test_the_project_page_has_no_duplicate_ids(client, cast, imported):
    import re
    client.force_login(cast["owner"])
    page = client.get(reverse("project_detail", args=[imported.slug])).content.decode()
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert ids and len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_a_survey_project_has_its_own_summary_and_next_steps(client, cast, project):
    from tests.survey_helpers import SAMPLE
    call_command("import_survey", str(SAMPLE), "--project", project.slug, "--name", "twin", "--synthetic",
                 "--workers", "0", stdout=StringIO())
    client.force_login(cast["owner"])
    page = client.get(reverse("project_detail", args=[project.slug])).content.decode()
    assert 'id="survey-summary"' in page and 'id="count-respondents">12<' in page
    assert "Import interview sessions" not in page and 'id="paper-protocol-form"' not in page
    assert "Task rule" not in page and 'id="no-sessions"' not in page
    assert "Define a survey protocol" in page and reverse("protocol_create", args=[project.slug]) in page


def test_an_owner_of_a_finished_run_gets_two_links_the_dashboard_and_the_ratings(client, cast, rated_run):
    client.force_login(cast["owner"])
    page = client.get(reverse("project_detail", args=[rated_run.protocol.project.slug])).content.decode()
    line = page.split('id="next-step"', 1)[1].split("</p>", 1)[0]
    assert reverse("run_dashboard", args=["alpha", rated_run.pk]) in line
    assert 'id="next-step-also"' in line and reverse("campaign_create", args=["alpha", rated_run.pk]) in line


def test_every_registered_condition_has_a_distinct_short_name():
    from experiments.core.condition_names import short_name
    from experiments.core.conditions import CONDITIONS
    names = {key: short_name(key) for key in CONDITIONS}
    assert len(set(names.values())) == len(names)
    assert names["memory(concrete,100w)+selection(3)"] == "memory+selection"
    assert names["ownwords(B=|memory(concrete,50w)|)"] == "OwnWords at |memory 50w|"
    assert all(len(n) <= 32 for n in names.values()), {k: n for k, n in names.items() if len(n) > 32}


def test_condition_headers_show_the_short_name_with_the_key_in_a_tooltip():
    from experiments.templatetags.display import condition_header
    html = condition_header("memory(concrete,100w)+one-shot<script>")
    assert 'title="memory(concrete,100w)+one-shot&lt;script&gt;"' in html and "<script>" not in html
    assert condition_header("memory(trait,100w)+fusion(3)") == (
        '<abbr title="memory(trait,100w)+fusion(3)">trait memory+<wbr>fusion</abbr>')


def test_the_gold_form_lists_the_items_to_choose_from(client, cast, campaign):
    client.force_login(cast["owner"])
    page = client.get(reverse("campaign_detail", args=[campaign.project.slug, campaign.pk])).content.decode()
    assert 'list="gold-item-choices"' in page
    options = page.split('<datalist id="gold-item-choices">', 1)[1].split("</datalist>", 1)[0]
    first = campaign.items.order_by("number").select_related("prediction").first()
    assert options.count("<option") == campaign.items.count()
    assert f'<option value="{first.number}">{first.number}: {first.prediction.text[:20]}' in options
    from experiments.models import AuditEntry
    assert AuditEntry.objects.filter(kind=Kind.TASK, target=f"answer previews of campaign {campaign.pk} (gold choices)",
                                     username=cast["owner"].username).count() == 1
