"""Invite tokens, completion codes and the bulk-invite CSV: pure functions, no Django.

An invite link carries `secrets.token_urlsafe(32)`; only its sha256 is stored. A completion code
is HMAC-SHA256(key, "campaign:rater") cut to 10 characters: the same for a (campaign, rater) every
time, checkable by whoever holds the key, and not guessable from another rater's code.
"""
from __future__ import annotations

import csv
import hashlib
import hmac
import io
import secrets
from typing import Callable

COMPLETION_CODE_CHARS = 10
MAX_BULK_ROWS = 500
EMAIL_HEADERS = frozenset({"email", "e-mail", "mail", "email address", "e-mail address"})


def token_new() -> str:
    """A fresh invite token: 32 random bytes, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def token_sha256(token: str) -> str:
    """What is stored for a token: its sha256, hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def completion_code(key: bytes, campaign_id: int, rater_id: int) -> str:
    """HMAC-SHA256(key, "<campaign id>:<rater id>"), hex, upper case, first 10 characters."""
    digest = hmac.new(key, f"{int(campaign_id)}:{int(rater_id)}".encode(), hashlib.sha256).hexdigest()
    return digest[:COMPLETION_CODE_CHARS].upper()


def email_rows(text: str, is_email: Callable[[str], bool]) -> tuple[list[str], list[str]]:
    """(addresses, problems) of a one-column CSV of e-mail addresses, header optional.

    A problem names its row (1-based, as a spreadsheet counts): more than one column, not an
    address, an address twice. Blank rows are skipped. With any problem the caller makes nothing.
    """
    addresses, problems, seen = [], [], {}
    rows = list(csv.reader(io.StringIO(text)))
    for number, row in enumerate(rows, start=1):
        cells = [cell.strip() for cell in row]
        while cells and not cells[-1]:
            cells.pop()
        if not cells:
            continue
        if number == 1 and len(cells) == 1 and cells[0].lower() in EMAIL_HEADERS:
            continue  # the optional header
        if len(cells) > 1:
            problems.append(f"row {number}: one column (an e-mail address) expected, found {len(cells)}")
            continue
        address = cells[0]
        if not is_email(address):
            problems.append(f"row {number}: {address[:80]!r} is not an e-mail address")
        elif address.lower() in seen:
            problems.append(f"row {number}: {address} is listed already (row {seen[address.lower()]})")
        else:
            seen[address.lower()] = number
            addresses.append(address)
    if not addresses and not problems:
        problems.append("the file holds no e-mail address")
    if len(addresses) > MAX_BULK_ROWS:
        problems.append(f"at most {MAX_BULK_ROWS} addresses per file; this one has {len(addresses)}")
    return addresses, problems
