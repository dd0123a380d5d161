"""The public accept page of an invite link: no login needed, nothing shown but the names of the
project and the campaign.

Two forms: a new account (username, password twice, Django's password validators) or an existing
one (username and password). Both are throttled like the login page, by django-axes with the same
counters and limits: the existing-account form signs in through `authenticate`, whose failures
axes counts; a (username, address) pair axes has locked out is refused on either form (HTTP 429)
before anything is checked. "This username is taken" tells whether an account exists, so each such
answer counts as a failed attempt of the invite itself (axes' counters under the name "invite N"),
the form's check and a name taken between that check and the insert alike:
a link holder can ask AXES_FAILURE_LIMIT times from one address, then waits out the same cool-off.
A used, expired, revoked or unknown link answers with what happened and changes nothing.
"""
from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import authenticate, login
from django.contrib.auth.signals import user_login_failed
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from annotations.invites import (
    STATE_MESSAGES, UNKNOWN_MESSAGE, InviteError, OPEN, UsernameTaken, invite_accept, invite_by_token,
    invite_state,
)
from annotations.web.invites.forms import USERNAME_TAKEN, AcceptLoginForm, AcceptNewForm

NEW, EXISTING = "new", "login"
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


def _render(request, context, status=200):
    """Template annotations/invites/accept.html."""
    response = render(request, "annotations/invites/accept.html", context, status=status)
    # The token is in this page's address: no other site is told it. Not "no-referrer": then the
    # browser sends the form with "Origin: null", which Django's CSRF check refuses (403).
    response["Referrer-Policy"] = "same-origin"
    return response


def _locked_out(request, context):
    # This page answers for itself; axes' middleware would otherwise put the login page in its place.
    request.axes_locked_out = False
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    return _render(request, {**context, "locked_out": True, "failure_limit": settings.AXES_FAILURE_LIMIT,
                             "lockout_minutes": minutes}, status=429)


def _count_taken(request, probes) -> bool:
    """One failed attempt of the link (a "this username is taken" answer); True when that locks it."""
    user_login_failed.send(sender=AcceptNewForm, credentials=probes, request=request)
    return getattr(request, "axes_locked_out", False)


@never_cache
@require_http_methods(["GET", "POST"])
def invite_accept_view(request, token):
    invite = invite_by_token(token)
    state = invite_state(invite) if invite is not None else None
    if state != OPEN:
        return _render(request, {"problem": STATE_MESSAGES.get(state, UNKNOWN_MESSAGE)},
                       status=404 if invite is None else 410)
    context = {"project_name": invite.campaign.project.name, "campaign_name": invite.campaign.name,
               "new_form": AcceptNewForm(prefix=NEW), "login_form": AcceptLoginForm(prefix=EXISTING)}
    if request.method == "GET":
        return _render(request, context)
    mode = request.POST.get("mode")
    form = (AcceptNewForm if mode == NEW else AcceptLoginForm)(request.POST, prefix=NEW if mode == NEW else EXISTING)
    context["new_form" if mode == NEW else "login_form"] = form
    username = request.POST.get(f"{NEW if mode == NEW else EXISTING}-username", "")
    probes = {"username": f"invite {invite.pk}"}  # the counter of "taken" answers on this link
    if not AxesProxyHandler.is_allowed(request, {"username": username}) or (
            mode == NEW and not AxesProxyHandler.is_allowed(request, probes)):
        return _locked_out(request, context)
    if not form.is_valid():
        if mode == NEW and form.has_error("username", code=USERNAME_TAKEN) and _count_taken(request, probes):
            return _locked_out(request, context)
        return _render(request, context, status=400)
    data = form.cleaned_data
    if mode == NEW:
        kwargs = {"new_username": data["username"], "new_password": data["password1"]}
    else:
        user = authenticate(request, username=data["username"], password=data["password"])
        if getattr(request, "axes_locked_out", False):
            return _locked_out(request, context)
        if user is None:
            form.add_error(None, "Your username and password didn't match. Please try again.")
            return _render(request, context, status=400)
        kwargs = {"user": user}
    try:
        user, campaign = invite_accept(token=token, path=request.get_full_path(), **kwargs)
    except UsernameTaken as e:  # taken since the form's check: counted like the form's own answer
        if _count_taken(request, probes):
            return _locked_out(request, context)
        return _render(request, {**context, "refusal": str(e)}, status=409)
    except InviteError as e:
        return _render(request, {**context, "refusal": str(e)}, status=409)
    login(request, user, backend=MODEL_BACKEND)
    messages.success(request, f"You now rate {campaign.name}. If no item shows yet, the owner is handing them out.")
    return redirect("rate_page", campaign.project.slug, campaign.pk)
