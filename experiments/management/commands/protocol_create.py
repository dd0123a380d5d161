from django.core.management.base import BaseCommand, CommandError

from experiments.execution.policy import DEFAULT_RETRY
from experiments.core.llm.wire import api_key_env_problem, concurrency_problems
from experiments.core.contrasts import contrast_problems, parse_contrast_line
from experiments.core.kinds import inferred_kind
from experiments.access import TEXT_READERS, member_with_role
from experiments.models import Cohort, Project, Protocol
from experiments.execution.sealing import protocol_problems
from experiments.management.json_files import read_json_object

REQUIRED = ("name", "cohort", "conditions", "generator", "judge")
OPTIONAL = ("concurrency", "retry_policy", "contrasts", "bootstrap", "memory_import_runs", "criteria",
            "survey_screener")
EXAMPLE = """{
  "name": "pilot",
  "cohort": "c1",
  "conditions": ["memory(concrete,100w)+one-shot", "ownwords(B=|memory|)"],
  "generator": {"provider": "openai", "base_url": "http://127.0.0.1:8080/v1", "model": "smol",
                "api_key_env": "OPENAI_API_KEY", "max_output_tokens": 400, "temperature": null},
  "judge": {"provider": "offline", "base_url": "", "model": "offline-stand-in"},
  "concurrency": {"openai": 8, "offline": 4},
  "retry_policy": {"max_recoveries_per_slot": 2, "cooldown_s": 30, "phase_allowance": 256},
  "contrasts": ["ownwords(B=|memory|) - memory(concrete,100w)+one-shot [family] [interval above zero]"],
  "bootstrap": {"seed": 20260918, "draws": 100000},
  "memory_import_runs": [],
  "criteria": [{"name": "OwnWords beats the memory",
                "contrast": "ownwords(B=|memory|) - memory(concrete,100w)+one-shot", "interval": "family", "above": 0}]
}
"memory_import_runs": earlier runs whose identical sealed memories are imported instead of written again.
"survey_screener": false for a survey protocol whose conditions show no screener (Table 21; default true)."""


class Command(BaseCommand):
    help = (
        "Create an unsealed protocol from a JSON file (keys: " + ", ".join(REQUIRED + OPTIONAL) + "). "
        "Contrasts are objects {name, terms, family, criterion} or lines in the editor's syntax; criteria are "
        "the JSON rules of experiments.core.criteria, sealed with the protocol. Example:\n" + EXAMPLE
    )

    def add_arguments(self, parser):
        parser.add_argument("json_file")
        parser.add_argument("--project", required=True)
        parser.add_argument("--user", help="recorded as the creator (an owner or analyst of the project)")

    def handle(self, json_file, project, user, **options):
        spec = _read_spec(json_file)
        project_obj = Project.objects.filter(slug=project).first()
        if project_obj is None:
            raise CommandError(f"no project '{project}'")
        creator = member_with_role(project_obj, user, roles=TEXT_READERS) if user else None
        if user and creator is None:
            raise CommandError(f"{user!r} is not an owner or analyst of project '{project}'")
        cohort = Cohort.objects.filter(project=project_obj, name=spec["cohort"]).first()
        if cohort is None:
            raise CommandError(f"no cohort named {spec['cohort']!r} in project '{project}'")
        values = _values(spec)
        problems = _problems(project_obj, cohort, values)
        if problems:
            raise CommandError("protocol not created:\n- " + "\n- ".join(problems))
        protocol = Protocol.objects.create(project=project_obj, cohort=cohort, created_by=creator, **values)
        return (
            f"protocol {protocol.name!r} (id {protocol.pk}) created in project '{project}': "
            f"{len(protocol.conditions)} conditions, {len(protocol.contrasts)} contrasts, not sealed. "
            f"Seal it with: manage.py protocol_seal {protocol.pk}"
        )


def _read_spec(path: str) -> dict:
    spec = read_json_object(path, f"expected a JSON object with {', '.join(REQUIRED)}")
    missing = [key for key in REQUIRED if key not in spec]
    unknown = sorted(set(spec) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown keys {', '.join(unknown)} (allowed: {', '.join(REQUIRED + OPTIONAL)})"] if unknown else [])
        raise CommandError(f"{path}: " + "; ".join(parts))
    return spec


def _contrast(entry):
    """An editor line becomes a contrast object; objects get the optional fields' defaults."""
    if isinstance(entry, str):
        try:
            return parse_contrast_line(entry)
        except ValueError as exc:
            raise CommandError(f"contrast {entry!r}: {exc}") from None
    if isinstance(entry, dict):
        return {"family": False, "criterion": None, **entry}
    return entry


def _values(spec: dict) -> dict:
    contrasts = spec.get("contrasts", [])
    return {
        "name": spec["name"],
        "kind": inferred_kind(spec["conditions"], regrade=False),  # a re-grade is made by regrade_run
        "conditions": spec["conditions"],
        "generator": spec["generator"],
        "judge": spec["judge"],
        "concurrency": spec.get("concurrency", {}),
        "retry_policy": spec.get("retry_policy", {}),
        "contrasts": [_contrast(c) for c in contrasts] if isinstance(contrasts, list) else contrasts,
        "bootstrap": spec.get("bootstrap", {}),
        "memory_import_runs": spec.get("memory_import_runs", []),
        "criteria": spec.get("criteria", []),
        "survey_screener": spec.get("survey_screener", True),
    }


def _problems(project, cohort, values: dict) -> list[str]:
    problems = []
    if not isinstance(values["name"], str) or not values["name"].strip() or len(values["name"]) > 100:
        problems.append("name must be a non-empty string of at most 100 characters")
    elif Protocol.objects.filter(project=project, name=values["name"]).exists():
        problems.append(f"project '{project.slug}' has a protocol named {values['name']!r} already")
    if not isinstance(values["conditions"], list) or not all(isinstance(k, str) for k in values["conditions"]):
        return problems + ["conditions must be a list of condition keys"]
    for role in ("generator", "judge"):
        if not isinstance(values[role], dict):
            return problems + [f"{role} must be an object of model settings"]
        problem = api_key_env_problem(str(values[role].get("api_key_env") or ""))
        if problem:
            problems.append(f"{role} api_key_env: {problem}")
    if not isinstance(values["survey_screener"], bool):
        problems.append("survey_screener must be true or false")
    problems += concurrency_problems(values["concurrency"])
    problems += _retry_problems(values["retry_policy"])
    problems += _bootstrap_problems(values["bootstrap"])
    problems += contrast_problems(values["contrasts"], values["conditions"])
    if not problems:
        # The sealing rules last: they assume the shapes checked above.
        problems += protocol_problems(Protocol(project=project, cohort=cohort, **values))
    return problems


def _retry_problems(policy) -> list[str]:
    if not isinstance(policy, dict):
        return ["retry_policy must be an object"]
    problems = [f"retry_policy: unknown key {key!r} (allowed: {', '.join(DEFAULT_RETRY)})"
                for key in policy if key not in DEFAULT_RETRY]
    for key, value in policy.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            problems.append(f"retry_policy {key}: must be a number ≥ 0")
    return problems


def _bootstrap_problems(bootstrap) -> list[str]:
    if not isinstance(bootstrap, dict):
        return ["bootstrap must be an object {seed, draws}"]
    problems = [f"bootstrap: unknown key {key!r} (allowed: seed, draws)" for key in bootstrap
                if key not in ("seed", "draws")]
    for key in ("seed", "draws"):
        value = bootstrap.get(key, 0 if key == "seed" else 100)
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "seed" else 100):
            problems.append(f"bootstrap {key}: must be a whole number ≥ {0 if key == 'seed' else 100}")
    return problems
