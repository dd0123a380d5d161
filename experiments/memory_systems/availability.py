"""Whether a condition's memory system can run on this machine: the sentence pages and runs show when not."""
from __future__ import annotations

from experiments.core.conditions import DENSE, MEM0, Condition


def condition_unavailable(condition: Condition) -> str | None:
    """Why `condition` cannot run here (its optional dependencies are missing), or None."""
    if condition.evidence == MEM0:
        from experiments.memory_systems.mem0_store import unavailable_reason
        return unavailable_reason()
    if condition.evidence == DENSE:
        from experiments.memory_systems.dense_embedder import unavailable_reason as dense_unavailable
        return dense_unavailable()
    return None
