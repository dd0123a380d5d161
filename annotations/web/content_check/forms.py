"""The content-check campaign form: a finished run's paraphrase controls, sample, raters, k."""
from django import forms

from annotations.content_check import control_conditions
from annotations.models import RatingCampaign
from annotations.web.campaigns.forms import NewCampaignForm


class ContentCheckForm(NewCampaignForm):
    unit = "pair"
    conditions = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, label="Paraphrase controls",
                                           help_text="each task's original and paraphrase of these is checked")
    sample = forms.ChoiceField(choices=[(RatingCampaign.Sample.ALL, "All pairs"),
                                        (RatingCampaign.Sample.STRATIFIED,
                                         "Seeded sample, stratified by control condition and spread over tasks")],
                               initial=RatingCampaign.Sample.ALL)

    def conditions_of(self, run) -> list[str]:
        return control_conditions(run)
