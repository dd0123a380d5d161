"""Protocols, runs and the request journal (docs/design.md §4, paper App. B.2).

A Slot is one logical request with a stable key; each ModelCall is one attempt at it,
reserved (a committed row) before any byte is sent. The journal is the ground truth for
resuming and for cost: a slot with a terminal outcome is never requested again.
"""
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from experiments.core import kinds
from experiments.core.llm.wire import OutcomeKind
from experiments.models.data import Cohort, Project, Session, Task


class Phase(models.TextChoices):
    MEMORIES = "memories", "Memories"
    GENERATION = "generation", "Base generation"
    DECISIONS = "decisions", "Decisions"
    JUDGING = "judging", "Judging"
    ANALYSIS = "analysis", "Analysis"
    DONE = "done", "Done"


PHASE_ORDER = [Phase.MEMORIES, Phase.GENERATION, Phase.DECISIONS, Phase.JUDGING, Phase.ANALYSIS, Phase.DONE]


class Protocol(models.Model):
    """Cohort × conditions × model configs × caps × contrasts; sealed before any request."""

    class Kind(models.TextChoices):
        INTERVIEW = kinds.INTERVIEW, "Interview"
        SURVEY = kinds.SURVEY, "Survey"
        REGRADE = kinds.REGRADE, "Re-grade"
        PAIRWISE = kinds.PAIRWISE, "Pairwise judge"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="protocols")
    name = models.CharField(max_length=100)
    cohort = models.ForeignKey(Cohort, on_delete=models.PROTECT, related_name="protocols")
    # What the protocol is about (`execution.kind_table`: its planners, pages and seal rules). Never part of
    # a seal: it follows from the conditions and `regrade_of` (`core.kinds.inferred_kind`), which are.
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.INTERVIEW)
    conditions = models.JSONField(help_text="condition keys of experiments.core.conditions")
    generator = models.JSONField(help_text="experiments.llm.ModelConfig fields (also writes memories)")
    judge = models.JSONField(help_text="experiments.llm.ModelConfig fields")
    concurrency = models.JSONField(default=dict, help_text="in-flight cap per provider, e.g. {'openai': 8}")
    retry_policy = models.JSONField(default=dict)
    contrasts = models.JSONField(default=list, help_text="planned contrasts, family membership, criteria")
    bootstrap = models.JSONField(default=dict, help_text="seed and draws of the analysis")
    criteria = models.JSONField(default=list, blank=True,
                                help_text="prespecified decision criteria (experiments.core.criteria)")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    sealed_at = models.DateTimeField(null=True, blank=True)
    sealed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    seal = models.JSONField(default=dict, blank=True, help_text="sha256 of prompts, task list, settings, code")
    # A re-grade-only protocol (paper App. H): its runs judge the answers of this finished run
    # again and send nothing else. PROTECT: the source's answers are what its seal binds.
    regrade_of = models.ForeignKey(
        "Run", null=True, blank=True, on_delete=models.PROTECT, related_name="regrades",
        help_text="re-grade only: the finished run whose distinct answers this protocol judges again",
    )
    # Memories built once, reused (paper App. G: "imports the previously constructed profiles"):
    # runs whose sealed memories this protocol takes instead of writing them again, where the
    # writing request and the generator are the same (`execution.memory_imports`).
    # A pairwise-judge protocol: its runs ask the judge which of two conditions' answers
    # of `regrade_of` is better, each pair [X, Y] in both orders (`execution.pairwise_judge`).
    pairwise_pairs = models.JSONField(
        default=list, blank=True, help_text="pairwise judge only: the condition pairs [X, Y] it compares",
    )
    memory_import_runs = models.JSONField(
        default=list, blank=True, help_text="ids of earlier runs whose identical memories are imported, not rebuilt",
    )
    # A survey protocol that shows no condition the screener (paper Table 21's earlier runs). Sealed only
    # when off (`execution.survey_planning.survey_settings`), so every other seal is computed as before.
    survey_screener = models.BooleanField(default=True, help_text="survey only: every condition shows the screener")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="protocol_name_unique_in_project"),
            # a re-grade (or a pairwise judge) names the run it judges again, and only they do
            models.CheckConstraint(
                condition=models.Q(kind__in=("regrade", "pairwise"), regrade_of__isnull=False)
                | (~models.Q(kind__in=("regrade", "pairwise")) & models.Q(regrade_of__isnull=True)),
                name="protocol_regrade_kind"),
        ]

    def __str__(self):
        return self.name

    def is_sealed(self) -> bool:
        return self.sealed_at is not None

    def kind_problem(self) -> str | None:
        """Why the stored kind disagrees with the conditions and `regrade_of`, or None."""
        expected = kinds.inferred_kind(self.conditions, regrade=self.regrade_of_id is not None,
                                       pairwise=bool(self.pairwise_pairs))
        if self.kind == expected:
            return None
        return f"its conditions make it a {expected} protocol, but its kind says {self.kind or 'nothing'}"

    def clean(self):
        super().clean()
        if problem := self.kind_problem():
            raise ValidationError({"kind": problem})

    def save(self, *args, **kwargs):
        if problem := self.kind_problem():
            raise ValueError(problem)
        # Sealed means read-only: later changes are amendments, recorded on the run.
        if self.pk is not None and Protocol.objects.filter(pk=self.pk, sealed_at__isnull=False).exists():
            raise ValueError("a sealed protocol is read-only; record an amendment instead")
        super().save(*args, **kwargs)


class Run(models.Model):
    class Status(models.TextChoices):
        CREATED = "created", "Created"
        RUNNING = "running", "Running"
        PAUSED = "paused", "Paused"
        STOPPED = "stopped", "Stopped"
        FINISHED = "finished", "Finished"

    protocol = models.ForeignKey(Protocol, on_delete=models.PROTECT, related_name="runs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.CREATED)
    phase = models.CharField(max_length=16, choices=Phase.choices, default=Phase.MEMORIES)
    circuit_open = models.BooleanField(default=False, help_text="quota exhausted: nothing is sent until an owner resumes")
    status_reason = models.TextField(blank=True)
    planned_phase = models.CharField(max_length=16, blank=True, help_text="the latest phase whose slots exist")
    inline = models.BooleanField(default=False, help_text="executed in-process, without the queue")
    analysis = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"run {self.pk} of {self.protocol}"

    def may_send(self) -> bool:
        return self.status == Run.Status.RUNNING and not self.circuit_open


class Amendment(models.Model):
    """A recorded, timestamped change after sealing (paper App. B.2)."""

    class Kind(models.TextChoices):
        CONCURRENCY = "concurrency", "Concurrency change"
        PAUSE = "pause", "Pause"
        RESUME = "resume", "Resume"
        REISSUE_UNKNOWN = "reissue_unknown", "Re-issue unknown slots"
        # The phase advances with its undecided slots missing, as the paper keeps them (B.2).
        ACCEPT_MISSING = "accept_missing", "Continue with slots missing"
        # A protocol's HTTP ceiling raised for this run (App. B.2's ceilings, amended like the rest).
        CEILING = "ceiling", "HTTP ceiling raised"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="amendments")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    reason = models.TextField()
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["created_at", "pk"]


class Slot(models.Model):
    """One logical request of a run, with a stable key (App. B.2)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"  # not yet (or not again) requested
        IN_FLIGHT = "in_flight", "In flight"  # an attempt is reserved and has no outcome yet
        OK = "ok", "Completed"
        UNUSABLE = "unusable", "Content unusable"  # received, recorded as is, never redrawn
        FAILED = "failed", "Failed"  # no usable response and no recovery left
        HELD = "held", "Held"  # quota exhausted or a non-transient error: waits for an owner's amendment
        UNKNOWN = "unknown", "Unknown"  # reserved, no outcome: the worker died mid-request

    TERMINAL = {Status.OK, Status.UNUSABLE, Status.FAILED, Status.UNKNOWN}

    class Role(models.TextChoices):
        GENERATOR = "generator", "Generator"
        JUDGE = "judge", "Judge"

    # db_index=False here, on ModelCall's slot and run and on Prediction's run: each table's composite indexes lead
    # with the column and serve its look-ups and the run's deletion; one index less to write per row (migration 0034).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="slots", db_index=False)
    phase = models.CharField(max_length=16, choices=Phase.choices)
    key = models.CharField(max_length=200)
    role = models.CharField(max_length=16, choices=Role.choices)
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    session = models.ForeignKey(Session, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    system = models.TextField()
    user = models.TextField()
    request_sha256 = models.CharField(max_length=64)
    prompt_refs = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    status_note = models.TextField(blank=True)
    # Extra attempts an owner's amendment allowed (quota continuation, re-issue of unknowns).
    amended_attempts = models.PositiveIntegerField(default=0)
    dispatched_at = models.DateTimeField(null=True, blank=True, help_text="handed to the queue; cleared to hand it again")
    retry_at = models.DateTimeField(null=True, blank=True, help_text="a recovery is due then (identical request)")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "key"], name="slot_key_unique_in_run"),
        ]
        indexes = [
            # progress counters per phase and status on the run page
            models.Index(fields=["run", "phase", "status"], name="slot_progress"),
            # the slots not handed out yet, in planning order: the driver hands out a phase a
            # window at a time (`execution.hand_out`), each window read at its own cost
            models.Index(fields=["run", "phase", "id"], name="slot_to_hand_out",
                         condition=models.Q(status="pending", dispatched_at__isnull=True)),
            # the slots handed out whose jobs have not finished: the room left in the window
            models.Index(fields=["run", "phase"], name="slot_handed_out",
                         condition=models.Q(status__in=["pending", "in_flight"], dispatched_at__isnull=False)),
        ]

    def __str__(self):
        return self.key

    def is_terminal(self) -> bool:
        return self.status in Slot.TERMINAL


class ModelCall(models.Model):
    """One HTTP attempt of a slot: reserved before sending, then its outcome."""

    class Basis(models.TextChoices):
        FIRST = "first", "First attempt"
        RECOVERY = "recovery", "Recovery by the retry policy"
        AMENDMENT = "amendment", "Allowed by an amendment"

    class Outcome(models.TextChoices):
        IN_FLIGHT = "", "In flight"  # reserved, no outcome yet
        OK = OutcomeKind.OK.value, "Completed"
        TRANSIENT = OutcomeKind.TRANSIENT.value, "Transient failure"
        QUOTA = OutcomeKind.QUOTA.value, "Quota exhausted"
        FATAL = OutcomeKind.FATAL.value, "Non-transient error"
        UNUSABLE = OutcomeKind.UNUSABLE.value, "Content unusable"
        UNKNOWN = "unknown", "Unknown"  # the lease ran out without an outcome (the worker died mid-request)

    slot = models.ForeignKey(Slot, on_delete=models.CASCADE, related_name="calls", db_index=False)
    # The slot's run and phase, copied when the attempt is reserved (a slot never changes either),
    # so the run page's per-phase counts read the (run, phase) index instead of joining every slot.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+", db_index=False)
    phase = models.CharField(max_length=16, choices=Phase.choices)
    attempt = models.PositiveIntegerField()
    basis = models.CharField(max_length=16, choices=Basis.choices, default=Basis.FIRST)
    justification = models.TextField(blank=True, help_text="why this attempt was allowed, for attempts after the first")
    worker = models.CharField(max_length=200, blank=True)
    reserved_at = models.DateTimeField()
    lease_until = models.DateTimeField(help_text="after this, a reservation without outcome is unknown")
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, blank=True, choices=Outcome.choices, default=Outcome.IN_FLIGHT,
                               help_text="what the attempt came to (experiments.core.llm.wire.OutcomeKind), or unknown")
    http_status = models.PositiveIntegerField(null=True, blank=True)
    response_id = models.CharField(max_length=200, blank=True)
    model_version = models.CharField(max_length=200, blank=True)
    finish_reason = models.CharField(max_length=64, blank=True)
    text = models.TextField(null=True, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    reasoning_tokens = models.PositiveIntegerField(null=True, blank=True)
    total_tokens = models.PositiveIntegerField(null=True, blank=True)
    elapsed_s = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    raw_body = models.TextField(blank=True)

    class Meta:
        ordering = ["slot", "attempt"]
        constraints = [
            # Two workers can never both reserve the same attempt of a slot.
            models.UniqueConstraint(fields=["slot", "attempt"], name="model_call_attempt_once"),
        ]
        indexes = [
            # the run page: a phase's calls that ended in a recent window (its time left, calls per second);
            # the slot and reservation time ride along, so the window's calls are read from the index alone
            models.Index(fields=["run", "phase", "finished_at", "slot", "reserved_at"], name="model_call_phase"),
            # a phase's recoveries, counted under the run's lock at every recovery (its allowance):
            # the cost follows the recoveries (at most the allowance), not the run's size
            models.Index(fields=["run", "phase"], condition=models.Q(basis="recovery"), name="model_call_recoveries"),
        ]


class Memory(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="memories")
    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=16)
    words = models.PositiveIntegerField()
    text = models.TextField(null=True, blank=True, help_text="null: missing (the writing call failed)")
    slot = models.ForeignKey(Slot, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                             help_text="the writing call; none for an imported memory")
    imported_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="the sealed memory of an earlier run this one is, byte for byte (no call was made)",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "session", "kind", "words"], name="memory_once_per_run"),
        ]


class Prediction(models.Model):
    """One answer of (task, condition, label): `final` is the condition's answer; fusion and
    selection conditions also keep their candidates b0..b2 (b0 is the one-shot)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        OK = "ok", "Answered"
        EMPTY = "empty", "Empty answer (operational zero)"
        INVALID_SELECTION = "invalid_selection", "No usable selection (operational zero)"
        # MemGPT-style: the archive-query reply did not parse; recorded, never redrawn (App. H).
        UNPARSED_QUERIES = "unparsed_queries", "Archive queries unparseable (missing)"
        MISSING = "missing", "Missing"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="predictions", db_index=False)
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    condition = models.CharField(max_length=100)
    label = models.CharField(max_length=16)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    text = models.TextField(null=True, blank=True)
    answer_sha256 = models.CharField(max_length=64, blank=True)
    slot = models.ForeignKey(Slot, null=True, blank=True, on_delete=models.PROTECT, related_name="predictions")
    chosen_label = models.CharField(max_length=16, blank=True, help_text="selection: the candidate it copied")
    evidence = models.TextField(blank=True)
    evidence_chars = models.PositiveIntegerField(default=0)
    budget = models.PositiveIntegerField(null=True, blank=True)
    # The grade this answer counts with (0–3; null: none yet or missing), copied from its judge
    # grade by `analysis.grades.store_scores` wherever an answer or a grade is written, so the
    # explorer filters, sorts and counts on an index instead of joining every grade. The rule
    # is `analysis.grades.final_grades`'s: an invalid selection 0, an answer its grade.
    score = models.PositiveSmallIntegerField(null=True, blank=True)
    # A final answer that repeats one of its condition's candidates word for word: that
    # candidate's label (fusion copied it; a selection always does). Kept with `score`.
    copied_label = models.CharField(max_length=16, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "task", "condition", "label"], name="prediction_once"),
        ]
        indexes = [
            # analysis: the final answers of a run
            models.Index(fields=["run", "label", "condition"], name="prediction_final"),
            # the explorer: a condition's tasks with a given grade, or in grade order
            models.Index(fields=["run", "condition", "label", "score", "task"], name="prediction_score"),
            # the explorer's "selection chose" and "fusion copied a candidate"
            models.Index(fields=["run", "condition", "label", "chosen_label", "copied_label", "task"],
                         name="prediction_choice"),
            # the explorer's "a grade is missing"
            models.Index(fields=["run", "label", "task"], condition=models.Q(score__isnull=True),
                         name="prediction_unscored"),
            # the explorer's "answered by a condition", as "no final answer without a text"
            models.Index(fields=["run", "condition", "task"], condition=models.Q(label="final", text__isnull=True),
                         name="prediction_unanswered"),
            # the API's pages of a run's answers (`web.api.text_sql`): a range from (run, cursor), never the
            # primary key's scan past other runs' answers (a run written after another: seconds a page)
            models.Index(fields=["run", "id"], name="prediction_run_page"),
        ]


class Grade(models.Model):
    """The judge's grade of one distinct answer text within a task (App. B.2)."""

    class Status(models.TextChoices):
        OK = "ok", "Graded"
        OPERATIONAL_ZERO = "operational_zero", "Operational zero (empty answer)"
        MISSING = "missing", "Missing"

    # db_index=False: the unique grade_once_per_answer (run, task, answer_sha256) leads with the run (migration 0037).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="grades", db_index=False)
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    answer_sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=20, choices=Status.choices)
    score = models.PositiveSmallIntegerField(null=True, blank=True)
    rationale = models.TextField(blank=True)
    parse_error = models.TextField(blank=True)
    slot = models.ForeignKey(Slot, null=True, blank=True, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "task", "answer_sha256"], name="grade_once_per_answer"),
        ]
