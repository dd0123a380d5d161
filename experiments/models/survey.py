"""Survey studies (paper §8 and App. H): Twin-2K-500 respondents, their target items,
the respondents excluded by the leak check, the seeded samples (cohorts without tasks) and what a
survey run wrote (memories, answers parsed per item).

Participant text: a respondent's persona (and a memory written from it, and the model's answers)
is private like interview text: only `TEXT_ROLES` read it (experiments.access)."""
from django.conf import settings
from django.db import models

from experiments.models.data import Cohort, Project


class SurveyStudy(models.Model):
    """One import of a wave_split release (or a part of it) into a project."""
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="survey_studies")
    name = models.CharField(max_length=100)
    source_files = models.JSONField(default=list, help_text="the file names read, in order")
    synthetic = models.BooleanField(default=False, help_text="invented respondents (the bundled sample): labelled on every page")
    rows_read = models.PositiveIntegerField(default=0, help_text="respondents read, excluded ones included")
    imported_at = models.DateTimeField(auto_now_add=True)
    imported_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "survey studies"
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="survey_study_name_unique")]

    def __str__(self):
        return self.name


class SurveyRespondent(models.Model):
    """A respondent who passed the leak check. The three JSON columns are kept as given (text), so
    the core rebuilds the very `Respondent` it validated (screener, OwnWords, whole persona)."""
    study = models.ForeignKey(SurveyStudy, on_delete=models.CASCADE, related_name="respondents")
    pid = models.CharField(max_length=200)  # the reader's PID_MAX_CHARS
    persona_text = models.TextField(help_text="wave1_3_persona_text: private participant text")
    persona_json = models.TextField(help_text="wave1_3_persona_json as given: private participant text")
    earlier_json = models.TextField(help_text="wave4_Q_wave1_3_A as given")
    wave4_json = models.TextField(help_text="wave4_Q_wave4_A as given")
    location = models.CharField(max_length=255)

    class Meta:
        ordering = ["study", "pid"]
        constraints = [models.UniqueConstraint(fields=["study", "pid"], name="survey_respondent_once")]

    def __str__(self):
        return f"respondent {self.pid}"


class SurveyItem(models.Model):
    """One target item of a respondent (core.survey.targets.TargetItem), with the recorded wave-4
    option (the truth) and the waves 1-3 option (the human test-retest reference)."""
    respondent = models.ForeignKey(SurveyRespondent, on_delete=models.CASCADE, related_name="items")
    number = models.PositiveSmallIntegerField()
    # Text, not bounded characters: the release bounds none of them, and a long one must not fail the import.
    key = models.TextField()
    qid = models.TextField()
    row_id = models.TextField(blank=True)
    block = models.TextField()
    question = models.TextField()
    row = models.TextField(blank=True)
    options = models.JSONField()
    kind = models.CharField(max_length=16)
    wave4 = models.PositiveSmallIntegerField()
    earlier = models.PositiveSmallIntegerField(help_text="0: no earlier answer")

    class Meta:
        ordering = ["respondent", "number"]
        constraints = [models.UniqueConstraint(fields=["respondent", "number"], name="survey_item_once")]


class SurveyExclusion(models.Model):
    """A respondent left out by the leak check, with its reason: shown, never silent."""
    study = models.ForeignKey(SurveyStudy, on_delete=models.CASCADE, related_name="exclusions")
    pid = models.CharField(max_length=200)
    kind = models.CharField(max_length=32)  # leaks.LeakViolation.kind
    detail = models.TextField()

    class Meta:
        ordering = ["study", "pid", "pk"]


class SurveySampleMember(models.Model):
    """A respondent of a seeded survey sample: a cohort whose `task_set` is empty (App. H)."""
    cohort = models.ForeignKey(Cohort, on_delete=models.CASCADE, related_name="survey_members")
    respondent = models.ForeignKey(SurveyRespondent, on_delete=models.PROTECT, related_name="+")
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["cohort", "position"]
        constraints = [
            models.UniqueConstraint(fields=["cohort", "respondent"], name="survey_member_once"),
            models.UniqueConstraint(fields=["cohort", "position"], name="survey_member_position_once"),
        ]


class SurveyMemory(models.Model):
    """The written memory of a respondent in a survey run (null text: the call failed)."""
    run = models.ForeignKey("experiments.Run", on_delete=models.CASCADE, related_name="survey_memories")
    respondent = models.ForeignKey(SurveyRespondent, on_delete=models.PROTECT, related_name="+")
    text = models.TextField(null=True, blank=True)
    slot = models.ForeignKey("experiments.Slot", on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "respondent"], name="survey_memory_once")]


class SurveyAnswer(models.Model):
    """One answer call of (respondent, condition): the reply parsed per item, never redrawn.
    `items` holds [option or null, problem or null, raw] per item number 1..n."""
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        OK = "ok", "Answered"
        MISSING = "missing", "Missing"

    run = models.ForeignKey("experiments.Run", on_delete=models.CASCADE, related_name="survey_answers")
    respondent = models.ForeignKey(SurveyRespondent, on_delete=models.PROTECT, related_name="+")
    condition = models.CharField(max_length=100)
    slot = models.ForeignKey("experiments.Slot", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    error = models.CharField(max_length=64, blank=True, help_text="the whole reply's problem, e.g. malformed-json")
    items = models.JSONField(default=list)
    extra = models.JSONField(default=list, help_text="keys that name no item, as written")
    evidence_chars = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["run", "respondent", "condition"]
        constraints = [models.UniqueConstraint(fields=["run", "respondent", "condition"], name="survey_answer_once")]
