"""Pages for creating a project, its members and its settings (owners), and its audit log.

Each view starts with `membership_for`; a member id of another project is not found (404),
like the project itself. Every change goes through `experiments.data.members`, which keeps an owner.
"""
from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from urllib.parse import urlencode

from experiments.access import OWNERS, PROJECT_CREATION_REFUSAL, may_create_projects, membership_for
from experiments.data.members import MembershipError, member_add, member_remove, member_set_role, project_create
from experiments.models import AuditEntry, Membership, Role
from experiments.web.form_errors import errors_text
from experiments.web.text_input import StorableTextMixin

AUDIT_ENTRIES_PER_PAGE = 50


class ProjectForm(StorableTextMixin, forms.Form):
    name = forms.CharField(max_length=200)
    slug = forms.SlugField(max_length=64, label="Short name",
                           help_text="letters, digits, - and _; it names the project in addresses and commands")


class MemberAddForm(StorableTextMixin, forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)  # the least a member can see


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class SpendingForm(forms.Form):
    analysts_may_spend = forms.BooleanField(
        required=False, label="Analysts may spend",
        help_text="analysts may seal, start, pause, resume and amend runs that call a paid provider",
    )


@login_required
def project_create_view(request):
    """Template experiments/projects/project_form.html: any signed-in user creates a project and owns it."""
    if not may_create_projects(request.user):
        raise PermissionDenied(PROJECT_CREATION_REFUSAL)
    form = ProjectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            project = project_create(user=request.user, path=request.get_full_path(), **form.cleaned_data)
        except MembershipError as exc:
            form.add_error("slug", str(exc))
        else:
            messages.success(request, f"Project {project.name} created; you are its owner.")
            return redirect("project_detail", slug=project.slug)
    return render(request, "experiments/projects/project_form.html", {"form": form})


@login_required
def project_members(request, slug):
    """Template experiments/projects/project_members.html: members, roles and the spending setting (owners)."""
    membership = membership_for(request, slug, roles=OWNERS)
    project = membership.project
    members = project.memberships.select_related("user").order_by("user__username")
    return render(request, "experiments/projects/project_members.html", {
        "membership": membership, "project": project,
        "members": [(m, _role_form(m)) for m in members],
        "add_form": MemberAddForm(),
    })


def _role_form(member: Membership) -> RoleForm:
    form = RoleForm(initial={"role": member.role}, auto_id=f"member-{member.pk}-%s")
    form.fields["role"].widget.attrs["aria-label"] = f"Role of {member.user.get_username()}"
    return form


def _member(membership, member_pk) -> Membership:
    member = (Membership.objects.select_related("user")
              .filter(project=membership.project, pk=member_pk).first())
    if member is None:
        raise Http404("No such member")
    return member


@login_required
@require_POST
def member_add_view(request, slug):
    membership = membership_for(request, slug, roles=OWNERS)
    form = MemberAddForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Nobody was added: {errors_text(form)}")
    else:
        try:
            added = member_add(project=membership.project, actor=request.user, path=request.get_full_path(),
                               **form.cleaned_data)
        except MembershipError as exc:
            messages.error(request, f"Nobody was added: {exc}")
        else:
            messages.success(request, f"{added.user.get_username()} is now {added.get_role_display().lower()}.")
    return redirect("project_members", slug=slug)


@login_required
@require_POST
def member_role_view(request, slug, member_pk):
    membership = membership_for(request, slug, roles=OWNERS)
    member = _member(membership, member_pk)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"The role was not changed: {errors_text(form)}")
        return redirect("project_members", slug=slug)
    try:
        member_set_role(membership=member, role=form.cleaned_data["role"], actor=request.user,
                        path=request.get_full_path())
    except MembershipError as exc:
        messages.error(request, f"The role was not changed: {exc}")
        return redirect("project_members", slug=slug)
    messages.success(request, f"{member.user.get_username()} is now {member.get_role_display().lower()}.")
    if member.pk == membership.pk and member.role != Role.OWNER:
        return redirect("project_detail", slug=slug)  # no longer an owner: this page is closed to them
    return redirect("project_members", slug=slug)


@login_required
@require_http_methods(["GET", "POST"])
def member_remove_view(request, slug, member_pk):
    """Template experiments/projects/member_remove.html: removing a member asks first (a page, so it
    works without JavaScript); only a POST with confirm=yes removes, any other POST comes back here."""
    membership = membership_for(request, slug, roles=OWNERS)
    member = _member(membership, member_pk)
    if request.method == "GET":
        return render(request, "experiments/projects/member_remove.html", {
            "membership": membership, "project": membership.project, "member": member,
            "only_owner": member.role == Role.OWNER
            and not membership.project.memberships.filter(role=Role.OWNER).exclude(pk=member.pk).exists(),
        })
    if request.POST.get("confirm") != "yes":
        return redirect("member_remove", slug=slug, member_pk=member.pk)
    try:
        member_remove(membership=member, actor=request.user, path=request.get_full_path())
    except MembershipError as exc:
        messages.error(request, f"Nobody was removed: {exc}")
        return redirect("project_members", slug=slug)
    messages.success(request, f"{member.user.get_username()} is no longer a member.")
    if member.pk == membership.pk:
        return redirect("project_list")
    return redirect("project_members", slug=slug)


@login_required
@require_POST
def project_spending_view(request, slug):
    membership = membership_for(request, slug, roles=OWNERS)
    project = membership.project
    form = SpendingForm(request.POST)
    form.is_valid()  # a checkbox: absent means off, any value means on
    project.analysts_may_spend = form.cleaned_data["analysts_may_spend"]
    project.save(update_fields=["analysts_may_spend"])
    messages.success(request, "Analysts may now seal, start, pause and resume runs that call a paid provider."
                     if project.analysts_may_spend else
                     "Only owners may now seal, start, pause and resume runs that call a paid provider.")
    return redirect("project_members", slug=slug)


@login_required
def audit_log(request, slug):
    """Template experiments/projects/audit_log.html: who opened which text and exported what (owners),
    newest first, filtered by user and kind in the query string."""
    membership = membership_for(request, slug, roles=OWNERS)
    project = membership.project
    entries = AuditEntry.objects.filter(project=project)
    user, kind = request.GET.get("user", "").strip(), request.GET.get("kind", "")
    if user:
        entries = entries.filter(username=user)
    if kind in AuditEntry.Kind.values:
        entries = entries.filter(kind=kind)
    else:
        kind = ""
    filters = {key: value for key, value in (("user", user), ("kind", kind)) if value}
    return render(request, "experiments/projects/audit_log.html", {
        "membership": membership, "project": project,
        "page": Paginator(entries.order_by("-at", "-pk"), AUDIT_ENTRIES_PER_PAGE).get_page(request.GET.get("page")),
        "page_query": urlencode(filters) + "&" if filters else "",
        "user_filter": user, "kind_filter": kind, "kinds": AuditEntry.Kind.choices,
        "usernames": (project.memberships.order_by("user__username").values_list("user__username", flat=True)),
    })
