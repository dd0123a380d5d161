"""The one canonical JSON form of everything hashed or sent: sorted keys, compact
separators, UTF-8 as is. The same value always gives the same text. Pure Python."""
import hashlib
import json


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_text(text: str) -> str:
    """The hex sha256 of a text's UTF-8 bytes: answers, task lists, inputs of cached results."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
