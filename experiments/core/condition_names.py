"""Short display names of condition keys, for narrow column headers. Pure Python, no Django.

A key says everything ("memory(concrete,100w)+selection(3)"); a header needs a few words. The
short name keeps every part that tells two registered conditions apart and drops the defaults:
the concrete kind and 100 words of a memory, the one-shot workflow, a budget of B = |memory|,
three candidates, and a seed; a length control to another condition's median names that condition
("length≈OwnWords"). Pages show the short name with the key in a tooltip.
"""
from __future__ import annotations

import re

_NAMES = {"ownwords": "OwnWords", "mem0": "Mem0", "memgpt-style": "MemGPT-style"}
_PIECE = re.compile(r"^(?P<name>[a-z0-9-]+)(?:\((?P<args>.*)\))?$")
_MEMORY_BUDGET = re.compile(r"^B=\|memory\((?P<kind>\w+),(?P<words>\d+)w\)\|$")


def _split_top(key: str) -> list[str]:
    """`key` split at the "+" signs outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(key):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "+" and depth == 0:
            parts.append(key[start:i])
            start = i + 1
    return parts + [key[start:]]


def _memory(args: str) -> str:
    kind, _, words = args.partition(",")
    label = "memory" if kind == "concrete" else f"{kind} memory"
    return label if words in ("", "100w") else f"{label} {words}"


def _budget(args: str) -> str:
    if args == "B=|memory|":
        return ""
    if match := _MEMORY_BUDGET.match(args):
        memory = _memory(f"{match['kind']},{match['words']}w")
        return "" if memory == "memory" else f" at |{memory}|"
    return f" {args}" if args else ""


def short_name(key: str) -> str:
    """"memory(concrete,100w)+selection(3)" → "memory+selection"; an unknown shape stays as it is."""
    pieces = []
    for piece in _split_top(key):
        match = _PIECE.match(piece)
        if match is None:
            return key
        name, args = match["name"], match["args"] or ""
        if name == "memory" and args:
            pieces.append(_memory(args))
        elif name == "one-shot":
            continue
        elif name in ("fusion", "selection") and args in ("", "3"):
            pieces.append(name)
        elif name == "wrong-person":
            pieces.append("wrong person")
        elif name == "length" and args.startswith("median:"):  # rewritten to about another's median length
            pieces.append("length≈" + short_name(args.removeprefix("median:")))
        elif args.startswith("B="):
            pieces.append(_NAMES.get(name, name) + _budget(args))
        else:
            pieces.append(_NAMES.get(name, name) + (f" {args}" if args else ""))
    return "+".join(pieces) or key
