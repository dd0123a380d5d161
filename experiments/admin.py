from django import forms
from django.contrib import admin

from experiments import models
from experiments.data.audit_log import AuditedTextAdmin, Kind
from experiments.execution.endpoints import OFFLINE, configured_endpoints


class MembershipInline(admin.TabularInline):
    model = models.Membership
    extra = 1


@admin.register(models.Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    inlines = [MembershipInline]


@admin.register(models.Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["project", "user", "role"]
    list_filter = ["role", "project"]


@admin.register(models.Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["key", "project"]
    list_filter = ["project"]


@admin.register(models.Person)
class PersonAdmin(admin.ModelAdmin):
    list_display = ["label", "project"]
    list_filter = ["project"]
    search_fields = ["label"]


class ScreenerItemInline(admin.TabularInline):
    model = models.ScreenerItem
    extra = 0


class TurnInline(admin.TabularInline):
    model = models.Turn
    extra = 0


@admin.register(models.Session)
class SessionAdmin(AuditedTextAdmin, admin.ModelAdmin):
    # Every admin view of participant text is audited: the change view shows the turns.
    list_display = ["external_id", "project", "study", "person", "source_format", "imported_at"]
    list_filter = ["project", "source_format"]
    search_fields = ["external_id"]
    list_select_related = ["project", "study", "person"]
    inlines = [ScreenerItemInline, TurnInline]


@admin.register(models.Turn)
class TurnAdmin(AuditedTextAdmin, admin.ModelAdmin):
    audit_project = "session__project"
    list_display = ["session", "index", "speaker"]
    list_select_related = ["session"]
    raw_id_fields = ["session"]


@admin.register(models.ScreenerItem)
class ScreenerItemAdmin(AuditedTextAdmin, admin.ModelAdmin):
    audit_project = "session__project"
    list_display = ["session", "index", "question"]
    raw_id_fields = ["session"]


@admin.register(models.TaskSet)
class TaskSetAdmin(admin.ModelAdmin):
    list_display = ["project", "min_pairs", "min_targets", "max_targets", "derived_at"]


@admin.register(models.Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["session", "position", "cut", "record_cut", "task_set"]
    list_select_related = ["session", "task_set"]
    raw_id_fields = ["session", "question_turn", "answer_turn"]


class CohortTaskInline(admin.TabularInline):
    model = models.CohortTask
    extra = 0
    raw_id_fields = ["task"]

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(models.Cohort)
class CohortAdmin(admin.ModelAdmin):
    """Read-only: cohorts are drawn by the draw command or page, never edited."""

    list_display = ["name", "project", "seed", "requested_size", "task_list_sha256", "created_at"]
    inlines = [CohortTaskInline]

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


@admin.register(models.CohortTask)
class CohortTaskAdmin(AuditedTextAdmin, admin.ModelAdmin):
    audit_project, audit_kind = "cohort__project", Kind.TASK  # it holds the question's text
    list_display = ["cohort", "position", "task"]
    raw_id_fields = ["task"]

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    """Protocols, runs and the journal are written by the engine and its recorded amendments only:
    the admin shows them and never changes them (a change would bypass the seal)."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(models.Protocol)
class ProtocolAdmin(ReadOnlyAdmin):
    list_display = ["name", "project", "cohort", "sealed_at", "created_at"]
    list_filter = ["project"]
    list_select_related = ["project", "cohort"]


@admin.register(models.Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ["pk", "protocol", "status", "phase", "circuit_open", "created_at", "finished_at"]
    list_filter = ["status", "phase"]
    list_select_related = ["protocol"]


@admin.register(models.Amendment)
class AmendmentAdmin(ReadOnlyAdmin):
    list_display = ["run", "kind", "created_by", "created_at"]
    list_filter = ["kind"]


@admin.register(models.AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    """An audit log that an administrator could edit would prove nothing."""
    list_display = ["at", "project", "username", "kind", "target"]
    list_filter = ["kind", "project"]
    search_fields = ["username", "target"]


@admin.register(models.Mem0Extraction)
class Mem0ExtractionAdmin(AuditedTextAdmin, ReadOnlyAdmin):
    """Mem0's extractions are journaled outcomes of a run: shown, never edited."""
    audit_project, audit_kind = "run__protocol__project", Kind.TASK  # memories drawn from a transcript
    list_display = ["run", "session", "outcome", "slot"]
    list_filter = ["outcome"]
    list_select_related = ["run", "session"]


@admin.register(models.SurveyStudy)
class SurveyStudyAdmin(ReadOnlyAdmin):
    """A survey import is whole or not at all (the import page): the admin only shows it."""
    list_display = ["name", "project", "synthetic", "rows_read", "imported_at", "imported_by"]
    list_filter = ["project", "synthetic"]


@admin.register(models.SurveyExclusion)
class SurveyExclusionAdmin(AuditedTextAdmin, ReadOnlyAdmin):
    """Respondents an import excluded (e.g. a persona that leaks a target), with the reason."""
    audit_project, audit_kind = "study__project", Kind.TASK  # the reason may quote a persona
    list_display = ["study", "pid", "kind", "detail"]
    list_filter = ["kind", "study"]


class EndpointGrantForm(forms.ModelForm):
    """The endpoint is chosen from the administrator's list as it is now (paid endpoints only)."""

    endpoint = forms.ChoiceField(choices=())

    class Meta:
        model = models.EndpointGrant
        fields = ["endpoint", "user", "group", "note"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        names = [e.name for e in configured_endpoints() if e.provider != OFFLINE]
        if self.instance.pk and self.instance.endpoint not in names:
            names.append(self.instance.endpoint)  # withdrawn from the list since: still revocable
        self.fields["endpoint"].choices = [(name, name) for name in names]

    def clean(self):
        data = super().clean()
        if bool(data.get("user")) == bool(data.get("group")):
            raise forms.ValidationError("a grant is for one user or for one group: choose exactly one")
        return data


@admin.register(models.EndpointGrant)
class EndpointGrantAdmin(admin.ModelAdmin):
    """Who may seal and start runs against a paid endpoint (on top of the project role)."""

    form = EndpointGrantForm
    list_display = ["endpoint", "user", "group", "granted_by", "granted_at", "note"]
    list_filter = ["endpoint"]
    search_fields = ["endpoint", "user__username", "group__name"]

    def save_model(self, request, obj, form, change):
        if not change:
            obj.granted_by = request.user
        super().save_model(request, obj, form, change)
