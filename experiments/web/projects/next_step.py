"""What a project's member should do next, from its state: the home page's first line.

Each step is (what to do, URL name, its arguments) and depends only on counts and the newest
protocol and run, so the page says "import", "derive tasks", "draw a cohort", "define a
protocol", "seal", "start", "follow the run" or "read the results", in that order.
"""
from __future__ import annotations

from dataclasses import dataclass

from experiments.access import may_spend
from experiments.models import Membership, Project, Protocol, Role, Run


@dataclass(frozen=True)
class NextStep:
    text: str
    url_name: str
    args: tuple
    anchor: str = ""
    also: "NextStep | None" = None  # a second, equally good next step (its own link)


def next_step(membership: Membership, *, sessions: int, tasks: int, cohorts: int,
              survey_only: bool = False) -> NextStep | None:
    """`survey_only`: the project holds survey studies and no interview session (its own steps)."""
    project: Project = membership.project
    slug = project.slug
    role = membership.role
    if role == Role.RATER:
        return NextStep("Rate the items assigned to you", "campaign_list", (slug,))
    if survey_only:
        return _survey_step(membership, samples=cohorts)
    if sessions == 0:
        if role == Role.OWNER:
            return NextStep("Import interview sessions (JSONL, Anthropic Interviewer CSV or genagents)",
                            "session_import", (slug,))
        return None
    if tasks == 0:
        return NextStep("Derive prediction tasks with a task rule", "project_detail", (slug,), "#task-rule") \
            if role == Role.OWNER else None
    if cohorts == 0:
        return NextStep("Draw a cohort of tasks", "project_detail", (slug,), "#cohorts") \
            if role in (Role.OWNER, Role.ANALYST) else None
    protocol = project.protocols.order_by("-created_at", "-pk").first()
    if protocol is None:
        return NextStep("Define a protocol: conditions, models and planned contrasts", "protocol_create", (slug,)) \
            if role in (Role.OWNER, Role.ANALYST) else None
    return _run_step(membership, protocol, Run.objects.filter(protocol__project=project)
                     .order_by("-created_at", "-pk").first())


def _run_step(membership: Membership, protocol, run: Run | None) -> NextStep | None:
    """Seal, start, follow or read the newest run (interview and survey projects alike)."""
    slug, role = membership.project.slug, membership.role
    if run is None:
        verb = "Run" if protocol.is_sealed() else "Seal"
        if may_spend(membership, protocol):
            return NextStep(f"{verb} protocol {protocol.name}", "protocol_detail", (slug, protocol.pk))
        # Sealing and running spend money: say who may (the project's spending setting decides for analysts).
        return NextStep(f"Protocol {protocol.name} waits for an owner to {verb.lower()} it", "protocol_detail",
                        (slug, protocol.pk))
    if run.status != Run.Status.FINISHED:
        return NextStep(f"Follow run {run.pk} of {run.protocol.name} ({run.get_status_display().lower()})",
                        "run_detail", (slug, run.pk))
    survey = run.protocol.kind == Protocol.Kind.SURVEY
    read = NextStep(f"Read the {'survey dashboard' if survey else 'dashboard'} of run {run.pk}",
                    "survey_dashboard" if survey else "run_dashboard", (slug, run.pk))
    if role == Role.OWNER and not survey:
        return NextStep(read.text, read.url_name, read.args,
                        also=NextStep("rate it with human raters", "campaign_create", (slug, run.pk)))
    return read


def _survey_step(membership: Membership, *, samples: int) -> NextStep | None:
    project, role = membership.project, membership.role
    slug = project.slug
    if samples == 0:  # an import makes the study's samples; none means no study was imported
        return NextStep("Import a survey (Twin-2K-500 wave_split files)", "survey_import", (slug,)) \
            if role == Role.OWNER else None
    protocol = project.protocols.order_by("-created_at", "-pk").first()
    if protocol is None:
        return NextStep("Define a survey protocol on a sample: conditions and models", "protocol_create", (slug,)) \
            if role in (Role.OWNER, Role.ANALYST) else None
    return _run_step(membership, protocol, Run.objects.filter(protocol__project=project)
                     .order_by("-created_at", "-pk").first())
