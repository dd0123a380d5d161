"""Forms of the protocol editor and the run page's amendments, and the small parsers they share
with the management commands (planned contrasts, the key-variable check).

A protocol is edited with three forms validated together (`ProtocolEditor`): the protocol's own
fields and one `ModelConfigForm` each for the generator and the judge. The sealing rules
(`sealing.protocol_problems`) run on the assembled, unsaved protocol, so the page shows exactly
the problems that would stop the seal.
"""
from __future__ import annotations

import math
import re

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction

from experiments import llm
from experiments.analysis import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.conditions import CONDITIONS
from experiments.engine import DEFAULT_CONCURRENCY, DEFAULT_RETRY, RunError
from experiments.models import Protocol
from experiments.sealing import protocol_problems

INTERVAL_ABOVE_ZERO = "interval_above_zero"
CRITERIA = (INTERVAL_ABOVE_ZERO,)
FAMILY_MARKER = "[family]"
CRITERION_MARKER = "[interval above zero]"

# --- the NAME of the variable holding an API key, never the key ------------------------------

_ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Prefixes of keys people paste by mistake: OpenAI and compatible, Google, Hugging Face, Groq, xAI.
_KEY_PREFIXES = ("sk-", "sk_", "aiza", "hf_", "gsk_", "xai-", "bearer ")
_LONG_TOKEN_CHARS = 32


def api_key_env_problem(value: str) -> str | None:
    """Why `value` cannot be the name of a key variable, or None when it can.

    The messages never repeat the value: it may be a secret.
    """
    if not value:
        return None
    # Variable names are short and plain; keys are long and mix cases and digits or punctuation.
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value) and any(c.isdigit() for c in value)
    looks_random = len(value) >= _LONG_TOKEN_CHARS and " " not in value and (
        mixed or not _ENV_VAR_NAME.fullmatch(value)
    )
    if value.lower().startswith(_KEY_PREFIXES) or looks_random:
        return (
            "This looks like an API key itself. Enter the NAME of the environment variable that holds "
            "the key (for example OPENAI_API_KEY), never the key: keys are read from the environment "
            "and never stored. What you entered was not saved."
        )
    if not _ENV_VAR_NAME.fullmatch(value):
        return (
            "Not an environment variable name: use letters, digits and _ (for example OPENAI_API_KEY). "
            "What you entered was not saved."
        )
    return None


# --- planned contrasts, one per line ---------------------------------------------------------

_TERM_SEPARATOR = re.compile(r"\s+([+-])\s+")
_COEFFICIENT = re.compile(r"(\d+(?:\.\d+)?)\s*\*\s*(\S.*)")

CONTRAST_SYNTAX_HELP = (
    "One contrast per line: optional “name:”, then condition keys joined by “ - ” or “ + ” "
    "(with spaces: condition keys contain + and -), optionally weighted as “0.5*key”; then "
    "“[family]” for the family (Bonferroni) intervals and “[interval above zero]” for the "
    "prespecified criterion. Example: "
    "ownwords(B=|memory|) - memory(concrete,100w)+one-shot [family] [interval above zero]"
)


def _number(value: float) -> int | float:
    """Whole coefficients stay integers, so the stored JSON reads 1 and -1."""
    return int(value) if float(value).is_integer() else value


def _strip_markers(text: str) -> tuple[str, bool, str | None]:
    family, criterion = False, None
    while True:
        lowered = text.lower()
        if lowered.endswith(FAMILY_MARKER):
            family, text = True, text[: -len(FAMILY_MARKER)].rstrip()
        elif lowered.endswith(CRITERION_MARKER):
            criterion, text = INTERVAL_ABOVE_ZERO, text[: -len(CRITERION_MARKER)].rstrip()
        else:
            return text, family, criterion


def parse_terms(expression: str) -> dict[str, int | float]:
    """'a - b' → {'a': 1, 'b': -1}; '0.5*a + 0.5*b - c' → weights as written."""
    text = expression.strip()
    first_sign = 1
    if text[:1] in "+-":
        first_sign, text = (-1 if text[0] == "-" else 1), text[1:].strip()
    pieces = _TERM_SEPARATOR.split(text)
    signs = [first_sign] + [(-1 if sign == "-" else 1) for sign in pieces[1::2]]
    terms: dict[str, int | float] = {}
    for sign, term in zip(signs, pieces[0::2]):
        term = term.strip()
        coefficient = 1.0
        weighted = _COEFFICIENT.fullmatch(term)
        if weighted:
            coefficient, term = float(weighted.group(1)), weighted.group(2).strip()
        if not term:
            raise ValueError("a term has no condition key")
        if term in terms:
            raise ValueError(f"{term} appears twice")
        terms[term] = _number(sign * coefficient)
    return terms


def format_terms(terms: dict) -> str:
    parts = []
    for index, (key, coefficient) in enumerate(terms.items()):
        magnitude = abs(coefficient)
        weight = "" if magnitude == 1 else f"{magnitude:g}*"
        negative = coefficient < 0
        if index == 0:
            parts.append(f"{'-' if negative else ''}{weight}{key}")
        else:
            parts.append(f"{'-' if negative else '+'} {weight}{key}")
    return " ".join(parts)


def parse_contrast_line(line: str) -> dict:
    """One editor line → {"name", "terms", "family", "criterion"}; ValueError says what is wrong."""
    text, family, criterion = _strip_markers(line.strip())
    if "[" in text or "]" in text:
        raise ValueError(f"unknown marker; use {FAMILY_MARKER} or {CRITERION_MARKER} at the end of the line")
    name = None
    if ":" in text:
        name, text = (part.strip() for part in text.split(":", 1))
        if not name:
            raise ValueError("an empty name before “:”")
    if not text:
        raise ValueError("no condition keys")
    terms = parse_terms(text)
    return {"name": name or format_terms(terms), "terms": terms, "family": family, "criterion": criterion}


def format_contrast(contrast: dict) -> str:
    expression = format_terms(contrast["terms"])
    line = expression if contrast["name"] == expression else f"{contrast['name']}: {expression}"
    if contrast.get("family"):
        line += f" {FAMILY_MARKER}"
    if contrast.get("criterion") == INTERVAL_ABOVE_ZERO:
        line += f" {CRITERION_MARKER}"
    return line


def contrast_problems(contrasts, conditions) -> list[str]:
    """What is wrong with a list of planned contrasts, for a page or a shell; [] when nothing."""
    if not isinstance(contrasts, list):
        return ["contrasts must be a list"]
    problems, names = [], set()
    chosen = set(conditions)
    for number, contrast in enumerate(contrasts, start=1):
        label = f"contrast {number}"
        if not isinstance(contrast, dict) or not isinstance(contrast.get("terms"), dict) or not contrast["terms"]:
            problems.append(f"{label}: needs a name and terms {{condition: coefficient}}")
            continue
        name = contrast.get("name")
        if not isinstance(name, str) or not name.strip():
            problems.append(f"{label}: needs a name")
        elif name in names:
            problems.append(f"{label}: the name {name!r} is used twice")
        else:
            names.add(name)
            label = f"contrast {name!r}"
        unknown_fields = set(contrast) - {"name", "terms", "family", "criterion"}
        if unknown_fields:
            problems.append(f"{label}: unknown fields {', '.join(sorted(unknown_fields))}")
        if not isinstance(contrast.get("family", False), bool):
            problems.append(f"{label}: family must be true or false")
        if contrast.get("criterion") not in (None, *CRITERIA):
            problems.append(f"{label}: criterion must be empty or {INTERVAL_ABOVE_ZERO!r}")
        coefficients = list(contrast["terms"].values())
        if not all(isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) for c in coefficients):
            problems.append(f"{label}: coefficients must be finite numbers")
            continue
        for key in contrast["terms"]:
            if key not in CONDITIONS:
                problems.append(f"{label}: {key} is not a condition key (join terms with “ - ” or “ + ”, "
                                "spaces on both sides: condition keys themselves contain + and -)")
            elif key not in chosen:
                problems.append(f"{label} uses {key}, which is not among the protocol's conditions")
        if abs(sum(coefficients)) > 1e-9:
            problems.append(f"{label}: the coefficients must sum to zero (a paired difference)")
    return problems


# --- concurrency written as one "provider=cap" per line (the management command's JSON uses a dict)

def concurrency_problems(concurrency) -> list[str]:
    if not isinstance(concurrency, dict):
        return ["concurrency must be a mapping {provider: cap}"]
    problems = []
    for provider, cap in concurrency.items():
        if provider not in llm.PROVIDERS:
            problems.append(f"concurrency: unknown provider {provider!r} (one of {', '.join(llm.PROVIDERS)})")
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            problems.append(f"concurrency of {provider}: the in-flight cap must be a whole number ≥ 1")
    return problems


# --- the forms --------------------------------------------------------------------------------

class ModelConfigForm(forms.Form):
    """One generator or judge configuration (llm.ModelConfig) and its provider's in-flight cap."""

    provider = forms.ChoiceField(choices=[(p, p) for p in llm.PROVIDERS])
    base_url = forms.CharField(
        required=False, max_length=500, label="Base URL",
        help_text="e.g. https://api.openai.com/v1 or http://127.0.0.1:8080/v1; empty for offline",
    )
    model = forms.CharField(max_length=200, label="Model id")
    expected_model_version = forms.CharField(
        required=False, max_length=200, help_text="the returned model version must equal this; empty: not checked"
    )
    reasoning = forms.CharField(
        required=False, max_length=50, label="Reasoning / thinking setting",
        help_text="OpenAI reasoning_effort or Gemini thinkingLevel; empty: not sent",
    )
    max_output_tokens = forms.IntegerField(min_value=1, max_value=1_000_000, label="Output-token cap")
    temperature = forms.FloatField(
        required=False, min_value=0, max_value=2, help_text="empty: the service default (not sent)"
    )
    token_param = forms.ChoiceField(choices=[(p, p) for p in llm.TOKEN_PARAMS], label="Token parameter")
    timeout_s = forms.FloatField(min_value=0.1, max_value=3600, label="Timeout (s)")
    api_key_env = forms.CharField(
        required=False, max_length=100, label="Key variable",
        help_text="the NAME of the environment variable holding the key (e.g. OPENAI_API_KEY), never the key; "
        "empty: no credentials (local servers)",
    )
    quota_pattern = forms.CharField(
        required=False, max_length=500, help_text="regular expression over an error body meaning “quota exhausted”"
    )
    concurrency = forms.IntegerField(min_value=1, max_value=1000, label="In-flight cap for this provider")

    def clean_api_key_env(self):
        value = self.cleaned_data["api_key_env"].strip()
        problem = api_key_env_problem(value)
        if problem:
            # A pasted key must not come back in the re-rendered form.
            self.data = self.data.copy()
            self.data[self.add_prefix("api_key_env")] = ""
            raise ValidationError(problem, code="not_a_variable_name")
        return value or None

    def clean_quota_pattern(self):
        value = self.cleaned_data["quota_pattern"].strip()
        try:
            re.compile(value)
        except re.error as exc:
            raise ValidationError(f"not a regular expression: {exc}", code="bad_pattern") from None
        return value or None

    def clean(self):
        data = super().clean()
        base_url = (data.get("base_url") or "").strip()
        if data.get("provider") and data["provider"] != "offline":
            if not base_url:
                self.add_error("base_url", ValidationError("a base URL is needed for this provider", code="required"))
            else:
                try:
                    URLValidator(schemes=["http", "https"])(base_url)
                except ValidationError:
                    self.add_error("base_url", ValidationError("not an http(s) URL", code="bad_url"))
        data["base_url"] = base_url
        return data

    def config(self) -> dict:
        """The llm.ModelConfig fields as stored on the protocol (every field, explicitly)."""
        data = self.cleaned_data
        return {
            "provider": data["provider"],
            "base_url": data["base_url"],
            "model": data["model"].strip(),
            "expected_model_version": data["expected_model_version"].strip() or None,
            "api_key_env": data["api_key_env"],
            "max_output_tokens": data["max_output_tokens"],
            "temperature": data["temperature"],
            "reasoning": data["reasoning"].strip() or None,
            "token_param": data["token_param"],
            "timeout_s": data["timeout_s"],
            "quota_pattern": data["quota_pattern"],
        }


def model_initial(config: dict, concurrency: dict) -> dict:
    defaults = {f: getattr(llm.ModelConfig(provider="offline", base_url="", model=""), f)
                for f in ("max_output_tokens", "token_param", "timeout_s")}
    initial = {**defaults, **{key: value for key, value in config.items() if value is not None}}
    initial["concurrency"] = concurrency.get(config.get("provider"), DEFAULT_CONCURRENCY)
    return initial


OFFLINE_CONFIG = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}


class ProtocolForm(forms.Form):
    name = forms.CharField(max_length=100)
    cohort = forms.ModelChoiceField(queryset=None, empty_label=None)
    conditions = forms.MultipleChoiceField(
        choices=[(key, key) for key in CONDITIONS], widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "choose at least one condition"},
    )
    max_recoveries_per_slot = forms.IntegerField(min_value=0, max_value=10, label="Max recoveries per slot")
    cooldown_s = forms.FloatField(min_value=0, max_value=3600, label="Cooldown (s)")
    phase_allowance = forms.IntegerField(min_value=0, max_value=1_000_000, label="Recovery allowance per phase")
    contrasts = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 5, "cols": 100}),
                                label="Planned contrasts", help_text=CONTRAST_SYNTAX_HELP)
    bootstrap_seed = forms.IntegerField(min_value=0, max_value=2**63 - 1, label="Bootstrap seed")
    bootstrap_draws = forms.IntegerField(min_value=100, max_value=10_000_000, label="Bootstrap draws")

    def __init__(self, *args, project, protocol=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project
        self.protocol = protocol
        self.fields["cohort"].queryset = project.cohorts.all()

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        others = Protocol.objects.filter(project=self.project, name=name)
        if self.protocol is not None:
            others = others.exclude(pk=self.protocol.pk)
        if others.exists():
            raise ValidationError("another protocol of this project has this name", code="duplicate_name")
        return name

    def clean_conditions(self):
        keys = self.cleaned_data["conditions"]
        not_runnable = [key for key in keys if not CONDITIONS[key].runnable]
        if not_runnable:
            raise ValidationError(
                [f"{key} is not runnable yet: {CONDITIONS[key].note}" for key in not_runnable], code="not_runnable"
            )
        # Registry order, so the same choice always gives the same protocol (and seal).
        return [key for key in CONDITIONS if key in keys]

    def clean_contrasts(self):
        contrasts, errors = [], []
        for number, line in enumerate(self.cleaned_data["contrasts"].splitlines(), start=1):
            if not line.strip():
                continue
            try:
                contrasts.append(parse_contrast_line(line))
            except ValueError as exc:
                errors.append(ValidationError(f"line {number}: {exc}", code="bad_contrast"))
        if errors:
            raise ValidationError(errors)
        return contrasts

    def clean(self):
        data = super().clean()
        if "contrasts" in data and "conditions" in data:
            for problem in contrast_problems(data["contrasts"], data["conditions"]):
                self.add_error("contrasts", ValidationError(problem, code="bad_contrast"))
        return data


def protocol_initial(protocol: Protocol | None, project) -> dict:
    if protocol is None:
        return {
            "cohort": project.cohorts.first(),
            **DEFAULT_RETRY,
            "bootstrap_seed": DEFAULT_SEED,
            "bootstrap_draws": DEFAULT_DRAWS,
        }
    retry = {**DEFAULT_RETRY, **protocol.retry_policy}
    return {
        "name": protocol.name,
        "cohort": protocol.cohort,
        "conditions": protocol.conditions,
        **retry,
        "contrasts": "\n".join(format_contrast(c) for c in protocol.contrasts),
        "bootstrap_seed": protocol.bootstrap.get("seed", DEFAULT_SEED),
        "bootstrap_draws": protocol.bootstrap.get("draws", DEFAULT_DRAWS),
    }


class ProtocolEditor:
    """The protocol form and its two model forms, validated and saved together."""

    def __init__(self, data=None, *, project, protocol: Protocol | None = None):
        self.project = project
        self.protocol = protocol
        concurrency = protocol.concurrency if protocol else {}
        self.main = ProtocolForm(data, project=project, protocol=protocol,
                                 initial=protocol_initial(protocol, project))
        self.generator = ModelConfigForm(data, prefix="generator", initial=model_initial(
            protocol.generator if protocol else OFFLINE_CONFIG, concurrency))
        self.judge = ModelConfigForm(data, prefix="judge", initial=model_initial(
            protocol.judge if protocol else OFFLINE_CONFIG, concurrency))

    def is_valid(self) -> bool:
        valid = [form.is_valid() for form in (self.main, self.generator, self.judge)]  # all, for every error
        if not all(valid):
            return False
        generator, judge = self.generator.cleaned_data, self.judge.cleaned_data
        if generator["provider"] == judge["provider"] and generator["concurrency"] != judge["concurrency"]:
            self.main.add_error(None, ValidationError(
                f"generator and judge both use {generator['provider']}: the in-flight cap is per provider, "
                "so give them the same cap", code="cap_conflict"))
            return False
        for problem in protocol_problems(Protocol(**self.values())):
            self.main.add_error(None, ValidationError(problem, code="cannot_seal"))
        return not self.main.errors

    def values(self) -> dict:
        """The protocol's fields from the cleaned forms."""
        data = self.main.cleaned_data
        return {
            "name": data["name"],
            "cohort": data["cohort"],
            "conditions": data["conditions"],
            "generator": self.generator.config(),
            "judge": self.judge.config(),
            "concurrency": {
                self.generator.cleaned_data["provider"]: self.generator.cleaned_data["concurrency"],
                self.judge.cleaned_data["provider"]: self.judge.cleaned_data["concurrency"],
            },
            "retry_policy": {key: data[key] for key in DEFAULT_RETRY},
            "contrasts": data["contrasts"],
            "bootstrap": {"seed": data["bootstrap_seed"], "draws": data["bootstrap_draws"]},
        }

    def save(self, *, user) -> Protocol:
        """Create the protocol, or update it while it is unsealed (RunError once sealed)."""
        if self.protocol is None:
            return Protocol.objects.create(project=self.project, created_by=user, **self.values())
        with transaction.atomic():
            protocol = Protocol.objects.select_for_update().get(pk=self.protocol.pk)
            if protocol.is_sealed():
                raise RunError("the protocol was sealed meanwhile; it is read-only now")
            for field, value in self.values().items():
                setattr(protocol, field, value)
            protocol.save()
            return protocol

    def condition_rows(self) -> list[dict]:
        """Every registry condition for the checkboxes; those not runnable shown disabled."""
        chosen = set(self.main["conditions"].value() or ())
        return [
            {"key": key, "runnable": c.runnable, "note": c.note, "checked": key in chosen}
            for key, c in CONDITIONS.items()
        ]


class ReasonForm(forms.Form):
    """Every amendment carries a reason (paper App. B.2)."""

    reason = forms.CharField(max_length=2000, widget=forms.TextInput(attrs={"size": 60}),
                             error_messages={"required": "give a reason: amendments are recorded with it"})


class ConcurrencyForm(ReasonForm):
    provider = forms.ChoiceField()
    cap = forms.IntegerField(min_value=1, max_value=1000, label="In-flight cap")

    field_order = ["provider", "cap", "reason"]

    def __init__(self, *args, providers, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = [(p, p) for p in providers]
