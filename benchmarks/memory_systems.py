"""Cost of Mem0 as deployed (App. H) when base generation is planned: opening the store (mem0ai,
embedded Qdrant, the bundled MiniLM embedder on the CPU), then per session one `add` answered
from a canned journal reply and one `search` per task.

    .venv/bin/python benchmarks/memory_systems.py [--sessions 24] [--memories 8] [--tasks 3]

Needs requirements-mem0.txt. Prints wall and CPU seconds (the machine may be shared: CPU time is
the steadier figure). No Django, no database, no network.
"""
import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.memory_systems.mem0_store import Mem0Store, extraction_request, unavailable_reason


def clocks():
    return time.perf_counter(), time.process_time()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=24)
    parser.add_argument("--memories", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=3)
    args = parser.parse_args()
    if unavailable_reason():
        sys.exit(unavailable_reason())
    with tempfile.TemporaryDirectory() as folder:
        wall, cpu = clocks()
        store = Mem0Store(Path(folder) / "store")
        opened = clocks()
        print(f"open the store: {opened[0] - wall:.1f} s wall, {opened[1] - cpu:.1f} s CPU")
        with store:
            adds, searches = [0.0, 0.0], [0.0, 0.0]
            for s in range(args.sessions):
                record = "\n".join(f"- In session {s} I talked about topic {m}, which matters to me because of reason {m}."
                                   for m in range(40))
                reply = json.dumps({"memory": [{"id": str(m), "text": f"Cares about topic {m} of session {s}"}
                                               for m in range(args.memories)]})
                before = clocks()
                added = store.add(f"s{s}", record, extraction_request(record), reply)
                middle = clocks()
                for t in range(args.tasks):
                    store.rank(f"s{s}", f"What do you think about topic {t}?", top_k=len(added.ids))
                after = clocks()
                adds[0] += middle[0] - before[0]
                adds[1] += middle[1] - before[1]
                searches[0] += after[0] - middle[0]
                searches[1] += after[1] - middle[1]
        n = args.sessions
        print(f"add ({args.memories} memories): {1000 * adds[0] / n:.0f} ms wall, {1000 * adds[1] / n:.0f} ms CPU per session")
        print(f"search: {1000 * searches[0] / (n * args.tasks):.0f} ms wall, "
              f"{1000 * searches[1] / (n * args.tasks):.0f} ms CPU per task")


if __name__ == "__main__":
    main()
