"""How the journal reads a slot before its attempts (`journal.slot_execute`), on the path of every request.

- `prepare`: the slot's row (one plain statement, `journal_sql.slot_row`), its run's protocol and
  the role's settings, the endpoint checked (a withdrawn one stops the run before anything is sent);
- `named_slot`: a slot whose job named its run and role (`jobs.slot_job_id`) is not read at all
  before its first reservation, which reads it in the same statement
  (`reservation.reserve_named_first`): one round trip fewer per request. Only the run's protocol
  is needed first, read once per run and process while it is sealed.

A sealed protocol never changes, so each worker keeps the protocols it read (keyed by id and seal
time, or by run; the named reservation checks both against the database in its statement).
"""
from __future__ import annotations

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from django.db.models import DEFERRED

from experiments.core.llm.wire import ModelConfig
from experiments.execution.endpoints import EndpointNotAllowed, require_allowed_endpoint
from experiments.execution.journal_sql import slot_row
from experiments.execution.policy import role_config
from experiments.models import Protocol, Run, Slot

_KEPT = 256  # protocols kept per process; more, and the keeping starts over
_PROTOCOLS: dict[tuple, Protocol] = {}  # by id and seal time
_RUN_SETTINGS: dict[tuple, tuple[Protocol, ModelConfig]] = {}  # by run and role: its protocol, the role's settings


def prepare(slot_id: int) -> tuple[Slot, ModelConfig | None]:
    """The slot and its role's settings; settings None when its endpoint is no longer allowed
    (the run is stopped then, before anything is sent)."""
    slot = slot_for_execution(slot_id)
    run = slot.run
    config = role_config(run, slot.role)
    try:
        # Sealing and run_start check it too; this covers an endpoint withdrawn mid-run.
        require_allowed_endpoint(config)
    except EndpointNotAllowed as exc:
        Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
            status=Run.Status.STOPPED, status_reason=f"Stopped before sending: {exc}")
        return slot, None
    return slot, config


def slot_for_execution(slot_id: int) -> Slot:
    """The slot with its run and the run's protocol, as slot_execute needs them.

    The slot comes from one plain statement. The ORM's select_related costs more CPU than the
    rest of a slot's bookkeeping together, on the path of every request.
    """
    row = slot_row(slot_id)
    if row is None:
        raise Slot.DoesNotExist(f"no slot {slot_id}")
    run_id, phase, key, role, system, user, protocol_id, sealed_at, status, retry_at, note, task_id = row
    cache_key = (protocol_id, str(sealed_at))
    protocol = _PROTOCOLS.get(cache_key) if sealed_at is not None else None
    if protocol is None:
        protocol = Protocol.objects.get(pk=protocol_id)
        if protocol.is_sealed():
            _keep(_PROTOCOLS, cache_key, protocol)
    run = loaded(Run, id=run_id, protocol_id=protocol_id)
    run.protocol = protocol
    # task_id too: the stored grades of a generation answer are refreshed for its task only.
    slot = loaded(Slot, id=slot_id, run_id=run_id, phase=phase, key=key, role=role, system=system, user=user,
                  status=status, retry_at=retry_at, status_note=note, task_id=task_id)
    slot.run = run
    return slot


def named_slot(slot_id: int, run_id: int, role: str, db) -> tuple[Slot, ModelConfig] | None:
    """The slot as its job names it (its run and role, nothing else loaded yet) and the role's
    settings, with no database step once this process holds the run's sealed protocol (`db` runs the
    step that reads it). None when the slot must be read first (`prepare`): the protocol is not
    sealed, the role's endpoint is no longer allowed (`prepare` stops the run), or the receipts
    reserve first attempts (settings.OWNWORDS_RESERVE_WITH_RECEIPT: a ticket's thread gets no row)."""
    if settings.OWNWORDS_RESERVE_WITH_RECEIPT:
        return None
    protocol, config = _RUN_SETTINGS.get((run_id, role)) or (None, None)
    if protocol is None:
        protocol = db(_sealed_protocol_of, run_id)
        if protocol is None:
            return None
    run = loaded(Run, id=run_id, protocol_id=protocol.pk)
    run.protocol = protocol
    if config is None:
        # Kept with its protocol (a frozen dataclass): its checks cost more than the rest of this.
        config = role_config(run, role)
        _keep(_RUN_SETTINGS, (run_id, role), (protocol, config))
    try:
        require_allowed_endpoint(config)
    except EndpointNotAllowed:
        return None
    slot = loaded(Slot, id=slot_id, run_id=run_id, role=role)
    slot.run = run
    return slot, config


def _sealed_protocol_of(run_id: int) -> Protocol | None:
    """The run's protocol when sealed; None when it is not, or there is no such run."""
    run = Run.objects.select_related("protocol").filter(pk=run_id).first()
    return run.protocol if run is not None and run.protocol.is_sealed() else None


def _keep(kept: dict, key, value) -> None:
    if len(kept) > _KEPT:
        kept.clear()
    kept[key] = value


_ATTNAMES: dict[type, dict[str, int]] = {}


def loaded(model, **values):
    """An instance of `model` as the ORM loads one with only these fields (`Model.from_db`): the
    other fields are deferred, read from the database if ever asked for (never a made-up default
    that a `save` could write back). Its positional construction costs a third of building it
    from keyword arguments, which sets every field of the model."""
    positions = _ATTNAMES.get(model)
    if positions is None:
        positions = _ATTNAMES[model] = {field.attname: i for i, field in enumerate(model._meta.concrete_fields)}
    row = [DEFERRED] * len(positions)
    for name, value in values.items():
        row[positions[name]] = value
    return model.from_db(DEFAULT_DB_ALIAS, None, row)
