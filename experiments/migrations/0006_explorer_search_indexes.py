"""Full-text indexes of the project search.

The expressions are exactly those of `experiments.analysis.explorer_search` (`to_tsvector(
'english'::regconfig, text)`), so a search reads the GIN index.
"""
from django.db import migrations

INDEXES = {
    "explorer_turn_text_fts": "experiments_turn",
    "explorer_prediction_text_fts": "experiments_prediction",
}


def create(apps, schema_editor):
    for name, table in INDEXES.items():
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON {table} USING gin (to_tsvector('english'::regconfig, text))")


def drop(apps, schema_editor):
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):

    dependencies = [
        ("experiments", "0005_engine_b_spend_and_accept_missing"),
    ]

    operations = [migrations.RunPython(create, drop)]
