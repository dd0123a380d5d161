"""Interview data, tasks and cohorts (docs/design.md §4). Participant text lives in Turn,
ScreenerItem and (through its turns) Task: only roles that may read text see them."""
from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    ANALYST = "analyst", "Analyst"
    RATER = "rater", "Rater"
    VIEWER = "viewer", "Viewer"


# Roles allowed to read participant text (transcripts, predictions, rationales).
TEXT_ROLES = frozenset({Role.OWNER, Role.ANALYST})


class Project(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="projects")
    # Who may spend money (experiments.access.may_spend): owners always; analysts only when an
    # owner delegates it here, for protocols that call a paid provider.
    analysts_may_spend = models.BooleanField(
        default=False,
        help_text="analysts may seal, start, pause, resume and amend runs that call a paid provider",
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self):
        return self.slug

    def current_task_set(self):
        """The task set made by the most recent derivation, or None."""
        return self.task_sets.filter(fixed_list_sha256="").order_by("-derived_at", "-pk").first()


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_one_role_per_user"),
        ]

    def __str__(self):
        return f"{self.user} is {self.role} of {self.project}"

    def can_read_text(self) -> bool:
        return self.role in TEXT_ROLES

    def is_owner(self) -> bool:
        return self.role == Role.OWNER


class Study(models.Model):
    """One interview guide; the clustering unit of study-level resampling."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="studies")
    key = models.CharField(max_length=200)

    class Meta:
        ordering = ["key"]
        verbose_name_plural = "studies"
        constraints = [
            models.UniqueConstraint(fields=["project", "key"], name="study_key_unique_in_project"),
        ]

    def __str__(self):
        return self.key


class Person(models.Model):
    """A participant by an opaque label; all their sessions travel together in resampling."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="people")
    label = models.CharField(max_length=200)

    class Meta:
        ordering = ["label"]
        constraints = [
            models.UniqueConstraint(fields=["project", "label"], name="person_label_unique_in_project"),
        ]

    def __str__(self):
        return self.label


class Session(models.Model):
    class SourceFormat(models.TextChoices):
        JSONL = "jsonl", "OwnWords JSONL"
        ANTHROPIC_CSV = "anthropic-csv", "Anthropic Interviewer CSV"
        GENAGENTS = "genagents", "genagents interview"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="sessions")
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="sessions")
    person = models.ForeignKey(Person, on_delete=models.PROTECT, related_name="sessions")
    external_id = models.CharField(max_length=200)
    language = models.CharField(max_length=16, default="en")
    source_format = models.CharField(max_length=16, choices=SourceFormat.choices)
    source_file = models.CharField(max_length=255)
    imported_at = models.DateTimeField(auto_now_add=True)
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["external_id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "external_id"], name="session_id_unique_in_project"),
        ]

    def __str__(self):
        return self.external_id


class ScreenerItem(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="screener_items")
    index = models.PositiveIntegerField()
    question = models.TextField()
    answer = models.TextField()

    class Meta:
        ordering = ["session", "index"]
        constraints = [
            models.UniqueConstraint(fields=["session", "index"], name="screener_item_index_unique"),
        ]


class Turn(models.Model):
    class Speaker(models.TextChoices):
        INTERVIEWER = "interviewer", "Interviewer"
        PARTICIPANT = "participant", "Participant"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turns")
    index = models.PositiveIntegerField()
    speaker = models.CharField(max_length=16, choices=Speaker.choices)
    text = models.TextField()

    class Meta:
        ordering = ["session", "index"]
        constraints = [
            models.UniqueConstraint(fields=["session", "index"], name="turn_index_unique_in_session"),
        ]

    def __str__(self):
        return f"{self.session_id}#{self.index} {self.speaker}"


class TaskSet(models.Model):
    """One derivation of a project's tasks, with the thresholds that made it.

    Deriving again with the same thresholds adds the tasks of newly imported
    sessions to the same set; other thresholds make a new set, so tasks that a
    cohort already froze never change.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="task_sets")
    min_pairs = models.PositiveIntegerField()
    min_targets = models.PositiveIntegerField()
    max_targets = models.PositiveIntegerField()
    derived_at = models.DateTimeField()
    # A fixed task list imported from a file (the paper's fixed inputs) instead of derived: the
    # file's sha256; its thresholds are 0. Empty for a derived set.
    fixed_list_sha256 = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "min_pairs", "min_targets", "max_targets"],
                condition=models.Q(fixed_list_sha256=""),
                name="task_set_one_per_rule",
            ),
            models.UniqueConstraint(
                fields=["project", "fixed_list_sha256"], condition=~models.Q(fixed_list_sha256=""),
                name="task_set_one_per_fixed_list",
            ),
        ]

    def __str__(self):
        return self.rule_label()

    def rule_label(self) -> str:
        if self.fixed_list_sha256:
            return f"fixed task list (file sha256 {self.fixed_list_sha256[:12]}…)"
        return (
            f"≥{self.min_pairs} substantive pairs, ≥{self.min_targets} second-half targets, "
            f"first {self.max_targets} taken"
        )

    def is_paper_rule(self) -> bool:
        return (self.min_pairs, self.min_targets, self.max_targets) == (12, 5, 5)


class Task(models.Model):
    """A prediction target: the question turn, the reference answer and the cut."""

    task_set = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="tasks")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="tasks")
    question_turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="+")
    answer_turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveSmallIntegerField(help_text="0 for the session's first target")
    pair_number = models.PositiveIntegerField(help_text="number of the pair among all substantive pairs")
    cut = models.PositiveIntegerField(help_text="turn index of the question: history stops before it")
    record_cut = models.PositiveIntegerField(
        help_text="the session's earliest target cut: bounds the permitted record for memories and OwnWords"
    )

    class Meta:
        ordering = ["session__external_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["task_set", "question_turn"], name="task_unique_question_in_set"),
        ]

    def __str__(self):
        return f"{self.session.external_id}@{self.cut}"


class Cohort(models.Model):
    """A frozen set of tasks drawn by a recorded rule and seed (paper App. G)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="cohorts")
    # None: a survey sample, its respondents in SurveySampleMember.
    task_set = models.ForeignKey(TaskSet, null=True, blank=True, on_delete=models.PROTECT, related_name="cohorts")
    name = models.CharField(max_length=100)
    seed = models.BigIntegerField()
    requested_size = models.PositiveIntegerField()
    rule = models.JSONField(help_text="everything that determined the draw, for the record")
    task_list_sha256 = models.CharField(max_length=64)
    excluded_cohorts = models.ManyToManyField("self", symmetrical=False, blank=True, related_name="+")
    tasks = models.ManyToManyField(Task, through="CohortTask", related_name="cohorts")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="cohort_name_unique_in_project"),
        ]

    def __str__(self):
        return self.name

    def save(self, *args, **kwargs):
        # A cohort is evidence of what was drawn before any result was seen:
        # once stored it must never be edited, only replaced by a new cohort.
        if self.pk is not None and not self._state.adding:
            raise ValueError("a cohort never changes after creation; draw a new one")
        super().save(*args, **kwargs)


class CohortTask(models.Model):
    """A task of a cohort; `position` follows the draw order of sessions, then targets."""

    cohort = models.ForeignKey(Cohort, on_delete=models.CASCADE, related_name="cohort_tasks")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="cohort_entries")
    position = models.PositiveIntegerField()
    # What the run explorer sorts and filters on, copied once per cohort (a cohort, its people's
    # labels, studies' keys and turns never change) by `experiments.data.cohort_facts`, so that a sort by
    # person or study and the question-text filter read one table: the rank of the person's label
    # and of the study's key among the cohort's (code point order), and the question in lower case.
    person_rank = models.PositiveIntegerField(null=True, blank=True)
    study_rank = models.PositiveIntegerField(null=True, blank=True)
    question_lowercase = models.TextField(null=True, blank=True)

    class Meta:
        ordering = ["cohort", "position"]
        constraints = [
            models.UniqueConstraint(fields=["cohort", "task"], name="cohort_task_once"),
            models.UniqueConstraint(fields=["cohort", "position"], name="cohort_task_position_once"),
        ]
        indexes = [
            # the explorer's "are this cohort's facts copied yet?": empty once they all are
            models.Index(fields=["cohort"], condition=models.Q(person_rank__isnull=True), name="cohort_task_facts_missing"),
        ]
