"""What a project's member should do next, from its state: the home page's first line.

Each step is (what to do, URL name, its arguments) and depends only on counts and the newest
protocol and run, so the page says "import", "derive tasks", "draw a cohort", "define a
protocol", "seal", "start", "follow the run" or "read the results", in that order.
"""
from __future__ import annotations

from dataclasses import dataclass

from experiments.access import may_spend
from experiments.models import Membership, Project, Role, Run


@dataclass(frozen=True)
class NextStep:
    text: str
    url_name: str
    args: tuple
    anchor: str = ""


def next_step(membership: Membership, *, sessions: int, tasks: int, cohorts: int) -> NextStep | None:
    project: Project = membership.project
    slug = project.slug
    role = membership.role
    if role == Role.RATER:
        return NextStep("Rate the items assigned to you", "campaign_list", (slug,))
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
    run = Run.objects.filter(protocol__project=project).order_by("-created_at", "-pk").first()
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
    if role == Role.OWNER:
        return NextStep(f"Read the dashboard of run {run.pk}, or rate it with human raters", "run_dashboard",
                        (slug, run.pk))
    return NextStep(f"Read the dashboard of run {run.pk}", "run_dashboard", (slug, run.pk))
