"""Rating guidelines: sanitised Markdown, versions never edited, each rating records the version shown."""
import pytest
from django.urls import reverse

from annotations.core.guidelines_markup import MAX_GUIDELINES_CHARS, guidelines_problem, render_guidelines
from annotations.guidelines import GuidelinesError, guidelines_history, guidelines_publish
from annotations.models import Guidelines, HumanGrade
from annotations.rating import RatingError, rater_item, rating_record
from annotations.rating_exports import export_rows
from tests.annotations_helpers import RATERS

EXAMPLE = """# Grading

Grade **content**, not wording.

| answer | grade |
|---|---|
| names the hive | 3 |

> A worked example: "bees" for "I keep bees" is a 3.
"""


@pytest.mark.parametrize("hostile, gone", [
    ("<script>alert(1)</script>hi", "<script"),
    ('<img src="https://elsewhere.example/x.png">', "<img"),
    ("[click](javascript:alert(1))", "javascript:"),
    ('<a href="https://x.example" onclick="steal()">x</a>', "onclick"),
    ('<div style="position:fixed">cover</div>', "style="),
    ("![pixel](https://tracker.example/p.gif)", "tracker.example"),
    ('<iframe src="https://x.example"></iframe>', "<iframe"),
])
def test_hostile_markup_is_removed(hostile, gone):
    assert gone not in render_guidelines(hostile).lower()


def test_markdown_renders_headings_below_the_page_title_tables_quotes_and_safe_links():
    html = render_guidelines(EXAMPLE + "\n[the study](https://example.org/study)")
    assert "<h2>Grading</h2>" in html and "<h1" not in html
    assert "<strong>content</strong>" in html and "<table>" in html and "<blockquote>" in html
    assert '<a href="https://example.org/study" rel="noopener noreferrer nofollow">the study</a>' in html


@pytest.mark.parametrize("text, message", [
    ("   ", "empty"), ("x" * (MAX_GUIDELINES_CHARS + 1), "at most"), ("nul\x00here", "NUL"),
])
def test_unpublishable_text_is_refused(text, message):
    assert message in guidelines_problem(text)


def test_versions_are_added_never_edited_and_ratings_record_the_version_shown(campaign, cast):
    user = campaign.raters.get(user__username=RATERS[0]).user
    first = rater_item(campaign, user)["item"]["assignment"]
    rating_record(campaign=campaign, user=user, assignment_id=first, grade=2)
    assert HumanGrade.objects.get(assignment_id=first).guidelines_version is None   # nothing published yet
    v1 = guidelines_publish(campaign=campaign, text=EXAMPLE, user=cast["owner"])
    with pytest.raises(GuidelinesError, match="as it stands"):
        guidelines_publish(campaign=campaign, text=EXAMPLE + "\n", user=cast["owner"])
    v2 = guidelines_publish(campaign=campaign, text=EXAMPLE + "\nAlso: flag cut-off answers.", user=cast["owner"])
    assert (v1.version, v2.version) == (1, 2)
    assert Guidelines.objects.get(pk=v1.pk).text == EXAMPLE.strip()               # version 1 unchanged
    # the page showed version 1 (published before the rater loaded it): the rating says so
    second = rater_item(campaign, user)["item"]["assignment"]
    rating_record(campaign=campaign, user=user, assignment_id=second, grade=1, guidelines_version=1)
    third = rater_item(campaign, user)["item"]["assignment"]
    rating_record(campaign=campaign, user=user, assignment_id=third, grade=1)     # no version sent: the latest
    assert HumanGrade.objects.get(assignment_id=second).guidelines_version == 1
    assert HumanGrade.objects.get(assignment_id=third).guidelines_version == 2
    fourth = rater_item(campaign, user)["item"]["assignment"]
    with pytest.raises(RatingError, match="not this campaign's"):
        rating_record(campaign=campaign, user=user, assignment_id=fourth, grade=1, guidelines_version=7)
    assert not HumanGrade.objects.filter(assignment_id=fourth).exists()
    assert {v["version"]: v["ratings"] for v in guidelines_history(campaign)} == {2: 1, 1: 1}
    assert sorted(r["guidelines_version"] or 0 for r in export_rows(campaign)) == [0, 1, 2]


def test_the_rater_page_shows_the_guidelines_and_posts_their_version(campaign, cast, client):
    guidelines_publish(campaign=campaign, text=EXAMPLE + "\n<script>alert(1)</script>", user=cast["owner"])
    user = campaign.raters.get(user__username=RATERS[0]).user
    client.force_login(user)
    slug = campaign.project.slug
    page = client.get(reverse("rate_page", args=[slug, campaign.pk])).content.decode()
    assert "Guidelines" in page and "<strong>content</strong>" in page and "<script>alert" not in page
    assert 'name="guidelines_version" id="rate-guidelines-version" value="1"' in page
    item = rater_item(campaign, user)["item"]["assignment"]
    response = client.post(reverse("rate_submit", args=[slug, campaign.pk]),
                           {"assignment": item, "grade": "3", "guidelines_version": "1"})
    assert response.status_code == 302
    assert HumanGrade.objects.get(assignment_id=item).guidelines_version == 1


@pytest.mark.parametrize("who, get_status, post_status", [
    ("owner", 200, 302), ("analyst", 200, 403), ("viewer", 200, 403), ("outsider", 404, 404),
])
def test_owners_publish_others_read(campaign, cast, client, who, get_status, post_status):
    client.force_login(cast[who])
    url = reverse("campaign_guidelines", args=[campaign.project.slug, campaign.pk])
    assert client.get(url).status_code == get_status
    assert client.post(url, {"text": "Be kind to the answer."}).status_code == post_status
    assert Guidelines.objects.filter(campaign=campaign).count() == (1 if who == "owner" else 0)


def test_a_rater_of_the_campaign_reads_them_and_cannot_publish(campaign, client):
    rater = campaign.raters.get(user__username=RATERS[0]).user
    client.force_login(rater)
    url = reverse("campaign_guidelines", args=[campaign.project.slug, campaign.pk])
    assert client.get(url).status_code == 200
    assert client.post(url, {"text": "I decide now."}).status_code == 403
    assert not Guidelines.objects.exists()


def test_a_closed_campaign_keeps_its_guidelines(campaign, cast):
    from annotations.campaigns import campaign_close
    campaign_close(campaign=campaign)
    with pytest.raises(GuidelinesError, match="closed"):
        guidelines_publish(campaign=campaign, text=EXAMPLE, user=cast["owner"])
