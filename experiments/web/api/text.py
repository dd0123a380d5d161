"""The API's participant text: a run's predictions, a project's sessions and a session's turns.

Owners and analysts only (`access.TEXT_READERS`): viewers and raters get 403, non-members 404. Each
page of text writes one audit entry, as the pages do (`audit_record`): a page of predictions is a
task list (Kind.TASK), a page of a session's turns the session itself (Kind.SESSION, "session <id>").
"""
from __future__ import annotations

from typing import Optional

from django.db.models import F
from django.http import Http404
from ninja import Query, Router, Schema

from experiments.access import TEXT_READERS, membership_for, run_for
from experiments.core.interviews.records import unstorable_text_problem
from experiments.data.audit_log import Kind, audit_record
from experiments.models import Session, Turn
from experiments.web.api.paging import PageParams, decode_cursor, keyed_page, page_response, page_schema, queryset_page
from experiments.web.api.text_sql import run_answers_after

router = Router(tags=["text (owners and analysts)"])


class PredictionOut(Schema):
    id: int
    task_id: int
    condition: str
    label: str
    status: str
    text: Optional[str] = None
    grade: Optional[int] = None
    chosen_label: str
    copied_label: str
    evidence_chars: int
    budget: Optional[int] = None


class SessionOut(Schema):
    id: int
    external_id: str
    study_key: str
    person_label: str
    language: str


class TurnOut(Schema):
    id: int
    index: int
    speaker: str
    text: str


@router.get("/projects/{slug}/runs/{int:run_id}/predictions", response=page_schema(PredictionOut, "PredictionPage"),
            url_name="api_run_predictions")
def predictions(request, slug: str, run_id: int, page: Query[PageParams]):
    """Every answer of the run (final answers and candidates), by id, with its text and grade."""
    membership, run = run_for(request, slug, run_id, roles=TEXT_READERS)
    after = decode_cursor(page.cursor)
    body = keyed_page(run_answers_after(run.pk, after, page.limit + 1), page)
    audit_record(request, membership.project, Kind.TASK,
                 f"task list of run {run.pk}, API page after answer {after} ({len(body['items'])} answers)")
    return page_response(body)


@router.get("/projects/{slug}/sessions", response=page_schema(SessionOut, "SessionPage"), url_name="api_sessions")
def sessions(request, slug: str, page: Query[PageParams]):
    """The project's interview sessions, by id: their ids, study and person labels (no text)."""
    membership = membership_for(request, slug, roles=TEXT_READERS)
    queryset = Session.objects.filter(project=membership.project).values(
        "id", "external_id", "language", study_key=F("study__key"), person_label=F("person__label"))
    return page_response(queryset_page(queryset, page))


@router.get("/projects/{slug}/sessions/{session_id}/turns", response=page_schema(TurnOut, "TurnPage"),
            url_name="api_session_turns")
def turns(request, slug: str, session_id: str, page: Query[PageParams]):
    """One session's transcript: its turns in order (by id, which is their order of import)."""
    membership = membership_for(request, slug, roles=TEXT_READERS)
    if unstorable_text_problem(session_id):  # no stored id holds one; the database would refuse the lookup
        raise Http404("No such session")
    session = Session.objects.filter(project=membership.project, external_id=session_id).first()
    if session is None:
        raise Http404("No such session")
    body = queryset_page(Turn.objects.filter(session=session).values("id", "index", "speaker", "text"), page)
    audit_record(request, membership.project, Kind.SESSION, f"session {session.external_id}")
    return page_response(body)
