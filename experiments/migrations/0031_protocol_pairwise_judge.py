"""The pairwise-judge protocol kind: Protocol.pairwise_pairs (the condition pairs it compares,
empty for every existing protocol), the kind "pairwise", and the kind constraint widened: a re-grade or a
pairwise judge names the run it judges again, and only they do."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("experiments", "0030_paper_report_images"),
    ]

    operations = [
        migrations.AddField(
            model_name="protocol",
            name="pairwise_pairs",
            field=models.JSONField(
                blank=True, default=list, help_text="pairwise judge only: the condition pairs [X, Y] it compares",
            ),
        ),
        migrations.AlterField(
            model_name="protocol",
            name="kind",
            field=models.CharField(
                choices=[("interview", "Interview"), ("survey", "Survey"), ("regrade", "Re-grade"),
                         ("pairwise", "Pairwise judge")],
                default="interview", max_length=16,
            ),
        ),
        migrations.RemoveConstraint(model_name="protocol", name="protocol_regrade_kind"),
        migrations.AddConstraint(
            model_name="protocol",
            constraint=models.CheckConstraint(
                condition=models.Q(("kind__in", ("regrade", "pairwise")), ("regrade_of__isnull", False))
                | (~models.Q(("kind__in", ("regrade", "pairwise"))) & models.Q(("regrade_of__isnull", True))),
                name="protocol_regrade_kind",
            ),
        ),
    ]
