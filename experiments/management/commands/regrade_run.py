from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from experiments.access import OWNERS, config_grant_refusal, member_with_role
from experiments.core.llm.wire import api_key_env_problem
from experiments.execution import control, driver, jobs, policy
from experiments.execution.pairwise_judge import all_pairs
from experiments.management.owner_action import inline_ending, require_queue
from experiments.models import Run

# Command-line option → the judge's model setting; only the options given are stored, so the
# judge reads exactly like one written in the protocol editor or a protocol_create file.
JUDGE_OPTIONS = {
    "provider": "provider", "base_url": "base_url", "model": "model",
    "expected_model_version": "expected_model_version", "api_key_env": "api_key_env",
    "max_output_tokens": "max_output_tokens", "temperature": "temperature", "reasoning": "reasoning",
    "token_param": "token_param", "timeout_s": "timeout_s", "quota_pattern": "quota_pattern",
}


class Command(BaseCommand):
    help = (
        "Re-grade a finished run (paper App. H): seal a re-grade-only protocol whose run judges every distinct "
        "answer of the run again, with another judge or, with --same-judge, the same one (a retest); nothing is "
        "generated. Only an owner of the project may. With --inline the run is driven here; with --start it "
        "starts through the queue; otherwise start it later with run_start. With --pair (or --pairwise-conditions) "
        "a pairwise judge instead: the pairwise prompt asks which of two conditions' answers is better, each pair "
        "in both orders."
    )

    def add_arguments(self, parser):
        parser.add_argument("--run", type=int, required=True, dest="run_id", help="the finished run to re-grade")
        parser.add_argument("--user", required=True, help="an owner of the run's project, recorded as the creator")
        parser.add_argument("--same-judge", action="store_true", help="the source run's judge again (a retest)")
        judge = parser.add_argument_group("another judge (the protocol editor's judge settings)")
        judge.add_argument("--provider", help="openai (any Chat Completions server), gemini or offline")
        judge.add_argument("--base-url", help="e.g. https://api.openai.com/v1; empty for offline")
        judge.add_argument("--model")
        judge.add_argument("--expected-model-version")
        judge.add_argument("--api-key-env", help="the NAME of the variable holding the key, never the key")
        judge.add_argument("--max-output-tokens", type=int)
        judge.add_argument("--temperature", type=float)
        judge.add_argument("--reasoning")
        judge.add_argument("--token-param")
        judge.add_argument("--timeout-s", type=float)
        judge.add_argument("--quota-pattern")
        judge.add_argument("--structured-output", action="store_true",
                           help="ask the service for the JSON object {score, rationale} (openai, gemini)")
        judge.add_argument("--cap", type=int, help="in-flight cap for the judge's provider")
        pairwise = parser.add_mutually_exclusive_group()
        pairwise.add_argument("--pair", nargs=2, action="append", metavar=("X", "Y"),
                              help="a pairwise judge of conditions X and Y (repeat for more pairs)")
        pairwise.add_argument("--pairwise-conditions", nargs="+", metavar="CONDITION",
                              help="a pairwise judge of every pair of these conditions")
        parser.add_argument("--name", help="the new protocol's name (default: named after the run)")
        start = parser.add_mutually_exclusive_group()
        start.add_argument("--inline", action="store_true", help="drive the re-grade here, without the queue")
        start.add_argument("--start", action="store_true", help="start the re-grade through the queue")

    def handle(self, run_id, user, same_judge, name, inline, start, cap, structured_output, pair,
               pairwise_conditions, **options):
        source = Run.objects.select_related("protocol__project").filter(pk=run_id).first()
        if source is None:
            raise CommandError(f"no run with id {run_id}")
        project = source.protocol.project
        owner = member_with_role(project, user, roles=OWNERS)
        if owner is None:
            raise CommandError(f"{user!r} is not an owner of project '{project.slug}': nothing was created")
        judge = _judge(options, same_judge, structured_output, cap)
        if refusal := config_grant_refusal(owner, judge or source.protocol.judge):
            raise CommandError(f"{user!r} may not re-grade with this judge, nothing was created: {refusal}")
        if start:
            require_queue("was created")
        try:
            with transaction.atomic():
                pairs = pair or (all_pairs(source.protocol.conditions, pairwise_conditions)
                                 if pairwise_conditions else None)
                protocol = control.regrade_create(source=source, user=owner, judge=judge, cap=cap, name=name,
                                                  pairs=pairs)
                run = None
                if inline or start:
                    run = Run.objects.create(protocol=protocol, created_by=owner, inline=inline)
                    control.run_start(run=run)
                    if start:
                        jobs.run_enqueue(run.pk)  # enqueued when this transaction commits
        except policy.RunError as exc:
            raise CommandError(f"run {run_id} not re-graded, nothing was created: {exc}") from None
        regrade = protocol.seal["regrade"]
        head = (f"protocol {protocol.name!r} (id {protocol.pk}) sealed: a pairwise judge of run {run_id}, "
                f"{len(protocol.pairwise_pairs)} pairs of conditions, each task's two answers in both orders"
                if protocol.pairwise_pairs else
                f"protocol {protocol.name!r} (id {protocol.pk}) sealed: re-grades {regrade['answers']} answers of run "
                f"{run_id} ({regrade['operational_zeros']} empty: operational zeros, no call); answer list "
                f"{regrade['answers_sha256']}")
        if run is None:
            return f"{head}\nstart it with: manage.py run_start {protocol.pk} [--inline]"
        if start:
            return f"{head}\nrun {run.pk} started through the queue; follow it with: manage.py run_report {run.pk}"
        run = driver.run_inline(run.pk)
        ending = inline_ending(run)
        return f"{head}\nrun {run.pk} ran inline and is {ending}; see: manage.py run_report {run.pk}"


def _judge(options: dict, same_judge: bool, structured_output: bool, cap) -> dict | None:
    """The judge's settings from the options, or None for --same-judge; CommandError when they clash."""
    given = {setting: options[option] for option, setting in JUDGE_OPTIONS.items() if options.get(option) is not None}
    if same_judge:
        if given or structured_output or cap is not None:
            raise CommandError("--same-judge re-grades with the source run's judge as it is: give no judge options")
        return None
    if "provider" not in given or "model" not in given:
        raise CommandError("choose the judge: --same-judge, or --provider and --model (and --base-url unless offline)")
    problem = api_key_env_problem(given.get("api_key_env", ""))
    if problem:
        raise CommandError(f"--api-key-env: {problem}")
    given.setdefault("base_url", "")
    if structured_output:
        given["structured_output"] = True
    return given
