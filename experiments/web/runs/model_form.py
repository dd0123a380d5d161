"""The generator's or judge's settings on the protocol editor and the re-grade form (`ModelConfigForm`).

An endpoint is chosen from the administrator's list (`execution.endpoints`) and, when the key
travels, one of the key variables that endpoint allows: the form refuses any other name, and
never shows a refused value again (it may be a pasted key).
"""
from __future__ import annotations

import re

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.views.decorators.debug import sensitive_variables

from experiments.core.llm import wire
from experiments.core.llm.wire import api_key_env_problem
from experiments.execution import endpoints
from experiments.execution.policy import DEFAULT_CONCURRENCY
from experiments.web.bounded_input import BoundedIntegerField
from experiments.web.text_input import StorableTextMixin


class ModelConfigForm(StorableTextMixin, forms.Form):
    """One generator or judge configuration (wire.ModelConfig) and its provider's in-flight cap."""

    provider = forms.ChoiceField(choices=[(p, p) for p in wire.PROVIDERS])
    endpoint = forms.ChoiceField(
        required=False, label="Endpoint",
        help_text="the services this server's administrator allows; nothing else is ever called",
    )
    base_url = forms.CharField(
        required=False, max_length=500, label="Base URL",
        help_text="only for an endpoint that admits a range of URLs (e.g. local servers); "
        "otherwise the endpoint's own URL is used",
    )
    model = forms.CharField(max_length=200, label="Model id")
    expected_model_version = forms.CharField(
        required=False, max_length=200, help_text="the returned model version must equal this; empty: not checked"
    )
    reasoning = forms.CharField(
        required=False, max_length=50, label="Reasoning / thinking setting",
        help_text="OpenAI reasoning_effort or Gemini thinkingLevel; empty: not sent",
    )
    max_output_tokens = BoundedIntegerField(min_value=1, max_value=1_000_000, label="Output-token cap")
    temperature = forms.FloatField(
        required=False, min_value=0, max_value=2, help_text="empty: the service default (not sent)"
    )
    token_param = forms.ChoiceField(choices=[(p, p) for p in wire.TOKEN_PARAMS], label="Token parameter")
    timeout_s = forms.FloatField(min_value=0.1, max_value=3600, label="Timeout (s)")
    api_key_env = forms.CharField(
        required=False, max_length=100, label="Key variable",
        help_text="the NAME of the environment variable holding the key (e.g. OPENAI_API_KEY), never the key: "
        "one of those the chosen endpoint allows (listed with it); empty: no credentials (local servers)",
    )
    quota_pattern = forms.CharField(
        required=False, max_length=500, help_text="regular expression over an error body meaning “quota exhausted”"
    )
    concurrency = BoundedIntegerField(min_value=1, max_value=1000, label="In-flight cap for this provider")
    structured_output = forms.BooleanField(
        required=False, label="Structured output",
        help_text="judge only: the service is asked for the JSON object {score, rationale} "
        "(OpenAI-compatible response_format json_schema, Gemini responseSchema)",
    )
    structured_format = forms.ChoiceField(
        required=False, label="Structured output form", initial="json_schema",
        choices=[("json_schema", "JSON schema (OpenAI, vLLM, SGLang; Gemini's only form)"),
                 ("json_object", "JSON object (JSON mode: llama.cpp's server)")],
        help_text="OpenAI-compatible servers only; a server that answers the first judge call with HTTP 500 "
        "may not take the JSON schema form",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Read at each form, so the page follows the administrator's list as it is now.
        self.fields["endpoint"].choices = [("", "— by base URL —"), *endpoints.endpoint_choices()]

    @sensitive_variables("value", "problem")
    def clean_api_key_env(self):
        value = self.cleaned_data["api_key_env"].strip()
        problem = api_key_env_problem(value)
        if problem:
            self._forget_key()
            raise ValidationError(problem, code="not_a_variable_name")
        return value or None

    def _forget_key(self):
        # A refused value may be a pasted key: it must not come back in the re-rendered form.
        self.data = self.data.copy()
        self.data[self.add_prefix("api_key_env")] = ""

    def clean_quota_pattern(self):
        value = self.cleaned_data["quota_pattern"].strip()
        try:
            re.compile(value)
        except re.error as exc:
            raise ValidationError(f"not a regular expression: {exc}", code="bad_pattern") from None
        return value or None

    @sensitive_variables("data")
    def clean(self):
        data = super().clean()
        base_url = (data.get("base_url") or "").strip()
        provider, chosen = data.get("provider"), endpoints.endpoint_by_name(data.get("endpoint") or "")
        if chosen is not None and chosen.provider not in (None, provider) and provider:
            self.add_error("endpoint", ValidationError(
                f"the endpoint {chosen.name} is for provider {chosen.provider}, not {provider}", code="wrong_provider"))
        elif chosen is not None and chosen.base_url is not None:
            if base_url and base_url.rstrip("/") != chosen.base_url.rstrip("/"):
                self.add_error("base_url", ValidationError(
                    f"the endpoint {chosen.name} has its own URL ({chosen.base_url}): leave the base URL empty",
                    code="endpoint_url"))
            base_url = chosen.base_url
        elif provider and provider != "offline":
            # Whether the URL is one the administrator allows is a sealing rule
            # (sealing.protocol_problems), which the editor shows with the other problems.
            if not base_url:
                needed = (f"the endpoint {chosen.name} admits URLs beginning {chosen.url_prefix}: give one"
                          if chosen is not None else "choose an endpoint: a base URL is needed for this provider")
                self.add_error("base_url", ValidationError(needed, code="required"))
            else:
                try:
                    URLValidator(schemes=["http", "https"])(base_url)
                except ValidationError:
                    self.add_error("base_url", ValidationError("not an http(s) URL", code="bad_url"))
                else:
                    if chosen is not None and not chosen.admits(provider, base_url):
                        self.add_error("base_url", ValidationError(
                            f"the endpoint {chosen.name} admits only URLs beginning {chosen.url_prefix}",
                            code="endpoint_url"))
        data["base_url"] = base_url
        self._check_key_variable(data.get("api_key_env"), provider, base_url, chosen)
        return data

    @sensitive_variables("name")
    def _check_key_variable(self, name, provider, base_url, chosen):
        """Only a variable the endpoint allows may be named: the administrator's list,
        not the form, says which of the server's environment variables may travel where."""
        if not name or not provider or self.has_error("endpoint") or self.has_error("base_url"):
            return
        if chosen is not None:
            if chosen.allows_key(name):
                return
            message = (f"the endpoint {chosen.name} allows only these key variables: {chosen.keys_text()}; "
                       "any other is never read. What you entered was not saved.")
        elif endpoints.endpoint_for(provider, base_url, name) is not None or not endpoints.admitting_endpoints(
                provider, base_url):
            return  # allowed, or an address outside the list: a sealing problem, shown with the others
        else:
            message = endpoints.key_refusal_text(provider, base_url) + ". What you entered was not saved."
        self._forget_key()
        self.add_error("api_key_env", ValidationError(message, code="key_not_allowed"))

    def config(self) -> dict:
        """The wire.ModelConfig fields as stored on the protocol (every field explicitly, but
        structured_output only when set, and its form only when not the default: a protocol
        without them seals as it always did)."""
        data = self.cleaned_data
        structured = {"structured_output": True} if data.get("structured_output") else {}
        if structured and data.get("structured_format") == "json_object":  # the default form is not stored
            structured["structured_format"] = "json_object"
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
            **structured,
        }


def model_initial(config: dict, concurrency: dict) -> dict:
    defaults = {f: getattr(wire.ModelConfig(provider="offline", base_url="", model=""), f)
                for f in ("max_output_tokens", "token_param", "timeout_s")}
    initial = {**defaults, **{key: value for key, value in config.items() if value is not None}}
    initial["concurrency"] = concurrency.get(config.get("provider"), DEFAULT_CONCURRENCY)
    endpoint = endpoints.endpoint_for(config.get("provider", ""), config.get("base_url") or "")
    if endpoint is not None:
        initial["endpoint"] = endpoint.name
    return initial


OFFLINE_CONFIG = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
