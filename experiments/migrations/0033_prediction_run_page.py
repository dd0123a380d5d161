"""The API's cursor pages of a run's answers read a range of (run, id) (`web.api.text.predictions`).
Built concurrently: a large prediction table keeps taking the engine's writes while it is built."""
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):

    atomic = False
    dependencies = [("experiments", "0032_project_epochs")]

    operations = [
        AddIndexConcurrently(model_name="prediction",
                             index=models.Index(fields=["run", "id"], name="prediction_run_page")),
    ]
