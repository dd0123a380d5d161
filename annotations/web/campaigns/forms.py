"""The campaign form: a finished run's conditions, the sample, the raters and k."""
from django import forms

from annotations.campaign_rules import MAX_RATINGS_PER_ITEM
from annotations.campaigns import MAX_REPEAT_PERCENT
from annotations.models import RatingCampaign
from experiments.models import Membership, Role
from experiments.web.bounded_input import INTEGER_COLUMN_MAX, BoundedIntegerField
from experiments.web.text_input import StorableTextMixin


class NewCampaignForm(StorableTextMixin, forms.Form):
    """What a new campaign of every kind asks: a name, its conditions (`conditions_of` the run) and sample,
    the sample's seed, k and the raters. A kind declares its `conditions` and `sample` fields and says what
    it rates (`unit`: item, pair) and what its seed fixes."""

    unit = "item"
    seed_fixes = "fixes the sample, who rates what and every queue's order"
    field_order = ("name", "conditions", "sample", "sample_size", "seed", "ratings_per_item", "repeat_percent",
                   "raters")
    name = forms.CharField(max_length=100)
    sample_size = BoundedIntegerField(required=False, min_value=1, max_value=INTEGER_COLUMN_MAX)
    seed = BoundedIntegerField(initial=1, min_value=0, max_value=2**62)
    ratings_per_item = BoundedIntegerField(initial=2, min_value=1, max_value=MAX_RATINGS_PER_ITEM)
    raters = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple,
                                       help_text="project members with the rater role")

    def conditions_of(self, run) -> list[str]:
        return list(run.protocol.conditions)

    def __init__(self, *args, run, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["sample_size"].help_text = f"{self.unit}s in a stratified sample"
        self.fields["seed"].help_text = self.seed_fixes
        self.fields["ratings_per_item"].label = f"Ratings per {self.unit} (k)"
        conditions = self.conditions_of(run)
        self.fields["conditions"].choices = [(c, c) for c in conditions]
        self.fields["conditions"].initial = conditions
        raters = (Membership.objects.filter(project=run.protocol.project, role=Role.RATER)
                  .select_related("user").order_by("user__username"))
        self.fields["raters"].choices = [(m.user.username, m.user.username) for m in raters]


class CampaignForm(NewCampaignForm):
    conditions = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple,
                                           help_text="the final answers of these conditions are rated")
    sample = forms.ChoiceField(choices=RatingCampaign.Sample.choices, initial=RatingCampaign.Sample.ALL)
    repeat_percent = BoundedIntegerField(
        required=False, initial=10, min_value=0, max_value=MAX_REPEAT_PERCENT,
        label="Hidden repeats (% of each rater's items)",
        help_text="shown to the same rater again later, never next to the first showing: the retest ceiling")


class RaterForm(StorableTextMixin, forms.Form):
    username = forms.CharField(max_length=150, label="Rater")


class GoldForm(StorableTextMixin, forms.Form):
    # The page lists the items to choose from (a datalist of numbers with the answer's start).
    number = BoundedIntegerField(min_value=1, max_value=INTEGER_COLUMN_MAX, label="Item number",
                                 widget=forms.NumberInput(attrs={"list": "gold-item-choices"}))
    grade = forms.TypedChoiceField(choices=[("", "not gold")] + [(g, g) for g in range(4)], coerce=int,
                                   empty_value=None, required=False, label="Gold grade")


class AdjudicationForm(StorableTextMixin, forms.Form):
    number = BoundedIntegerField(min_value=1, max_value=INTEGER_COLUMN_MAX, widget=forms.HiddenInput)
    grade = forms.TypedChoiceField(choices=[(g, g) for g in range(4)], coerce=int)
    note = forms.CharField(required=False, max_length=2000)
