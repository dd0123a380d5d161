"""The one canonical JSON form of everything hashed or sent: sorted keys, compact
separators, UTF-8 as is. The same value always gives the same text. Pure Python."""
import json


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
