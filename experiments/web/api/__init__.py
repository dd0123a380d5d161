"""The read-only JSON API for notebooks, at /api/v1/ (django-ninja; ownwords_site/urls.py mounts it).

Every endpoint is a GET behind a personal token (`auth.TokenAuth`, rate limited per token), checks
the role with the helpers of `experiments.access` as the pages do, and pages its lists by cursor
(`paging`). Refusals are JSON: 401 (no, unknown or revoked token), 403 (the role may not), 404 (not a
member, or no such thing), 400 (a bad cursor or parameter), 429 (rate limit, with Retry-After).
The schema is /api/v1/openapi.json and its docs page /api/v1/docs (Swagger UI from ninja's own static
files: the Content-Security-Policy allows no other host); both only for the accounts that may hold a
token (owners and analysts of a project): the schema names judges and grades, which raters must not
read (docs/design.md §2), and nobody else has a use for it.
The campaign endpoints are annotations' (`annotations.web.api`), added where the API is mounted.
"""
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, ValidationError

from experiments.web.api import numbers, text
from experiments.web.api.auth import RateLimited, TokenAuth
from experiments.web.api.tokens_page import may_create_tokens


def token_holders_only(view):
    """The schema and its docs page: signed in, and an owner or analyst of some project (403 else)."""
    @login_required
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not may_create_tokens(request.user):
            raise PermissionDenied("The API's schema is for owners and analysts, who may hold a token")
        return view(request, *args, **kwargs)
    return wrapped


api = NinjaAPI(
    title="OwnWords Lab API", version="1", urls_namespace="api",
    description="Read-only numbers (and, for owners and analysts, participant text) of your projects. "
                "Send 'Authorization: Bearer <token>' (create a token at /account/tokens/). Lists are paged: "
                "pass a page's next_cursor back as cursor until it is null.",
    auth=TokenAuth(), docs_decorator=token_holders_only,
)


def _json(request, status: int, detail, **headers):
    response = api.create_response(request, {"detail": detail}, status=status)
    for name, value in headers.items():
        response[name] = value
    return response


@api.exception_handler(AuthenticationError)
def _unauthorized(request, exc):
    return _json(request, 401, str(exc), **{"WWW-Authenticate": "Bearer"})


@api.exception_handler(RateLimited)
def _rate_limited(request, exc):
    return _json(request, 429, str(exc), **{"Retry-After": str(exc.retry_after)})


@api.exception_handler(PermissionDenied)
def _forbidden(request, exc):
    return _json(request, 403, str(exc) or "Forbidden")


@api.exception_handler(Http404)
def _not_found(request, exc):
    return _json(request, 404, str(exc) or "Not found")


@api.exception_handler(ValidationError)
def _bad_request(request, exc):
    # A parameter out of range or of the wrong type is the client's error, said plainly: 400.
    return _json(request, 400, [{"loc": e.get("loc"), "msg": e.get("msg")} for e in exc.errors])


api.add_router("", numbers.router)
api.add_router("", text.router)
