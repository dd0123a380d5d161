"""Cursor pages for every list of the API: stable order by a key, an opaque cursor after the last one.

The cursor is the URL-safe base64 (unpadded) of the last key sent, as decimal digits: the next page
starts after it, so rows added meanwhile never shift a page (a row is never sent twice, none is
skipped). Querysets are keyed by primary key; computed lists (the numeric export, the contrasts)
by the row's position, 1-based. A cursor that is not such a value is a 400, never a server error.

A page is sent as JSON written here (`page_response`): the endpoints' response schemas describe it in
the OpenAPI schema, but validating 500 rows through pydantic on every request would cost more than the
query (benchmarks/api_pages.py); the rows are the `.values()` the schemas name, nothing more.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Optional

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse
from ninja import Field, Schema
from ninja.errors import HttpError
from pydantic import create_model

DEFAULT_LIMIT = 500
MAX_LIMIT = 5000
# PostgreSQL's bigint, the type of every id column.
BIGINT_MAX = 2**63 - 1
_CURSOR = re.compile(r"[A-Za-z0-9_-]{1,32}")


class PageParams(Schema):
    cursor: Optional[str] = Field(None, max_length=64, description="next_cursor of the previous page; none: the first")
    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description=f"rows per page (at most {MAX_LIMIT})")


def page_schema(item: type, name: str) -> type:
    """The response of a list: its rows, the cursor of the next page (null on the last) and the limit used."""
    return create_model(name, __base__=Schema, items=(list[item], ...), next_cursor=(Optional[str], None),
                        limit=(int, ...))


def encode_cursor(key: int) -> str:
    return base64.urlsafe_b64encode(str(int(key)).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> int:
    """The key after which a page starts (0: from the start); HttpError 400 for anything else."""
    if cursor is None or cursor == "":
        return 0
    bad = HttpError(400, "invalid cursor: pass back the next_cursor of a previous page, unchanged")
    if not _CURSOR.fullmatch(cursor):
        raise bad
    try:
        digits = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        raise bad from None
    if not digits.isdigit() or not digits.isascii() or len(digits) > 19 or int(digits) > BIGINT_MAX:
        raise bad
    return int(digits)


def queryset_page(queryset, page: PageParams, row=lambda r: r) -> dict[str, Any]:
    """A page of `queryset` (of dicts with "id", e.g. `.values(...)`) after the cursor, in primary-key order."""
    after = decode_cursor(page.cursor)
    return keyed_page(list(queryset.filter(pk__gt=after).order_by("pk")[:page.limit + 1]), page, row)


def keyed_page(found: list[dict], page: PageParams, row=lambda r: r) -> dict[str, Any]:
    """The page of rows `found` after the cursor, by "id": at most `page.limit` + 1 of them (one more
    than a page says whether another page follows)."""
    more = len(found) > page.limit
    found = found[:page.limit]
    return {"items": [row(r) for r in found], "limit": page.limit,
            "next_cursor": encode_cursor(found[-1]["id"]) if more else None}


def list_page(rows: list, page: PageParams) -> dict[str, Any]:
    """A page of a computed list (stable order) after the cursor; each row gets its position as "row"."""
    after = decode_cursor(page.cursor)
    chosen = rows[after:after + page.limit]
    end = after + len(chosen)
    return {"items": [{"row": after + i + 1, **r} for i, r in enumerate(chosen)], "limit": page.limit,
            "next_cursor": encode_cursor(end) if end < len(rows) else None}


def page_response(body: dict[str, Any]) -> HttpResponse:
    """A page as JSON (dates in ISO 8601), sent as it is: ninja passes a response through unvalidated."""
    return HttpResponse(json.dumps(body, cls=DjangoJSONEncoder, ensure_ascii=False, separators=(",", ":")),
                        content_type="application/json; charset=utf-8")
