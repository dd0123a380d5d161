"""Sealing a protocol: the sha256 of every prompt file used, the canonical task list, the
settings and the code version, fixed before any request (paper App. B.2, B.3)."""
from __future__ import annotations

import functools
import hashlib
import subprocess
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from experiments.conditions import JUDGE_PROMPTS, get_condition
from experiments.engine import DEFAULT_RETRY, RunError, canonical_json, model_config
from experiments.models import Protocol
from experiments.prompts import prompt_sha256
from experiments.services import canonical_task_list, cohort_tasks

REPO = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """The git commit this process runs (with "+dirty" for uncommitted changes)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                                check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "ownwords-lab (no git checkout)"
    return commit + ("+dirty" if dirty else "")


def prompt_names(protocol: Protocol) -> list[str]:
    names = set(JUDGE_PROMPTS)
    for key in protocol.conditions:
        names.update(get_condition(key).prompt_names())
    return sorted(names)


def protocol_settings(protocol: Protocol) -> dict:
    """Everything that decides what is sent and how it is analysed, canonically."""
    return {
        "cohort": {"name": protocol.cohort.name, "seed": protocol.cohort.seed},
        "conditions": {key: get_condition(key).canonical_json() for key in protocol.conditions},
        "generator": protocol.generator,
        "judge": protocol.judge,
        "concurrency": protocol.concurrency,
        "retry_policy": {**DEFAULT_RETRY, **protocol.retry_policy},
        "contrasts": protocol.contrasts,
        "bootstrap": protocol.bootstrap,
    }


def protocol_hashes(protocol: Protocol) -> dict:
    tasks = cohort_tasks(protocol.cohort)
    return {
        "prompts": {name: prompt_sha256(name) for name in prompt_names(protocol)},
        "task_list_sha256": hashlib.sha256(canonical_task_list(tasks).encode("utf-8")).hexdigest(),
        "settings_sha256": hashlib.sha256(canonical_json(protocol_settings(protocol)).encode("utf-8")).hexdigest(),
        "code_version": code_version(),
    }


def protocol_problems(protocol: Protocol) -> list[str]:
    """Why the protocol cannot be sealed, in words for the page; [] when it can."""
    problems = []
    if not protocol.conditions:
        problems.append("choose at least one condition")
    for key in protocol.conditions:
        try:
            condition = get_condition(key)
        except KeyError:
            problems.append(f"unknown condition {key!r}")
            continue
        if not condition.runnable:
            problems.append(f"{key} is not runnable yet: {condition.note}")
    for role in ("generator", "judge"):
        try:
            model_config(getattr(protocol, role))
        except RunError as exc:
            problems.append(f"{role}: {exc}")
    known = set(protocol.conditions)
    for contrast in protocol.contrasts:
        for key in contrast.get("terms", {}):
            if key not in known:
                problems.append(f"contrast {contrast.get('name')!r} uses {key!r}, which is not in the protocol")
    return problems


def protocol_seal(*, protocol: Protocol, user) -> Protocol:
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
        return protocol


def seal_mismatches(protocol: Protocol) -> list[str]:
    """What changed since sealing; a run refuses to start unless this is empty."""
    now = protocol_hashes(protocol)
    sealed = protocol.seal
    problems = []
    for name in sorted(set(sealed.get("prompts", {})) | set(now["prompts"])):
        if sealed.get("prompts", {}).get(name) != now["prompts"].get(name):
            problems.append(f"prompt file {name} changed")
    for field, label in (("task_list_sha256", "the task list"), ("settings_sha256", "the settings"),
                         ("code_version", "the code version")):
        if sealed.get(field) != now[field]:
            problems.append(f"{label} changed ({str(sealed.get(field))[:12]} → {now[field][:12]})")
    return problems
