"""The pairwise campaign form: a finished run's conditions (every pair of them is compared), sample, raters, k."""
from django import forms

from annotations.models import RatingCampaign
from annotations.web.campaigns.forms import NewCampaignForm


class PairwiseForm(NewCampaignForm):
    unit = "pair"
    seed_fixes = "fixes the sample, who rates what, every queue's order and the sides"
    conditions = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple,
                                           help_text="every pair of these conditions is compared, task by task")
    sample = forms.ChoiceField(choices=[(RatingCampaign.Sample.ALL, "All pairs"),
                                        (RatingCampaign.Sample.STRATIFIED,
                                         "Seeded sample, stratified by condition pair, the judge's order and task")],
                               initial=RatingCampaign.Sample.ALL)
