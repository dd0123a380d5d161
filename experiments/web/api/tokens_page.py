"""The account page of API tokens (/account/tokens/): create one (shown once) and revoke one's own.

Owners and analysts of any project create tokens (`may_create_tokens`); anyone signed in sees and
revokes their own. A token reads only what its user's roles allow, project by project, at each request.
"""
from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from experiments.access import TEXT_READERS
from experiments.data.api_tokens import token_create, token_revoke
from experiments.models import ApiToken, Membership


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="what the token is for, e.g. “laptop notebook”")


def may_create_tokens(user) -> bool:
    """Whether `user` is an owner or analyst of some project (the roles the API is for)."""
    return Membership.objects.filter(user=user, role__in=TEXT_READERS).exists()


@login_required
def api_tokens(request):
    """Template experiments/account/api_tokens.html: the user's tokens, and a new one's value once."""
    allowed = may_create_tokens(request.user)
    form, created = TokenForm(), None
    if request.method == "POST":
        if not allowed:
            raise PermissionDenied("Only owners and analysts of a project create API tokens")
        form = TokenForm(request.POST)
        if form.is_valid():
            row, token = token_create(request.user, form.cleaned_data["name"])
            created = {"row": row, "token": token}
            form = TokenForm()
    tokens = ApiToken.objects.filter(user=request.user)
    response = render(request, "experiments/account/api_tokens.html", {
        "tokens": tokens, "form": form, "created": created, "allowed": allowed})
    if created:
        response["Cache-Control"] = "no-store"  # the token's only showing stays in no cache
    return response


@login_required
@require_POST
def api_token_revoke(request, pk):
    if token_revoke(request.user, pk):
        messages.success(request, "The token is revoked: requests with it now answer 401.")
    return redirect("api_tokens")
