from django.core.management.base import BaseCommand, CommandError

from experiments.core.llm.offline import OFFLINE_LABEL
from experiments.execution import progress
from experiments.execution.endpoints import provider_excerpt
from experiments.management.owner_action import tokens_text
from experiments.models import Run

PHASE_COLUMNS = [("slots", "total"), ("done", "done"), ("pending", "pending"), ("in flight", "in_flight"),
                 ("failed", "failed"), ("held", "held"), ("unknown", "unknown"), ("attempts", "attempts"),
                 ("recoveries", "recoveries")]


class Command(BaseCommand):
    help = "Print a run's progress per phase, rates, tokens, circuit, amendments and (when finished) its analysis."

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)

    def handle(self, run_id, **options):
        run = Run.objects.select_related("protocol__cohort").filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no run with id {run_id}")
        counts = progress.run_progress(run)
        sections = [_header(run, counts), _phases(counts), _amendments(run)]
        if run.status == Run.Status.FINISHED:
            sections.append(_analysis(run))
        return "\n\n".join(sections)


def _header(run: Run, counts: dict) -> str:
    protocol = run.protocol
    tokens = counts["tokens"]
    limits = ", ".join(f"{row['service']} {row['in_flight']}/{row['cap']}"
                       for row in progress.in_flight(run, redis_up=progress.queue_reachable()))
    lines = [
        f"run {run.pk} of protocol {protocol.name!r} (cohort {protocol.cohort.name}): {run.get_status_display().lower()}, "
        f"phase {run.get_phase_display().lower()}{' (inline)' if run.inline else ''}",
        f"circuit: {'OPEN — quota exhausted, nothing is sent until an owner resumes' if run.circuit_open else 'closed'}",
        f"calls/s ({counts['rate_basis']}): {counts['calls_per_second']:.2f} · time left: {progress.pace_text(counts['pace'])} · "
        f"attempts: {counts['attempts']}",
        f"tokens: input {_reported(tokens['input_tokens'])}, output {_reported(tokens['output_tokens'])}, "
        f"reasoning {_reported(tokens['reasoning_tokens'])} ({tokens['unreported']} attempts reported no usage)",
        f"in flight now (limiter): {limits}",
    ]
    if run.status_reason:
        # It may quote a provider's error: never let a terminal obey what a server sent.
        lines.insert(2, f"reason: {provider_excerpt(run.status_reason, limit=None)}")
    decision = progress.run_next(run)
    if decision["decision"]:
        d = decision["decision"]
        tokens = tokens_text(d)
        lines.append(
            f"waiting for a decision: {d['requests']} slots of this phase ended without an answer"
            + (" — nothing advances until an owner chooses" if decision["decision_due"] else "")
            + f": manage.py run_accept_missing {run.pk} --reason … (continue with them missing), or "
            f"manage.py run_reissue {run.pk} --reason … --yes (re-issue each once: {d['requests']} paid requests; "
            f"tokens of their last attempts: {tokens})")
    stand_in_roles = [role for role in ("generator", "judge") if getattr(protocol, role).get("provider") == "offline"]
    if stand_in_roles:
        lines.append(f"{OFFLINE_LABEL}: the {' and '.join(stand_in_roles)} of this run is the offline stand-in, "
                     "not a model; its outputs are not model results")
    return "\n".join(lines)


def _phases(counts: dict) -> str:
    rows = [["phase"] + [title for title, _ in PHASE_COLUMNS]]
    for phase in counts["phases"]:
        rows.append([phase["label"]] + [str(phase[key]) for _, key in PHASE_COLUMNS])
    # Below the table, so scripts reading its columns keep working.
    outcome = ", ".join(f"{p['label'].lower()} {p['answered']} answered / {p['missing']} missing"
                        for p in counts["phases"] if p["total"])
    return _table(rows) + (f"\nanswered and missing (failed or unknown) slots: {outcome}" if outcome else "")


def _amendments(run: Run) -> str:
    amendments = list(run.amendments.select_related("created_by"))
    if not amendments:
        return "amendments: none"
    lines = ["amendments:"]
    for a in amendments:
        who = a.created_by or "shell"
        lines.append(f"  {a.created_at:%Y-%m-%d %H:%M:%S} {who} {a.get_kind_display().lower()}: {a.reason} — {progress.amendment_text(a)}")
    return "\n".join(lines)


def _number(value, digits=3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _survey_analysis(analysis: dict) -> str:
    """A survey run's numbers (analysis.survey_results): accuracy and deviation per condition, contrasts, criteria."""
    rows = [["condition", "respondents", "scored", "unscored", "accuracy", "deviation"]]
    for m in analysis["means"]:
        rows.append([m["condition"], str(m["people"]), str(m["items"]), str(m["unscored"]),
                     _number(m["accuracy"]), _number(m["deviation"])])
    lines = [f"survey analysis ({analysis['respondents']} respondents{', SYNTHETIC' if analysis['synthetic'] else ''}; "
             f"bootstrap seed {analysis['seed']}, {analysis['draws']} draws):", _table(rows), ""]
    rows = [["contrast", "metric", "estimate", "95% interval"]]
    for c in analysis["contrasts"]:
        rows.append([f"{c['first']} - {c['second']}", c["metric"], _number(c["estimate"]),
                     f"[{_number(c['lo'])}, {_number(c['hi'])}]"])
    lines.append(_table(rows) if len(rows) > 1 else "no contrasts")
    lines += [c["sentence"] for c in analysis["criteria"]] + [f"not computed: {e}" for e in analysis["errors"]]
    return "\n".join(lines)


def _analysis(run: Run) -> str:
    analysis = run.analysis
    if analysis.get("kind") == "survey":
        return _survey_analysis(analysis)
    rows = [["condition", "graded", "planned", "mean"]]
    for key, c in analysis.get("conditions", {}).items():
        rows.append([key, str(c["graded"]), str(c["planned"]), _number(c["mean"])])
    lines = [f"analysis ({analysis.get('tasks')} tasks, grades 0..1; bootstrap seed {analysis.get('seed')}, "
             f"{analysis.get('draws')} draws):", _table(rows), ""]
    rows = [["contrast", "tasks", "estimate", "95% interval", "family interval", "W/T/L", "criterion"]]
    for c in analysis.get("contrasts", []):
        interval = f"[{_number(c.get('lo'))}, {_number(c.get('hi'))}]" if c.get("lo") is not None else "—"
        family = f"[{_number(c.get('family_lo'))}, {_number(c.get('family_hi'))}]" if c.get("family_lo") is not None else "—"
        wtl = f"{c['wins']}/{c['ties']}/{c['losses']}" if "wins" in c else "—"
        criterion = ("met" if c.get("criterion_met") else "not met") if c.get("criterion") else "—"
        rows.append([c["name"], f"{c['n_tasks']}/{c['planned']}", _number(c.get("estimate")), interval, family, wtl,
                     criterion])
    lines.append(_table(rows) if len(rows) > 1 else "no planned contrasts")
    for verdict in analysis.get("verdicts", []):  # the protocol's prespecified criteria
        lines.append(f"criterion {verdict['name']}: {verdict['verdict']}")
        lines += [f"  {test['text']}: {test['verdict']}" for test in verdict["tests"]]
    if analysis.get("criteria_problem"):
        lines.append(analysis["criteria_problem"])
    return "\n".join(lines)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
        for row in rows
    )


def _reported(count):
    return "not reported" if count is None else count
