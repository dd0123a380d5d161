"""Ready-made protocols: the paper's experiments created for a chosen cohort in one step
(`core.paper_protocols` holds what each contains). Used by the project page's button and by
`manage.py protocol_template`.

The protocol is created unsealed, with the offline stand-in as generator and judge unless model
settings are given, so the team reviews it — the expected calls and tokens (`core.estimate`),
the models, the contrasts — and seals it on the protocol's page; nothing is sent before that.
"""
from __future__ import annotations

from experiments.core.contrasts import contrast_problems
from experiments.core.estimate import RunEstimate, estimate_run, with_imported_memories
from experiments.core.conditions import CONDITIONS, get_condition
from experiments.core.kinds import inferred_kind
from experiments.core.interviews.records import unstorable_text_problem
from experiments.core.paper_protocols import Instantiated, paper_protocol
from experiments.data.sessions import cohort_shape
from experiments.execution.memory_imports import import_run_problems
from experiments.execution.sealing import protocol_memory_imports
from experiments.memory_systems.availability import condition_unavailable
from experiments.models import Cohort, Protocol

OFFLINE_MODEL = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}


class TemplateError(ValueError):
    """The ready-made protocol cannot be created; the message says why. Nothing was stored."""


def runs_here(key: str) -> bool:
    """Registered, runnable, and its optional dependencies installed on this machine (Mem0's)."""
    return key in CONDITIONS and get_condition(key).runnable and condition_unavailable(get_condition(key)) is None


def default_name(template: str, cohort: Cohort) -> str:
    return f"{template} · {cohort.name}"[:100]


def protocol_from_template(*, template: str, cohort: Cohort, name: str | None = None, generator: dict | None = None,
                           judge: dict | None = None, concurrency: dict | None = None,
                           memory_import_runs=(), user=None) -> tuple[Protocol, Instantiated]:
    try:
        made = paper_protocol(template, runs_here)
    except KeyError as exc:
        raise TemplateError(exc.args[0]) from None
    if name is None:  # a second click makes "… (2)", never an error
        base, number, name = default_name(template, cohort), 1, default_name(template, cohort)
        while Protocol.objects.filter(project_id=cohort.project_id, name=name).exists():
            number += 1
            name = f"{base[:92]} ({number})"
    if problem := unstorable_text_problem(name):
        raise TemplateError(f"the name {problem}")
    if not name.strip() or len(name) > 100:
        raise TemplateError("a protocol name is 1 to 100 characters")
    if Protocol.objects.filter(project_id=cohort.project_id, name=name).exists():
        raise TemplateError(f"a protocol named {name!r} exists already; choose another name")
    if not made.conditions:
        raise TemplateError(f"none of the conditions of {template} can run here")
    problems = contrast_problems(made.contrasts, made.conditions)
    if problems:  # the templates are fixed: this is a defect here, never the user's
        raise TemplateError("; ".join(problems))
    imports = import_run_problems(Protocol(project_id=cohort.project_id, memory_import_runs=list(memory_import_runs)))
    if imports:
        raise TemplateError("; ".join(imports))
    generator, judge = generator or dict(OFFLINE_MODEL), judge or dict(OFFLINE_MODEL)
    providers = {generator.get("provider"), judge.get("provider")}
    protocol = Protocol.objects.create(
        project_id=cohort.project_id, cohort=cohort, name=name, conditions=made.conditions,
        kind=inferred_kind(made.conditions, regrade=False),
        generator=generator, judge=judge, concurrency=concurrency or {p: 4 for p in providers if isinstance(p, str)},
        contrasts=made.contrasts, bootstrap=dict(made.template.bootstrap),
        memory_import_runs=list(memory_import_runs), created_by=user,
    )
    return protocol, made


def protocol_estimate(protocol: Protocol) -> RunEstimate:
    """Expected calls and tokens of one run of the protocol (as the protocol page shows them)."""
    caps = [(settings or {}).get("max_output_tokens") or 1600 for settings in (protocol.generator, protocol.judge)]
    estimate = estimate_run([get_condition(key) for key in protocol.conditions], cohort_shape(protocol.cohort),
                            generator_cap=caps[0], judge_cap=caps[1])
    imports = protocol_memory_imports(protocol) if protocol.memory_import_runs else None
    return with_imported_memories(estimate, imports["imported"]) if imports else estimate
