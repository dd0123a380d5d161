"""Sealing a protocol: the sha256 of every prompt file used, the canonical task list, the
settings and the code version, fixed before any request (paper App. B.2, B.3).

A re-grade-only protocol (App. H) seals, besides, which run it re-grades, the sha256 of the
answer list it grades and its judge (`regrade`); only the judge's prompts are its prompts.
Everything a re-grade adds enters a seal only when the protocol is one, so the seals of other
protocols are computed exactly as before.
"""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from experiments.core.candidates import derived_problem, is_derived
from experiments.core.conditions import CONDITIONS, DENSE, MEM0, WRONG_PERSON, get_condition
from experiments.core.criteria import criteria_problems
from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.kinds import SURVEY_PREFIX
from experiments.core.wrong_person import donor_sessions, wrong_person_seed
from experiments.execution.code_version import code_version
from experiments.execution.endpoints import endpoint_problem
from experiments.execution.kind_table import checked_sha256, kind_rules
from experiments.memory_systems.availability import condition_unavailable
from experiments.memory_systems.mem0_store import extraction_prompt_ref
from experiments.memory_systems.dense_embedder import model_ref as dense_model_ref
from experiments.execution.memory_imports import import_run_problems, memory_import_digest
from experiments.execution.planning import task_inputs
from experiments.execution.policy import DEFAULT_RETRY, RunError, is_number, model_config, retry_policy_problems
from experiments.execution.regrade import answers_digest
from experiments.models import Protocol, Run
from experiments.core.prompts import PromptError, prompt_sha256
from experiments.data.sessions import cohort_tasks
from experiments.execution.survey_planning import survey_condition_spec, survey_problems, survey_settings
from experiments.data.surveys import is_survey_cohort

def prompt_names(protocol: Protocol) -> list[str]:
    return kind_rules(protocol).prompt_names(protocol)


def _condition_spec(key: str) -> str:
    if key.startswith(SURVEY_PREFIX):
        return survey_condition_spec(key)
    try:
        return get_condition(key).canonical_json()
    except KeyError:
        return "unknown condition"  # removed from the registry since: the settings hash changes


def protocol_settings(protocol: Protocol) -> dict:
    """Everything that decides what is sent and how it is analysed, canonically."""
    settings = {
        "cohort": {"name": protocol.cohort.name, "seed": protocol.cohort.seed},
        "conditions": {key: _condition_spec(key) for key in protocol.conditions},
        "generator": protocol.generator,
        "judge": protocol.judge,
        "concurrency": protocol.concurrency,
        "retry_policy": {**DEFAULT_RETRY, **protocol.retry_policy},
        "contrasts": protocol.contrasts,
        "bootstrap": protocol.bootstrap,
    }
    if kind_rules(protocol).seals_source:
        settings["regrade_of"] = protocol.regrade_of_id
    if protocol.pairwise_pairs:  # only a pairwise judge's, so every other seal is computed as before
        settings["pairwise_pairs"] = protocol.pairwise_pairs
    if protocol.memory_import_runs:  # only then, so seals made before imports existed keep their hash
        settings["memory_import_runs"] = protocol.memory_import_runs
    if protocol.criteria:
        # Only a protocol that states criteria seals them, so every other seal is computed as before.
        settings["criteria"] = protocol.criteria
    settings.update(survey_settings(protocol))  # only a survey protocol without the screener adds to it
    return settings


def _uses_mem0(protocol: Protocol) -> str | None:
    """The protocol's Mem0 condition key, if it has one."""
    return next((key for key in protocol.conditions if key in CONDITIONS and CONDITIONS[key].evidence == MEM0), None)


def _uses_dense(protocol: Protocol) -> str | None:
    """The protocol's dense-retriever condition key, if it has one."""
    return next((key for key in protocol.conditions if key in CONDITIONS and CONDITIONS[key].evidence == DENSE), None)


def protocol_hashes(protocol: Protocol, *, checking: bool = False) -> dict:
    """What a seal records. `checking` (a seal check): the imported memories as their hash only, read
    as last computed while nothing it reads has changed (`_memory_imports_sha256_checked`)."""
    prompts = {}
    for name in prompt_names(protocol):
        try:
            prompts[name] = prompt_sha256(name)
        except PromptError:
            prompts[name] = "missing"
    mem0_key = _uses_mem0(protocol)
    if mem0_key and condition_unavailable(CONDITIONS[mem0_key]) is None:
        name, digest = extraction_prompt_ref()
        prompts[name] = digest
    dense_key = _uses_dense(protocol)
    if dense_key and condition_unavailable(CONDITIONS[dense_key]) is None:  # the embedding model, as Mem0's prompt
        name, digest = dense_model_ref()
        prompts[name] = digest
    rules = kind_rules(protocol)
    hashes = {
        "prompts": prompts,
        "task_list_sha256": rules.task_list_sha256(protocol.cohort),
        "settings_sha256": sha256_text(canonical_json(protocol_settings(protocol))),
        "code_version": code_version(),
    }
    if rules.seals_source:
        hashes["regrade"] = {**answers_digest(protocol.regrade_of), "judge": protocol.judge}
    if protocol.memory_import_runs and not rules.seals_source:
        # model instances here (task inputs need them), only for a protocol that imports memories
        hashes["memory_imports"] = (_memory_imports_sha256_checked(protocol, hashes) if checking
                                    else _memory_imports(protocol, cohort_tasks(protocol.cohort)))
    return hashes


def _memory_imports_sha256_checked(protocol: Protocol, hashes: dict) -> dict | None:
    """{"sha256": the imported memories' digest hash} as `_memory_imports` computes it (None as it
    does), recomputed only when the project's "tasks" or "memories" epoch moved (every change of the
    task inputs, of a memory of a run past its memories phase, of a slot's request or a generator) or
    what no epoch covers did: the prompt files, the settings (sources, generator, conditions), the code
    (which `checked_sha256` binds to every stored hash)."""
    if import_run_problems(protocol):  # a source still writing its memories, say: no digest (checked each time)
        return None
    inputs = sha256_text(canonical_json({"prompts": hashes["prompts"], "settings": hashes["settings_sha256"]}))
    sha256 = checked_sha256(
        "memory imports", protocol.pk, protocol.project_id,
        lambda: (_memory_imports(protocol, cohort_tasks(protocol.cohort)) or {}).get("sha256", ""),
        inputs_sha256=inputs, memories=True)
    return {"sha256": sha256} if sha256 else None


def protocol_memory_imports(protocol: Protocol) -> dict | None:
    """What the protocol imports (its seal's record once sealed; what sealing now would record before)."""
    if protocol.is_sealed():
        return protocol.seal.get("memory_imports")
    if not protocol.memory_import_runs or kind_rules(protocol).seals_source or protocol.cohort_id is None:
        return None
    return _memory_imports(protocol, cohort_tasks(protocol.cohort))


def _memory_imports(protocol: Protocol, tasks) -> dict | None:
    first_task = {}
    for task in tasks:
        first_task.setdefault(task.session_id, task)
    inputs = task_inputs(list(first_task.values()))
    return memory_import_digest(protocol, {sid: inputs[t.pk] for sid, t in first_task.items()},
                                {sid: t.session.external_id for sid, t in first_task.items()})


def _settings_problems(protocol: Protocol) -> list[str]:
    if not isinstance(protocol.retry_policy, dict):
        return ["the retry policy must be a mapping"]
    problems = retry_policy_problems(protocol.retry_policy)
    concurrency = protocol.concurrency
    if not isinstance(concurrency, dict):
        problems.append("the concurrency must map providers to in-flight caps")
    else:
        for provider, cap in concurrency.items():
            if not is_number(cap, integer=True) or cap < 1:
                problems.append(f"the in-flight cap of {provider} must be a positive integer, not {cap!r}")
    bootstrap = protocol.bootstrap
    if not isinstance(bootstrap, dict):
        problems.append("the bootstrap settings must be a mapping")
    else:
        for key, value in bootstrap.items():
            if key not in ("seed", "draws"):
                problems.append(f"unknown bootstrap setting {key!r}")
            elif not is_number(value, integer=True) or value < (1 if key == "draws" else 0):
                problems.append(f"bootstrap {key} must be a {'positive' if key == 'draws' else 'non-negative'} "
                                f"integer, not {value!r}")
    problems += [f"criteria: {p}" for p in criteria_problems(protocol.criteria, protocol.contrasts)
                 if isinstance(protocol.contrasts, list)]
    known = set(protocol.conditions)
    if not isinstance(protocol.contrasts, list):
        return problems + ["the contrasts must be a list"]
    for index, contrast in enumerate(protocol.contrasts):
        name = contrast.get("name") if isinstance(contrast, dict) else None
        if not isinstance(name, str) or not name:
            problems.append(f"contrast {index + 1} needs a name")
            continue
        terms = contrast.get("terms")
        if not isinstance(terms, dict) or not terms:
            problems.append(f"contrast {name!r} needs terms: condition → coefficient")
            continue
        for key, coefficient in terms.items():
            if is_derived(key):          # a pool's b1, b2, candidate mean or oracle (core.candidates)
                problem = derived_problem(key, known)
                if problem:
                    problems.append(f"contrast {name!r}: {problem}")
            elif key not in known:
                problems.append(f"contrast {name!r} uses {key!r}, which is not in the protocol")
            if not is_number(coefficient):
                problems.append(f"contrast {name!r}: the coefficient of {key!r} must be a number")
    return problems


def protocol_problems(protocol: Protocol) -> list[str]:
    """Why the protocol cannot be sealed, in words for the page; [] when it can."""
    problems = []
    if not protocol.conditions:
        problems.append("choose at least one condition")
    if not protocol.survey_screener and protocol.kind != Protocol.Kind.SURVEY:
        problems.append("only a survey protocol can leave the screener out")
    if protocol.cohort_id is None:
        problems.append("choose a cohort")
    elif protocol.kind == Protocol.Kind.SURVEY or is_survey_cohort(protocol.cohort):
        return problems + survey_problems(protocol) + _model_problems(protocol, ("generator",)) \
            + _settings_problems(protocol)
    elif not protocol.cohort.cohort_tasks.exists():
        problems.append(f"the cohort {protocol.cohort.name!r} has no tasks")
    for key in protocol.conditions:
        try:
            condition = get_condition(key)
        except KeyError:
            problems.append(f"unknown condition {key!r}")
            continue
        if not condition.runnable:
            problems.append(f"{key} is not runnable yet: {condition.note}")
        elif (reason := condition_unavailable(condition)):
            problems.append(f"{key} cannot run here: {reason}")
        elif condition.length_from is not None and condition.length_from not in protocol.conditions:
            problems.append(f"{key} rewrites answers to the median length of {condition.length_from}'s answers: "
                            "add that condition to the protocol")
        elif condition.evidence == WRONG_PERSON and protocol.cohort_id is not None:
            try:  # App. K's control needs another person for every session
                donor_sessions({t.session_id: t.session.person_id for t in cohort_tasks(protocol.cohort)},
                               wrong_person_seed(key))
            except ValueError as exc:
                problems.append(f"{key}: {exc}")
    if len(set(protocol.conditions)) != len(protocol.conditions):
        problems.append("a condition is listed twice")
    problems += _model_problems(protocol, ("generator", "judge"))
    if kind_rules(protocol).seals_source:
        problems += _regrade_problems(protocol.regrade_of)
    problems += import_run_problems(protocol)
    problems += _settings_problems(protocol)
    return problems


def _model_problems(protocol: Protocol, roles) -> list[str]:
    problems = []
    for role in roles:
        settings = getattr(protocol, role)
        if not isinstance(settings, dict):
            problems.append(f"{role}: the model settings must be a mapping")
            continue
        try:
            config = model_config(settings)
        except RunError as exc:
            problems.append(f"{role}: {exc}")
            continue
        if role == "generator" and config.structured_output:
            problems.append("generator: structured output is for the judge only (it asks for a grade)")
        # Only the administrator's endpoints are ever called, with only their keys (checked again before sending).
        endpoint = endpoint_problem(config.provider, config.base_url, config.api_key_env)
        if endpoint:
            problems.append(f"{role}: {endpoint}")
    return problems


def _regrade_problems(source: Run) -> list[str]:
    if source.status != Run.Status.FINISHED:
        return [f"run {source.pk} is {source.get_status_display().lower()}; only a finished run can be re-graded"]
    if not answers_digest(source)["answers"]:
        return [f"run {source.pk} has no answers to grade"]
    return []


def protocol_seal(*, protocol: Protocol, user) -> Protocol:
    """Seal the protocol; the caller's instance is updated too, and returned."""
    given = protocol
    with transaction.atomic():
        protocol = Protocol.objects.select_for_update().get(pk=protocol.pk)
        if protocol.is_sealed():
            raise RunError("the protocol is sealed already")
        problems = protocol_problems(protocol)
        if problems:
            raise RunError("; ".join(problems))
        hashes = protocol_hashes(protocol)
        if hashes["task_list_sha256"] != protocol.cohort.task_list_sha256:
            raise RunError("the cohort's tasks no longer match its recorded hash")
        protocol.seal = hashes
        protocol.sealed_at = timezone.now()
        protocol.sealed_by = user
        # Bypass the read-only guard for this one transition into the sealed state.
        Protocol.objects.filter(pk=protocol.pk).update(seal=hashes, sealed_at=protocol.sealed_at, sealed_by=user)
    # A caller holding the old instance must not go on seeing an unsealed protocol.
    given.seal, given.sealed_at, given.sealed_by = protocol.seal, protocol.sealed_at, user
    return given


def seal_mismatches(protocol: Protocol, *, code: bool = True) -> list[str]:
    """What changed since sealing; a run refuses to start unless this is empty.

    `code=False` leaves out the code version: the driver checks the rest before planning
    each phase, on whatever machine it runs.
    """
    now = protocol_hashes(protocol, checking=True)
    sealed = protocol.seal
    problems = []
    mem0_key = _uses_mem0(protocol)
    mem0_missing = mem0_key and condition_unavailable(CONDITIONS[mem0_key])
    if mem0_missing:
        # Sealed where Mem0 could run; here its extraction prompt is not even looked at, and
        # "prompt file changed" would send the owner looking for an edit that never happened.
        problems.append(f"{mem0_key} cannot run here: {mem0_missing} (the protocol was sealed where it could)")
    dense_key = _uses_dense(protocol)
    dense_missing = dense_key and condition_unavailable(CONDITIONS[dense_key])
    if dense_missing:  # as Mem0's: its embedding model is not looked at here, so not "changed" either
        problems.append(f"{dense_key} cannot run here: {dense_missing} (the protocol was sealed where it could)")
    for name in sorted(set(sealed.get("prompts", {})) | set(now["prompts"])):
        if (mem0_missing or dense_missing) and name not in now["prompts"]:
            continue
        if sealed.get("prompts", {}).get(name) != now["prompts"].get(name):
            problems.append(f"prompt file {name} changed")
    fields = [("task_list_sha256", "the task list"), ("settings_sha256", "the settings")]
    if code:
        fields.append(("code_version", "the code version"))
    for field, label in fields:
        if sealed.get(field) != now[field]:
            problems.append(f"{label} changed ({str(sealed.get(field))[:12]} → {now[field][:12]})")
    if "memory_imports" in now or "memory_imports" in sealed:
        before = (sealed.get("memory_imports") or {}).get("sha256")
        after = (now.get("memory_imports") or {}).get("sha256")
        if before != after:
            problems.append(f"the imported memories changed ({str(before)[:12]} → {str(after)[:12]})")
    if "regrade" in now:
        before = sealed.get("regrade", {}).get("answers_sha256")
        after = now["regrade"]["answers_sha256"]
        if before != after:
            problems.append(f"the answers of run {protocol.regrade_of_id} changed ({str(before)[:12]} → {after[:12]})")
    return problems
