"""The content-check campaign form: a finished run's paraphrase controls, sample, raters, k."""
from django import forms

from annotations.campaign_rules import MAX_RATINGS_PER_ITEM
from annotations.content_check import control_conditions
from annotations.models import RatingCampaign
from experiments.models import Membership, Role
from experiments.web.bounded_input import INTEGER_COLUMN_MAX, BoundedIntegerField
from experiments.web.text_input import StorableTextMixin


class ContentCheckForm(StorableTextMixin, forms.Form):
    name = forms.CharField(max_length=100)
    conditions = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, label="Paraphrase controls",
                                           help_text="each task's original and paraphrase of these is checked")
    sample = forms.ChoiceField(choices=[(RatingCampaign.Sample.ALL, "All pairs"),
                                        (RatingCampaign.Sample.STRATIFIED,
                                         "Seeded sample, stratified by control condition and spread over tasks")],
                               initial=RatingCampaign.Sample.ALL)
    sample_size = BoundedIntegerField(required=False, min_value=1, max_value=INTEGER_COLUMN_MAX,
                                      help_text="pairs in a stratified sample")
    seed = BoundedIntegerField(initial=1, min_value=0, max_value=2**62,
                               help_text="fixes the sample, who rates what and every queue's order")
    ratings_per_item = BoundedIntegerField(initial=2, min_value=1, max_value=MAX_RATINGS_PER_ITEM,
                                           label="Ratings per pair (k)")
    raters = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple,
                                       help_text="project members with the rater role")

    def __init__(self, *args, run, **kwargs):
        super().__init__(*args, **kwargs)
        controls = control_conditions(run)
        self.fields["conditions"].choices = [(c, c) for c in controls]
        self.fields["conditions"].initial = controls
        raters = (Membership.objects.filter(project=run.protocol.project, role=Role.RATER)
                  .select_related("user").order_by("user__username"))
        self.fields["raters"].choices = [(m.user.username, m.user.username) for m in raters]
