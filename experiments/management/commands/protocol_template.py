"""protocol_template: one of the paper's experiments as a protocol for a chosen cohort, unsealed."""
from django.core.management.base import BaseCommand, CommandError

from experiments.core.interviews.records import printable, unstorable_text_problem
from experiments.core.llm.wire import api_key_env_problem
from experiments.core.paper_protocols import PAPER_PROTOCOLS
from experiments.execution.endpoints import endpoint_problem
from experiments.management.json_files import read_json_object
from experiments.models import Cohort, Project
from experiments.execution.protocol_templates import TemplateError, protocol_estimate, protocol_from_template


class Command(BaseCommand):
    help = ("Create one of the paper's experiments as an unsealed protocol on a cohort: "
            + "; ".join(f"{p.key} ({p.section})" for p in PAPER_PROTOCOLS.values())
            + ". Prints the conditions, the contrasts and the expected calls and tokens; seal it with protocol_seal.")

    def add_arguments(self, parser):
        parser.add_argument("template", choices=sorted(PAPER_PROTOCOLS))
        parser.add_argument("--project", required=True)
        parser.add_argument("--cohort", required=True)
        parser.add_argument("--name", help="the protocol's name (default: TEMPLATE · COHORT)")
        parser.add_argument("--generator", metavar="JSON_FILE", help="model settings (default: the offline stand-in)")
        parser.add_argument("--judge", metavar="JSON_FILE", help="model settings (default: the offline stand-in)")
        parser.add_argument("--import-memories", metavar="RUN", type=int, action="append", default=[],
                            help="import identical sealed memories of this earlier run instead of writing them")

    def handle(self, template, project, cohort, name=None, generator=None, judge=None, import_memories=(), **options):
        for option, value in (("--project", project), ("--cohort", cohort), ("--name", name or "")):
            if problem := unstorable_text_problem(value):
                raise CommandError(f"{option} {printable(value)!r} {problem}")
        project_obj = Project.objects.filter(slug=project).first()
        if project_obj is None:
            raise CommandError(f"no project '{project}'")
        cohort_obj = Cohort.objects.filter(project=project_obj, name=cohort).first()
        if cohort_obj is None:
            raise CommandError(f"no cohort named {cohort!r} in project '{project}'")
        try:
            protocol, made = protocol_from_template(
                template=template, cohort=cohort_obj, name=name, generator=_settings(generator, "generator"),
                judge=_settings(judge, "judge"), memory_import_runs=import_memories)
        except TemplateError as exc:
            raise CommandError(f"protocol not created: {exc}") from None
        lines = [f"protocol {protocol.name!r} (id {protocol.pk}): {made.template.title} ({made.template.section}), "
                 f"cohort {cohort_obj.name!r}, not sealed",
                 f"conditions ({len(protocol.conditions)}): " + ", ".join(protocol.conditions),
                 f"contrasts ({len(protocol.contrasts)}):"]
        for contrast in protocol.contrasts:
            marks = (" [family]" if contrast["family"] else "") + (" [criterion]" if contrast["criterion"] else "")
            lines.append(f"  {contrast['name']}{marks}")
        lines += [f"unavailable: {sentence}" for sentence in made.unavailable]
        estimate = protocol_estimate(protocol)
        for phase in estimate.phases:
            lines.append(f"expected {phase.phase}: {phase.calls} calls, ~{phase.input_tokens} input tokens, "
                         f"≤{phase.output_cap_tokens} output tokens")
        lines.append(f"expected in all: {estimate.calls} calls, ~{estimate.input_tokens} input tokens, "
                     f"≤{estimate.output_cap_tokens} output tokens")
        lines.append(f"Review it, then seal it with: manage.py protocol_seal {protocol.pk}")
        return "\n".join(lines)


def _settings(path: str | None, role: str) -> dict | None:
    if path is None:
        return None
    settings = read_json_object(path, f"the {role} settings must be a JSON object")
    if problem := api_key_env_problem(str(settings.get("api_key_env") or "")):
        raise CommandError(f"{role} api_key_env: {problem}")
    if settings.get("api_key_env") and (problem := endpoint_problem(
            str(settings.get("provider") or ""), str(settings.get("base_url") or ""), str(settings["api_key_env"]))):
        # Refused now rather than at the seal: only the endpoint list's key variables are ever read.
        raise CommandError(f"{role}: {problem}")
    return settings
