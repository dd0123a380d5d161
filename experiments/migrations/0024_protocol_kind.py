"""Protocol.kind: interview, survey or re-grade, filled for existing protocols from what the code inferred
until now (a protocol naming a run to re-grade is a re-grade; one with a "survey:" condition a survey;
every other an interview). The rule is written out here, frozen, not imported from the app.
ModelCall.outcome gets its choices (the values it always held) and help texts name today's modules."""
from django.db import migrations, models


def fill_kinds(apps, schema_editor):
    Protocol = apps.get_model("experiments", "Protocol")
    survey = []
    for pk, conditions in Protocol.objects.filter(regrade_of__isnull=True).values_list("pk", "conditions"):
        keys = conditions if isinstance(conditions, (list, dict)) else ()
        if any(isinstance(key, str) and key.startswith("survey:") for key in keys):
            survey.append(pk)
    # queryset updates: a sealed protocol's save() refuses every change, and its seal does not hash the kind
    Protocol.objects.filter(pk__in=survey).update(kind="survey")
    Protocol.objects.filter(regrade_of__isnull=False).update(kind="regrade")


class Migration(migrations.Migration):

    dependencies = [
        ("experiments", "0023_endpoint_grant"),
    ]

    operations = [
        migrations.AddField(
            model_name="protocol",
            name="kind",
            field=models.CharField(
                choices=[("interview", "Interview"), ("survey", "Survey"), ("regrade", "Re-grade")],
                default="interview", max_length=16,
            ),
        ),
        migrations.RunPython(fill_kinds, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="protocol",
            constraint=models.CheckConstraint(
                condition=models.Q(("kind", "regrade"), ("regrade_of__isnull", False))
                | (~models.Q(("kind", "regrade")) & models.Q(("regrade_of__isnull", True))),
                name="protocol_regrade_kind",
            ),
        ),
        migrations.AlterField(
            model_name="modelcall",
            name="outcome",
            field=models.CharField(
                blank=True, default="", max_length=16,
                choices=[("", "In flight"), ("ok", "Completed"), ("transient", "Transient failure"),
                         ("quota", "Quota exhausted"), ("fatal", "Non-transient error"),
                         ("unusable", "Content unusable"), ("unknown", "Unknown")],
                help_text="what the attempt came to (experiments.core.llm.wire.OutcomeKind), or unknown",
            ),
        ),
        migrations.AlterField(
            model_name="protocol",
            name="conditions",
            field=models.JSONField(help_text="condition keys of experiments.core.conditions"),
        ),
    ]
