"""The site's boundary: what every request must pass before a view (or Django) reads it, and the
header every answer carries (body limits, the Content-Security-Policy, the NUL/overflow input gate).

- `RequestBodyLimit`: a body larger than the route takes is refused with 413 from its
  Content-Length, before anything reads it (the CSRF check reads a POST's whole body, a multipart
  body of any size included). Ordinary pages take `OWNWORDS_MAX_REQUEST_MB`; the two import pages
  take their larger `OWNWORDS_MAX_UPLOAD_MB` / `OWNWORDS_SURVEY_MAX_UPLOAD_MB` and refuse beyond it
  themselves, from the same header, with their own page.
- `QueryInputGate`: input PostgreSQL cannot hold gets a clear 400 before it reaches the database:
  a NUL or a lone surrogate in any GET or POST key or value; a paging or id parameter (or an
  `<int:…>` of the path) that is not a whole number within range.
- `ContentSecurityPolicy`: scripts only from our own files, no inline script, no eval.
"""
from __future__ import annotations

import re

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.utils.html import escape

# PostgreSQL's bigint, the type of every id column (BigAutoField).
BIGINT_MAX = 2**63 - 1
# A page number is multiplied by a page size into an OFFSET (a bigint): 2^31 − 1 pages is room enough.
PAGE_MAX = 2**31 - 1
# Query and form parameters that carry a page number or an id, wherever a view reads them
# (request.GET/POST "page", "run", "cohort", "assignment", "number"): one place knows them.
PAGING_PARAMETERS = frozenset({"page"})
ID_PARAMETERS = frozenset({"run", "cohort", "assignment", "number"})
INTEGER = re.compile(r"[+-]?[0-9]+")
# NUL (PostgreSQL text cannot hold it) and lone surrogates (not encodable as UTF-8).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# The import pages refuse a body over their own limit themselves, from the Content-Length, with
# their page (experiments.web.projects.forms.declared_upload_over): the gate leaves them to it.
OWN_BODY_LIMIT_ROUTES = frozenset({"session_import", "survey_import"})


def refusal(request, status: int, message: str) -> HttpResponse:
    """A short answer that says what was refused and why: JSON to the rating page's script, else HTML."""
    if "application/json" in request.headers.get("Accept", ""):
        return JsonResponse({"error": message}, status=status)
    title = {400: "Bad request", 413: "Request too large"}.get(status, "Refused")
    return HttpResponse(
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title} · OwnWords Lab</title></head>'
        f"<body><main><h1>{title}</h1><p>{escape(message)}</p><p>Nothing was changed.</p></main></body></html>",
        status=status, content_type="text/html; charset=utf-8")


def declared_length(request) -> int:
    value = request.META.get("CONTENT_LENGTH") or "0"
    return int(value) if value.isdigit() else 0


def request_body_limit() -> int:
    """The largest body an ordinary page takes (bytes)."""
    return int(float(settings.OWNWORDS_MAX_REQUEST_MB) * 2**20)


def body_limit_for(request) -> int:
    """The largest body the request's page takes: an import page's upload limit (plus room for the
    form around the files, as the page itself counts it), else `request_body_limit()`."""
    name = request.resolver_match.url_name if request.resolver_match else None
    if name not in OWN_BODY_LIMIT_ROUTES:
        return request_body_limit()
    from experiments.data.import_jobs import upload_limit_bytes
    from experiments.data.survey_import_jobs import survey_upload_limit_bytes
    from experiments.web.projects.forms import UPLOAD_OVERHEAD_BYTES
    files = upload_limit_bytes() if name == "session_import" else survey_upload_limit_bytes()
    return files + UPLOAD_OVERHEAD_BYTES


class RequestBodyLimit:
    """413 from the Content-Length before the body is read (process_view runs before the CSRF
    check, which would read it: keep this above CsrfViewMiddleware)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        declared, limit = declared_length(request), body_limit_for(request)
        if declared <= limit or request.resolver_match.url_name in OWN_BODY_LIMIT_ROUTES:
            return None  # (an import page answers its own 413, saying how to split the file)
        return refusal(request, 413, f"The request is {declared / 2**20:.1f} MB; this page takes at most "
                                     f"{limit / 2**20:.1f} MB.")


def integer_problem(name: str, value: str) -> str | None:
    """Why `value` cannot be the page number or id `name`, or None if it can (or is empty)."""
    value = value.strip()
    if value == "":
        return None
    highest = PAGE_MAX if name in PAGING_PARAMETERS else BIGINT_MAX
    if not INTEGER.fullmatch(value) or len(value) > 20 or abs(int(value)) > highest:
        return f"{name} must be a whole number of at most {highest}, not {value[:40]!r}."
    return None


def input_problem(request, view_kwargs) -> str | None:
    """The first thing in the request PostgreSQL could not hold, in words; None if there is none."""
    # (A NUL in the address matches no slug; a `path:` session id holding one is refused by its page.)
    for name, value in view_kwargs.items():
        if isinstance(value, int) and abs(value) > BIGINT_MAX:
            return f"{name} in the address must be a whole number of at most {BIGINT_MAX}."
    sources = [("query", request.GET)]
    name = request.resolver_match.url_name if request.resolver_match else None
    if request.method == "POST" and name not in OWN_BODY_LIMIT_ROUTES:
        # The import pages' bodies (files up to their upload limits) are read only by the page,
        # after it has checked who is asking; their forms refuse unstorable text themselves.
        sources.append(("form", request.POST))
    for where, params in sources:
        for key, values in params.lists():
            if UNSTORABLE.search(key):
                return f"A {where} parameter's name holds a NUL character or a lone surrogate."
            for value in values:
                if UNSTORABLE.search(value):
                    return f"The {where} parameter {key[:40]!r} holds a NUL character or a lone surrogate."
                if key in PAGING_PARAMETERS or key in ID_PARAMETERS:
                    if (problem := integer_problem(key, value)) is not None:
                        return problem
    return None


class QueryInputGate:
    """400 for input PostgreSQL cannot hold, before any view queries with it (below the body
    limit, so a body is read only once it is known to be small enough)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        problem = input_problem(request, view_kwargs)
        return None if problem is None else refusal(request, 400, problem)


# Scripts: our own static files only (no inline script, no eval; JSON data blocks are not run).
# Styles: our stylesheet, plus the style attributes the templates set (a figure's reserved height)
# and the inline styles plotly writes while it draws.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])


class ContentSecurityPolicy:
    """Every answer carries the policy (an answer that set its own keeps it)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response
