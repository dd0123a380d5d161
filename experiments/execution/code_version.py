"""The code version a seal records (paper App. B.2) and every stored seal-check hash is bound to
(`kind_table.checked_sha256`): a hash computed by other code is never read as current."""
from __future__ import annotations

import functools
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """The git commit this process runs (with "+dirty" for uncommitted changes)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                                check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "ownwords-lab (no git checkout)"
    return commit + ("+dirty" if dirty else "")
