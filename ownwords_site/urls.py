"""The site's URLs: login, admin, the RQ dashboard (superusers only), the two apps and their JSON API."""
from functools import wraps

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.urls import include, path
from django_rq.urls import get_admin_urlpatterns, get_api_urlpatterns

from annotations.web.api import router as campaigns_api
from experiments.web.api import api


def superuser_required(view):
    """Anonymous: to the login page; signed in but not a superuser: 403.

    The RQ dashboard shows every queued job's arguments (project, run and slot ids, anything a
    job was given), so a staff user who administers accounts must not see it.
    """
    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not request.user.is_superuser:
            raise PermissionDenied("the job dashboard is for superusers")
        return view(request, *args, **kwargs)
    return guarded


def superusers_only(patterns):
    # django-rq's own views check only is_staff (its statistics accept a token instead):
    # every one of them is wrapped.
    for pattern in patterns:
        pattern.callback = superuser_required(pattern.callback)
    return patterns


rq_dashboard = superusers_only(get_api_urlpatterns() + get_admin_urlpatterns())
api.add_router("", campaigns_api)  # annotations stands on experiments: its endpoints join the API here

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("django-rq/", include((rq_dashboard, "django_rq"))),
    path("", include("experiments.urls")),
    path("", include("annotations.urls")),
    path("api/v1/", api.urls),
]
