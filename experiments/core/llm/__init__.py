"""All LLM traffic of OwnWords Lab: the wire format (`wire`), one attempt (`client.send`), the offline stand-in (`offline`).

Re-exports for notebooks and tests; code inside the project imports the defining module.
"""
from experiments.core.llm.client import send
from experiments.core.llm.offline import OFFLINE_LABEL, OFFLINE_MODEL_VERSION
from experiments.core.llm.wire import (
    PROVIDERS, RETRYABLE_STATUSES, TOKEN_PARAMS, ModelConfig, Outcome, OutcomeKind, PreparedRequest, Usage,
    api_key_env_problem, build_request, concurrency_problems,
)

__all__ = [
    "OFFLINE_LABEL", "OFFLINE_MODEL_VERSION", "PROVIDERS", "RETRYABLE_STATUSES", "TOKEN_PARAMS",
    "ModelConfig", "Outcome", "OutcomeKind", "PreparedRequest", "Usage",
    "api_key_env_problem", "build_request", "concurrency_problems", "send",
]
