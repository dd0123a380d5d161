"""The API's numbers (no participant text): projects, runs, conditions, the numeric export, grades, contrasts.

Owners, analysts and viewers read them (`access.AGGREGATE_READERS`, as on the pages); raters get
403 and non-members 404, from the same helpers the pages use. The export sends the rows the run
page's CSV sends (`exports.scores_package_rows`: the same numbers, blank cells as null), a page at
a time (`analysis.export_pages`), and is audited like that download; the contrasts are the
dashboard's cached payload, as computed.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from django.core.exceptions import PermissionDenied
from django.db.models import F
from django.http import Http404
from ninja import Query, Router, Schema

from experiments.access import AGGREGATE_READERS, membership_for, run_for
from experiments.analysis.dashboard import dashboard_cached
from experiments.analysis.export_pages import scores_package_page, scores_package_size
from experiments.core.conditions import CONDITIONS, FINAL
from experiments.data.audit_log import Kind, audit_record
from experiments.execution.kind_table import kind_rules
from experiments.models import Membership, Prediction, Project, Role, Run
from experiments.web.api.paging import (PageParams, decode_cursor, encode_cursor, list_page, page_response,
                                        page_schema, queryset_page)

router = Router(tags=["numbers"])


class ProjectOut(Schema):
    id: int
    slug: str
    name: str
    role: str
    created_at: datetime


class RunOut(Schema):
    id: int
    protocol_id: int
    protocol: str
    kind: str
    status: str
    phase: str
    conditions: list[str]
    seed: Optional[int] = None
    draws: Optional[int] = None
    created_at: datetime
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None


class ConditionOut(Schema):
    row: int
    key: str
    evidence: Optional[str] = None
    workflow: Optional[str] = None
    candidates: Optional[int] = None
    memory_kind: Optional[str] = None
    memory_words: Optional[int] = None
    with_screener: Optional[bool] = None


class ExportRowOut(Schema):
    row: int
    task: int
    person: int
    session: int
    study: int
    target: int
    condition: str
    status: str
    grade: Optional[int] = None
    score: Optional[float] = None
    answer_words: Optional[int] = None
    answer_chars: Optional[int] = None
    evidence_chars: Optional[int] = None
    budget: Optional[int] = None


class GradeOut(Schema):
    id: int
    task_id: int
    condition: str
    status: str
    grade: Optional[int] = None
    score: Optional[float] = None


def readable_memberships(user):
    """The user's memberships that read numbers; PermissionDenied for an account that is only a rater."""
    memberships = Membership.objects.filter(user=user)
    if not memberships.filter(role__in=AGGREGATE_READERS).exists() and memberships.filter(role=Role.RATER).exists():
        raise PermissionDenied("The rater role cannot use the API")
    return memberships.filter(role__in=AGGREGATE_READERS)


@router.get("/projects", response=page_schema(ProjectOut, "ProjectPage"), url_name="api_projects")
def projects(request, page: Query[PageParams]):
    """The projects the token's user reads (owner, analyst, viewer), by id."""
    roles = readable_memberships(request.user)
    queryset = (Project.objects.filter(memberships__in=roles)
                .annotate(role=F("memberships__role")).values("id", "slug", "name", "role", "created_at"))
    return page_response(queryset_page(queryset, page))


@router.get("/projects/{slug}/runs", response=page_schema(RunOut, "RunPage"), url_name="api_runs")
def runs(request, slug: str, page: Query[PageParams]):
    """The project's runs, by id, with their protocol's conditions, seed and draws."""
    membership = membership_for(request, slug, roles=AGGREGATE_READERS)
    queryset = Run.objects.filter(protocol__project=membership.project).values(
        "id", "protocol_id", "status", "phase", "created_at", "started_at", "finished_at",
        protocol_name=F("protocol__name"), kind=F("protocol__kind"), conditions=F("protocol__conditions"),
        bootstrap=F("protocol__bootstrap"))

    def row(r):
        boot = r.pop("bootstrap") or {}
        return {**r, "protocol": r.pop("protocol_name"), "seed": boot.get("seed"), "draws": boot.get("draws")}
    return page_response(queryset_page(queryset, page, row))


@router.get("/projects/{slug}/runs/{int:run_id}/conditions", response=page_schema(ConditionOut, "ConditionPage"),
            url_name="api_run_conditions")
def conditions(request, slug: str, run_id: int, page: Query[PageParams]):
    """The run's conditions in the protocol's order, with how each builds its evidence and answers."""
    _, run = run_for(request, slug, run_id)
    rows = []
    for key in run.protocol.conditions:
        known = CONDITIONS.get(key)
        rows.append({"key": key, **({} if known is None else {
            "evidence": known.evidence, "workflow": known.workflow, "candidates": known.candidates,
            "memory_kind": known.memory_kind, "memory_words": known.memory_words,
            "with_screener": known.with_screener})})
    return page_response(list_page(rows, page))


def _interview_run(request, slug, run_id):
    membership, run = run_for(request, slug, run_id)
    if kind_rules(run.protocol).dashboard != "run_dashboard":
        raise Http404("A survey run has no task-level export or contrasts here: its numbers are the survey tables")
    return membership, run


@router.get("/projects/{slug}/runs/{int:run_id}/export", response=page_schema(ExportRowOut, "ExportPage"),
            url_name="api_run_export")
def export(request, slug: str, run_id: int, page: Query[PageParams]):
    """The run's numeric package (the run page's CSV): one row per task and condition, remapped labels, no text."""
    membership, run = _interview_run(request, slug, run_id)
    after = decode_cursor(page.cursor)
    total = scores_package_size(run)
    _, rows = scores_package_page(run, after, min(total, after + page.limit))
    audit_record(request, membership.project, Kind.EXPORT, f"run {run.pk}: task-level scores (API)")
    end = after + len(rows)
    return page_response({
        "items": [{"row": after + i + 1, **{k: (None if v == "" else v) for k, v in r.items()}}
                  for i, r in enumerate(rows)],
        "limit": page.limit, "next_cursor": encode_cursor(end) if end < total else None})


@router.get("/projects/{slug}/runs/{int:run_id}/grades", response=page_schema(GradeOut, "GradePage"),
            url_name="api_run_grades")
def grades(request, slug: str, run_id: int, page: Query[PageParams]):
    """Each final answer's grade (0–3, null: missing) and score (grade / 3), by answer id."""
    _, run = run_for(request, slug, run_id)
    queryset = Prediction.objects.filter(run=run, label=FINAL).values("id", "task_id", "condition", "status",
                                                                       grade=F("score"))

    def row(r):
        return {**r, "score": None if r["grade"] is None else r["grade"] / 3}
    return page_response(queryset_page(queryset, page, row))


@router.get("/projects/{slug}/runs/{int:run_id}/contrasts", response=page_schema(dict[str, Any], "ContrastPage"),
            url_name="api_run_contrasts")
def contrasts(request, slug: str, run_id: int, page: Query[PageParams]):
    """The dashboard's planned contrasts with their whole-person intervals (its cached payload, current only)."""
    _, run = _interview_run(request, slug, run_id)
    result = dashboard_cached(run)
    if result is None:
        raise Http404("The analysis is not computed yet (open the run's dashboard, or wait for the run to finish)")
    return page_response(list_page(result.payload["contrasts"], page))
