"""A survey protocol may leave the screener out of every condition (paper Table 21's earlier runs).

The option defaults to on, as every protocol so far showed the screener; a seal records it only when it
is off, so every existing seal stays what it was."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("experiments", "0025_paper_report"),
    ]

    operations = [
        migrations.AddField(
            model_name="protocol",
            name="survey_screener",
            field=models.BooleanField(default=True, help_text="survey only: every condition shows the screener"),
        ),
    ]
