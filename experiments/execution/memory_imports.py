"""Memories built once, reused by later runs (paper App. G: "the common experiment imports the
388 previously constructed profiles").

A memory is identified by what made it: the sha256 of its writing request (the prompt files'
text, the permitted source and the requested length are all in the messages) and the generator
settings that answered it (every `ModelConfig` field but the key's variable name, which changes
nothing sent). A protocol that names earlier runs in `memory_import_runs` takes, for each
session and memory it needs, a memory of those runs with the same request hash and generator
instead of writing it again; sessions not covered are written as usual.

Sealing records the import (`memory_import_digest`: the runs, and per imported memory its
session, kind, length, source memory and run, request hash and text hash) and the digest's
sha256; the driver's seal check recomputes it before each phase, so a source that changed
stops the run. `plan_memories` then copies exactly the sealed entries (`Memory.imported_from`
names the source, no slot, no call) and plans slots for the rest.
"""
from __future__ import annotations

from dataclasses import asdict

from experiments.core.assembly import assemble_memory_request
from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.conditions import get_condition
from experiments.execution.policy import RunError, model_config
from experiments.models import Memory, Prediction, Run
from experiments.models.runs import PHASE_ORDER, Phase


def generator_identity(settings: dict) -> str:
    """The generator settings that decide a memory's text, canonically (no key variable name)."""
    try:
        config = asdict(model_config(settings))
    except RunError:
        return canonical_json({"invalid": settings})
    config.pop("api_key_env", None)
    return canonical_json(config)


def memory_specs(protocol) -> list[tuple[str, int]]:
    """The distinct (kind, words) memories the protocol's conditions show or take a budget from."""
    specs = set()
    for key in protocol.conditions:
        try:
            condition = get_condition(key)
        except KeyError:
            continue
        if condition.needs_memory:
            specs.add((condition.memory_kind, condition.memory_words))
    return sorted(specs)


def memory_requests(protocol, session_inputs: dict) -> dict[tuple[int, str, int], str]:
    """(session id, kind, words) → sha256 of the memory's writing request, for every memory the
    protocol needs. `session_inputs` maps a session id to its first task's TaskInput."""
    requests = {}
    for session_id, task_input in session_inputs.items():
        for kind, words in memory_specs(protocol):
            assembled = assemble_memory_request(kind, words, task_input)
            requests[(session_id, kind, words)] = sha256_text(assembled.system + "\x00" + assembled.user)
    return requests


def import_run_problems(protocol) -> list[str]:
    """What is wrong with the protocol's `memory_import_runs`; [] when nothing (or none named)."""
    runs = protocol.memory_import_runs
    if isinstance(runs, list) and not runs:
        return []
    if not isinstance(runs, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in runs):
        return ["memory imports must be a list of run ids"]
    if len(set(runs)) != len(runs):
        return ["a run to import memories from is listed twice"]
    found = {run.pk: run for run in Run.objects.filter(pk__in=runs, protocol__project_id=protocol.project_id)}
    problems = []
    for run_id in runs:
        run = found.get(run_id)
        if run is None:
            problems.append(f"run {run_id} is not a run of this project: no memories can be imported from it")
        elif run.protocol_id == protocol.pk:
            problems.append(f"run {run_id} is a run of this protocol")
        elif PHASE_ORDER.index(run.phase) <= PHASE_ORDER.index(Phase.MEMORIES):
            problems.append(f"run {run_id} has not finished writing its memories; import once it has")
    return problems


def memory_import_digest(protocol, session_inputs: dict, external_ids: dict[int, str]) -> dict | None:
    """What the protocol imports, for its seal; None when it imports nothing.

    `external_ids` maps session ids to their external ids (the seal names sessions as the task
    list does). Among several source runs, the first listed that holds a memory wins."""
    runs = protocol.memory_import_runs or []
    if not runs or import_run_problems(protocol):
        return None
    needed = memory_requests(protocol, session_inputs)
    ours = generator_identity(protocol.generator)
    identity_of_run = {}
    # Only the columns needed: a slot's messages hold the whole record and would be read for nothing.
    fields = ("pk", "run_id", "session_id", "kind", "words", "text", "imported_from_id", "slot__request_sha256")
    candidates = list(Memory.objects.filter(run_id__in=runs, session_id__in=session_inputs, text__isnull=False)
                      .select_related("slot").only(*fields).order_by("pk"))
    roots = Memory.objects.select_related("slot").only(*fields).in_bulk(
        {m.imported_from_id for m in candidates if m.imported_from_id})
    root_runs = {m.run_id for m in candidates} | {m.run_id for m in roots.values()}
    for run in Run.objects.filter(pk__in=root_runs).select_related("protocol").only("pk", "protocol__generator"):
        identity_of_run[run.pk] = generator_identity(run.protocol.generator)
    found: dict[tuple[int, str, int], tuple[Memory, Memory]] = {}
    for memory in candidates:
        # A memory the named run imported itself is taken from the run that wrote it (its root).
        root = roots.get(memory.imported_from_id) if memory.imported_from_id else memory
        if root is None or root.slot is None:
            continue
        spec = (memory.session_id, memory.kind, memory.words)
        if needed.get(spec) != root.slot.request_sha256:
            continue  # another prompt, source or length: not the memory this protocol would write
        if identity_of_run.get(root.run_id) != ours:
            continue
        held = found.get(spec)
        if held is None or runs.index(memory.run_id) < runs.index(held[0].run_id):
            found[spec] = (memory, root)
    entries = [
        {"session": external_ids[session_id], "session_pk": session_id, "kind": kind, "words": words,
         "source_run": memory.run_id, "written_by_run": root.run_id, "source_memory": root.pk,
         "request_sha256": needed[(session_id, kind, words)], "text_sha256": sha256_text(root.text)}
        for (session_id, kind, words), (memory, root) in sorted(
            found.items(), key=lambda item: (external_ids[item[0][0]], item[0][1], item[0][2]))
    ]
    return {"runs": list(runs), "needed": len(needed), "imported": len(entries), "memories": entries,
            "sha256": sha256_text(canonical_json({"runs": list(runs), "memories": entries}))}


def imported_memories(run: Run) -> list[Memory]:
    """The run's memories as its seal imports them (unsaved), each checked against its text hash."""
    digest = (run.protocol.seal or {}).get("memory_imports") or {}
    entries = digest.get("memories", [])
    sources = Memory.objects.in_bulk([entry["source_memory"] for entry in entries])
    memories = []
    for entry in entries:
        source = sources.get(entry["source_memory"])
        if source is None or source.text is None or sha256_text(source.text) != entry["text_sha256"]:
            raise RunError(f"the sealed memory {entry['source_memory']} of run {entry['source_run']} changed")
        memories.append(Memory(run=run, session_id=entry["session_pk"], kind=entry["kind"], words=entry["words"],
                               text=source.text, slot=None, imported_from=source))
    return memories


def imported_count(run: Run) -> int:
    return Memory.objects.filter(run=run, imported_from__isnull=False).count()


def memory_facts(run: Run) -> dict:
    """What the run page says about its memories (counts only, so viewers may see it): how many
    were imported and from which runs, how many it wrote, and MemGPT-style answers lost to an
    unparseable archive-query reply."""
    memories = Memory.objects.filter(run=run)
    imported = memories.filter(imported_from__isnull=False)
    return {
        "imported": imported.count(),
        "written": memories.filter(imported_from__isnull=True).count(),
        "runs": list((run.protocol.seal or {}).get("memory_imports", {}).get("runs", [])) if imported.exists() else [],
        "unparsed_queries": Prediction.objects.filter(run=run, status=Prediction.Status.UNPARSED_QUERIES).count(),
    }
