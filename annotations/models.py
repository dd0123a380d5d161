"""Rating campaigns: blind human grades of a finished run's answers (docs/design.md §2).

An item is one distinct answer text within a task, as for the judge, so one human grade
serves every condition that produced that text. Each item goes to exactly k distinct
raters (Assignment rows that are not reassigned); a rating (HumanGrade) belongs to one
assignment and an adjudication to one item, so an owner's decision never overwrites
what a rater said. RatingEvent keeps every rate, update and undo for the record.
"""
from django.conf import settings
from django.db import models
from django.db.models import Q

from experiments.models import Prediction, Project, Run, Task

# A rater may change or undo a rating this long after storing it; later it is final.
UNDO_WINDOW_S = 600
FIRST_SHOWING, REPEAT_SHOWING = 1, 2


class RatingCampaign(models.Model):
    class Status(models.TextChoices):
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    class Sample(models.TextChoices):
        ALL = "all", "All items"
        STRATIFIED = "stratified", "Seeded sample, stratified by condition, judge grade and task"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="rating_campaigns")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="rating_campaigns")
    name = models.CharField(max_length=100)
    conditions = models.JSONField(help_text="condition keys whose final answers are rated")
    sample = models.CharField(max_length=16, choices=Sample.choices, default=Sample.ALL)
    sample_size = models.PositiveIntegerField(null=True, blank=True)
    seed = models.BigIntegerField()
    ratings_per_item = models.PositiveSmallIntegerField(default=2)
    # Share of each rater's items shown to them a second time, later and never next to the first
    # showing: the intra-rater retest, the ceiling the judge's agreement is read against.
    repeat_percent = models.PositiveSmallIntegerField(default=0)
    # A rater's share of gold items graded exactly as the owner did, in percent: the calibration
    # round's pass mark (when the campaign has calibration items), and the line under which the
    # hidden gold checks in the queue flag a rater for the owner. 0: no qualification.
    qualification_percent = models.PositiveSmallIntegerField(default=0)
    # Pairwise: an item is one task's final answers of two conditions X and Y (prediction and
    # prediction_b), shown to each rater as A and B in a seeded, balanced order (Assignment.x_on_a);
    # the rating is the side preferred or a tie (HumanGrade.preference). `pairs` lists the
    # condition pairs [X, Y] compared, each with its items and the tasks skipped because both
    # answers had the same text (a tie by construction) or one was not an answer.
    # Content check (`annotations.content_check`): an item is an original and its paraphrase (an
    # answer and its rewrite, or verbatim excerpts and their paraphrase; prediction and prediction_b),
    # rated "same content?" yes / partly / no (HumanGrade.same_content).
    kind = models.CharField(max_length=16, choices=[("grade", "Grades 0–3"), ("pairwise", "Pairwise preference"),
                                                    ("content-check", "Same content? (paraphrase check)")],
                            default="grade")
    pairs = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="campaign_name_unique_in_project"),
        ]

    def __str__(self):
        return self.name

    def is_open(self) -> bool:
        return self.status == self.Status.OPEN


class CampaignRater(models.Model):
    """A rater of a campaign; `active` False once an owner removed them (their ratings stay)."""

    campaign = models.ForeignKey(RatingCampaign, on_delete=models.CASCADE, related_name="raters")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    active = models.BooleanField(default=True)
    added_at = models.DateTimeField(auto_now_add=True)
    calibration_attempt = models.PositiveSmallIntegerField(default=1)
    qualified_at = models.DateTimeField(null=True, blank=True, help_text="passed the calibration round (or let in)")

    class Meta:
        ordering = ["campaign_id", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "user"], name="campaign_rater_once"),
        ]


class RatingItem(models.Model):
    """One distinct answer text of a task. `prediction` is one prediction carrying that text."""

    campaign = models.ForeignKey(RatingCampaign, on_delete=models.CASCADE, related_name="items")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    answer_sha256 = models.CharField(max_length=64)
    prediction = models.ForeignKey(Prediction, on_delete=models.PROTECT, related_name="+")
    conditions = models.JSONField(help_text="every included condition whose final answer has this text")
    stratum = models.CharField(max_length=200, blank=True, help_text="condition | judge grade the sample drew from")
    judge_score = models.PositiveSmallIntegerField(null=True, blank=True, help_text="the run's judge grade, never shown to raters")
    gold_grade = models.PositiveSmallIntegerField(null=True, blank=True, help_text="set by an owner: a gold item")
    # A gold item used for the calibration round (with feedback) instead of the queues.
    calibration = models.BooleanField(default=False)
    gold_note = models.TextField(blank=True, help_text="the owner's reason for the gold grade, shown as feedback")
    number = models.PositiveIntegerField(help_text="1-based, for owners' pages and exports")
    # Pairwise items only: condition Y's answer (`prediction` is X's; `conditions` is [X, Y]) and its judge grade.
    prediction_b = models.ForeignKey(Prediction, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    judge_score_b = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Y's judge grade, never shown")

    class Meta:
        ordering = ["campaign_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "task", "answer_sha256"], name="rating_item_once",
                                    condition=Q(prediction_b__isnull=True)),
            models.UniqueConstraint(fields=["campaign", "task", "conditions"], name="rating_pair_once",
                                    condition=Q(prediction_b__isnull=False)),
            models.UniqueConstraint(fields=["campaign", "number"], name="rating_item_number_once"),
            models.CheckConstraint(condition=Q(gold_grade__isnull=True) | Q(gold_grade__lte=3),
                                   name="rating_item_gold_grade_0_3"),
        ]


class Assignment(models.Model):
    """Item → rater, at `position` of the rater's queue. Reassigned rows stay for the record.

    `showing` 2 is a hidden repeat of the same rater's showing 1 (the retest): it looks the same
    to the rater, and counts only in the retest figures, never as another rater's rating.
    """

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        DONE = "done", "Rated"
        REASSIGNED = "reassigned", "Reassigned to another rater"

    campaign = models.ForeignKey(RatingCampaign, on_delete=models.CASCADE, related_name="assignments")
    item = models.ForeignKey(RatingItem, on_delete=models.CASCADE, related_name="assignments")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    served_at = models.DateTimeField(null=True, blank=True, help_text="first shown to the rater")
    showing = models.PositiveSmallIntegerField(default=FIRST_SHOWING)
    # Pairwise items only: True when condition X's answer is shown as A to this rater.
    x_on_a = models.BooleanField(null=True, blank=True)

    class Meta:
        # By ids: ordering by the foreign keys themselves would join their tables into every query.
        ordering = ["campaign_id", "rater_id", "position"]
        constraints = [
            # A rater never sees an item twice, even after a reassignment, but for one hidden repeat.
            models.UniqueConstraint(fields=["item", "rater", "showing"], name="assignment_item_rater_showing_once"),
            models.CheckConstraint(condition=Q(showing__in=[FIRST_SHOWING, REPEAT_SHOWING]),
                                   name="assignment_showing_1_or_2"),
            models.UniqueConstraint(fields=["campaign", "rater", "position"], name="assignment_position_once"),
        ]
        indexes = [
            # the rater's next item: their first open assignment by position
            models.Index(fields=["campaign", "rater", "status", "position"], name="assignment_queue"),
        ]


class HumanGrade(models.Model):
    """A rater's grade of one assignment. A flag may stand without a grade (unratable item).

    `campaign` and `rater` repeat the assignment's so that a rater's own numbers (time spent,
    the last rating to undo) come from an index, not a scan of their whole queue.
    """

    assignment = models.OneToOneField(Assignment, on_delete=models.CASCADE, related_name="rating")
    campaign = models.ForeignKey(RatingCampaign, on_delete=models.CASCADE, related_name="+")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    grade = models.PositiveSmallIntegerField(null=True, blank=True)
    note = models.TextField(blank=True)
    flagged = models.BooleanField(default=False)
    flag_reason = models.TextField(blank=True)
    seconds_spent = models.FloatField(null=True, blank=True, help_text="time from showing the item to the rating")
    guidelines_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="the campaign's guidelines the rater's page showed; null: none published")
    # Pairwise items: the side the rater preferred as shown to them (a, b) or tie; the assignment's
    # x_on_a maps it to a condition.
    preference = models.CharField(max_length=3, blank=True, default="")
    # Content-check items: does the paraphrase keep the original's content? yes, partly or no.
    same_content = models.CharField(max_length=6, blank=True, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(grade__isnull=True) | Q(grade__lte=3), name="human_grade_0_3"),
            models.CheckConstraint(condition=Q(grade__isnull=False) | Q(flagged=True) | ~Q(preference="")
                                   | ~Q(same_content=""), name="human_grade_or_flag"),
            models.CheckConstraint(condition=Q(preference__in=["", "a", "b", "tie"])
                                   & (Q(preference="") | Q(grade__isnull=True)), name="human_preference_a_b_tie"),
            models.CheckConstraint(condition=Q(same_content__in=["", "yes", "partly", "no"])
                                   & (Q(same_content="") | Q(grade__isnull=True, preference="")),
                                   name="human_same_content_yes_partly_no"),
        ]
        indexes = [models.Index(fields=["campaign", "rater", "created_at"], name="human_grade_latest")]


class RatingEvent(models.Model):
    """Every rate, update and undo, in order: the audit trail behind HumanGrade."""

    class Kind(models.TextChoices):
        RATE = "rate", "Rated"
        UPDATE = "update", "Changed within the undo window"
        UNDO = "undo", "Undone"
        REASSIGN = "reassign", "Reassigned"

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    grade = models.PositiveSmallIntegerField(null=True, blank=True)
    flagged = models.BooleanField(default=False)
    at = models.DateTimeField()
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    preference = models.CharField(max_length=3, blank=True, default="")  # pairwise items: a, b or tie
    same_content = models.CharField(max_length=6, blank=True, default="")  # content-check items: yes, partly, no

    class Meta:
        ordering = ["at", "pk"]


class CalibrationAnswer(models.Model):
    """A rater's grade of a calibration item in one attempt of the calibration round."""

    campaign = models.ForeignKey(RatingCampaign, on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey(RatingItem, on_delete=models.CASCADE, related_name="calibration_answers")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    attempt = models.PositiveSmallIntegerField()
    grade = models.PositiveSmallIntegerField()
    answered_at = models.DateTimeField()

    class Meta:
        ordering = ["campaign_id", "rater_id", "attempt", "item_id"]
        constraints = [
            models.UniqueConstraint(fields=["item", "rater", "attempt"], name="calibration_answer_once"),
            models.CheckConstraint(condition=Q(grade__lte=3), name="calibration_grade_0_3"),
        ]


class Guidelines(models.Model):
    """One published version of a campaign's rating guidelines (Markdown; shown sanitised).

    Versions are never edited: publishing again adds the next one, and each rating records the
    version its page showed, so a change of instructions mid-campaign can be analysed.
    """

    campaign = models.ForeignKey(RatingCampaign, on_delete=models.CASCADE, related_name="guidelines")
    version = models.PositiveIntegerField()
    text = models.TextField()
    published_at = models.DateTimeField()
    published_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["campaign_id", "-version"]
        constraints = [models.UniqueConstraint(fields=["campaign", "version"], name="guidelines_version_once")]


class Adjudication(models.Model):
    """An owner's grade for an item whose raters differ by two or more; ratings stay as they are."""

    item = models.OneToOneField(RatingItem, on_delete=models.CASCADE, related_name="adjudication")
    grade = models.PositiveSmallIntegerField()
    note = models.TextField(blank=True)
    decided_at = models.DateTimeField()
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(grade__lte=3), name="adjudication_grade_0_3"),
        ]


class CampaignResult(models.Model):
    """A campaign's numbers, stored with the sha256 of the inputs they came from and the epochs they
    were computed at.

    At 100,000 draws a large campaign takes tens of seconds, so the numbers are computed once per
    state of the ratings (on the `analysis` queue when large) and read from here; whether they are
    still current is one row's counters, whatever the number of ratings (migration 0008).
    """

    campaign = models.OneToOneField(RatingCampaign, on_delete=models.CASCADE, related_name="result")
    inputs_sha256 = models.CharField(max_length=64)
    payload = models.JSONField()
    computed_at = models.DateTimeField()
    # The campaign's results epoch and its project's "tasks" epoch read before the inputs, and the
    # code's version of the numbers (`annotations.results_epoch_sql`): the numbers are current while
    # these equal the database's.
    epochs = models.JSONField(
        blank=True, null=True, help_text="the counters (and version) the numbers were computed at; null: compute again")


class RaterInvite(models.Model):
    """A single-use link that makes its holder a rater of one campaign (and of its project).

    Only the sha256 of the link's token is kept; the token itself is shown once, to the owner who
    made it. Used, revoked or past `expires_at`, it lets nobody in.
    """

    campaign = models.ForeignKey(RatingCampaign, on_delete=models.CASCADE, related_name="invites")
    token_sha256 = models.CharField(max_length=64, unique=True)
    email = models.EmailField(blank=True, help_text="the address a bulk invite was made for, if any")
    created_at = models.DateTimeField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["campaign_id", "-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(condition=Q(used_at__isnull=True) | Q(revoked_at__isnull=True),
                                   name="rater_invite_used_or_revoked"),
        ]
