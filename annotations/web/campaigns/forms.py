"""The campaign form: a finished run's conditions, the sample, the raters and k."""
from django import forms

from annotations.campaign_rules import MAX_RATINGS_PER_ITEM
from annotations.campaigns import MAX_REPEAT_PERCENT
from annotations.models import RatingCampaign
from experiments.models import Membership, Role
from experiments.web.bounded_input import INTEGER_COLUMN_MAX, BoundedIntegerField
from experiments.web.text_input import StorableTextMixin


class CampaignForm(StorableTextMixin, forms.Form):
    name = forms.CharField(max_length=100)
    conditions = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple,
                                           help_text="the final answers of these conditions are rated")
    sample = forms.ChoiceField(choices=RatingCampaign.Sample.choices, initial=RatingCampaign.Sample.ALL)
    sample_size = BoundedIntegerField(required=False, min_value=1, max_value=INTEGER_COLUMN_MAX,
                                      help_text="items in a stratified sample")
    seed = BoundedIntegerField(initial=1, min_value=0, max_value=2**62,
                               help_text="fixes the sample, who rates what and every queue's order")
    ratings_per_item = BoundedIntegerField(initial=2, min_value=1, max_value=MAX_RATINGS_PER_ITEM,
                                           label="Ratings per item (k)")
    repeat_percent = BoundedIntegerField(
        required=False, initial=10, min_value=0, max_value=MAX_REPEAT_PERCENT, label="Hidden repeats (% of each rater's items)",
        help_text="shown to the same rater again later, never next to the first showing: the retest ceiling")
    raters = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple,
                                       help_text="project members with the rater role")

    def __init__(self, *args, run, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["conditions"].choices = [(c, c) for c in run.protocol.conditions]
        self.fields["conditions"].initial = list(run.protocol.conditions)
        raters = (Membership.objects.filter(project=run.protocol.project, role=Role.RATER)
                  .select_related("user").order_by("user__username"))
        self.fields["raters"].choices = [(m.user.username, m.user.username) for m in raters]


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
