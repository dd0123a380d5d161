"""Rough edges a reviewer saw on screenshots, each held by a check: condition keys that
wrap between their parts, heatmap axis titles that fit, the protocol form's hint when there is no
cohort, the offline stand-in never quoting a prompt's "(none)" mark, and a refused request logged
as one line."""
import logging

from django.template import Context, Template
from django.urls import reverse

from experiments.analysis.figures import HEATMAP_MARGINS_PX, TITLE_CHAR_PX, transitions
from experiments.core.condition_names import short_name
from experiments.core.conditions import CONDITIONS
from experiments.core.evidence import NO_SCREENER
from experiments.core.llm.offline import FALLBACK_ANSWER, offline_reply
from experiments.models import Membership, Role


def test_condition_keys_wrap_between_their_parts_never_inside_a_word():
    html = Template("{% load display %}{{ key|breakable }}").render(Context({"key": "memory(concrete,100w)+one-shot"}))
    assert html == "memory(<wbr>concrete,<wbr>100w)+<wbr>one-shot"
    hostile = Template("{% load display %}{{ key|breakable }}").render(Context({"key": "<b>(x</b>"}))
    assert hostile == "&lt;b&gt;(<wbr>x&lt;/<wbr>b&gt;"  # escaped first, then only <wbr> added
    css = open("static/css/site.css").read()
    assert "break-all" not in css  # the rule that cut "memory" into "memo" / "ry"


def test_the_transition_heatmap_fills_its_column_with_one_line_axis_titles_that_fit_for_every_condition():
    longest = max(CONDITIONS, key=lambda key: len(short_name(key)))
    for rows in CONDITIONS:
        figure = transitions({"transitions": [[1, 0, 0, 0]] * 4, "transition_axes": {"rows": rows, "columns": longest}})
        layout = figure["layout"]
        y_title, x_title = layout["yaxis"]["title"]["text"], layout["xaxis"]["title"]["text"]
        assert (y_title, x_title) == (f"grade under {short_name(rows)}", f"grade under {short_name(longest)}")
        # one line, and as long as the plot beside it at most (12 px text is about 7 px a character)
        assert "<br>" not in y_title and len(y_title) * TITLE_CHAR_PX <= layout["height"] - HEATMAP_MARGINS_PX
        assert layout["height"] >= 300 and "width" not in layout  # the column's width
        assert f"grade under {rows}: %{{y}}" in figure["data"][0]["hovertemplate"]  # the full key on hover


def test_the_protocol_form_without_a_cohort_says_what_to_do_and_links_to_it(client, imported, cast):
    client.force_login(cast["analyst"])
    body = client.get(reverse("protocol_create", args=[imported.slug])).content.decode()
    assert 'id="no-cohort"' in body and "has no cohort yet" in body
    assert f'href="{reverse("project_detail", args=[imported.slug])}#cohorts"' in body
    assert 'name="cohort"' not in body  # no empty dropdown


def test_the_protocol_form_with_a_cohort_offers_it_and_no_hint(client, imported, cast):
    from experiments.data.sessions import cohort_draw
    cohort_draw(project=imported, name="c1", size=2, seed=1)
    client.force_login(cast["analyst"])
    body = client.get(reverse("protocol_create", args=[imported.slug])).content.decode()
    assert 'name="cohort"' in body and 'id="no-cohort"' not in body and ">c1<" in body


def test_the_offline_stand_in_never_answers_with_the_prompts_mark_for_an_empty_block():
    user = (f"[SCREENER Q&A]\n{NO_SCREENER}\n\n[WHAT IS KNOWN ABOUT THIS PARTICIPANT]\n"
            "Is this only for scientists? I build bridges for a living.\n\n"
            "[QUESTION]\nWhat kept you from trying it there?\n\nAnswer as this participant would.")
    assert offline_reply("You predict answers.", user) == "I build bridges for a living."
    only_empty = f"[SCREENER Q&A]\n{NO_SCREENER}\n\n[QUESTION]\nWhat kept you from trying it there?"
    assert offline_reply("You predict answers.", only_empty) == FALLBACK_ANSWER


def test_a_refused_request_is_logged_as_one_line_and_its_page_is_unchanged(client, project, cast, caplog):
    viewer = Membership.objects.get(project=project, user=cast["viewer"])
    assert viewer.role == Role.VIEWER
    client.force_login(cast["viewer"])
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get(reverse("project_members", args=[project.slug]))
    assert response.status_code == 403
    assert "403" in response.content.decode() or "not allowed" in response.content.decode().lower()
    records = [r for r in caplog.records if r.name == "django.request"]
    assert len(records) == 1
    record = records[0]
    assert record.levelno == logging.WARNING and record.exc_info is None and not record.exc_text
    line = logging.Formatter().format(record)
    assert "\n" not in line and line.startswith("Forbidden (Permission denied): /p/alpha/members/"), line
