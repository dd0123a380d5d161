"""Login rate limiting with django-axes: who counts as one client, and the page a locked-out login sees.

After `AXES_FAILURE_LIMIT` failed logins for one user name from one address, that pair is locked
out for `AXES_COOLOFF_TIME`; the login page says so plainly (HTTP 429) instead of repeating "did
not match". Logins outside a web request (a shell's `authenticate(username=..., password=...)`,
`bin/demo`'s checks) have no address and are not counted: they are not what an attacker reaches.
"""
from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.shortcuts import render


class WebLoginRateLimit(AxesStandaloneBackend):
    """Axes' gate for web logins; a login without a request (a shell, a command) passes through."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def client_ip(request) -> str | None:
    """The client's address: REMOTE_ADDR, or the entry our own proxies added to X-Forwarded-For.

    With `TRUSTED_PROXY_COUNT` = n the n-th address from the right is the one our first proxy saw;
    anything to its left was written by the client and is never believed.
    """
    count = settings.TRUSTED_PROXY_COUNT
    if count > 0:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= count:
            return forwarded[-count]
    return request.META.get("REMOTE_ADDR")


def locked_out_page(request, original_response=None, credentials=None):
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    return render(request, "registration/login.html", {
        "form": AuthenticationForm(request),
        "next": request.POST.get("next", request.GET.get("next", "")),
        "locked_out": True,
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "lockout_minutes": minutes,
    }, status=429)
