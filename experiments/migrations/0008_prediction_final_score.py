"""`Prediction.score` and `copied_label`: each answer's grade, and the candidate a final answer
repeats, stored with it for the explorer's indexes.

The backfill is one UPDATE: the score by the rule of `analysis.grades.final_grades` (an invalid
selection 0, an answer its judge grade of the same text in the same task, otherwise null), the
copied candidate the first label (in order) of the same condition and task with the same text;
from then on `analysis.grades.store_scores` keeps both wherever answers and grades are written.
"""
from django.db import migrations, models

BACKFILL = """
UPDATE experiments_prediction SET score = CASE
  WHEN status = 'invalid_selection' THEN 0
  WHEN status IN ('ok', 'empty') THEN (
    SELECT g.score FROM experiments_grade g WHERE g.run_id = experiments_prediction.run_id
      AND g.task_id = experiments_prediction.task_id AND g.answer_sha256 = experiments_prediction.answer_sha256)
  END,
  copied_label = CASE WHEN label = 'final' AND answer_sha256 <> '' THEN COALESCE((
    SELECT c.label FROM experiments_prediction c WHERE c.run_id = experiments_prediction.run_id
      AND c.task_id = experiments_prediction.task_id AND c.condition = experiments_prediction.condition
      AND c.answer_sha256 = experiments_prediction.answer_sha256 AND c.label <> 'final'
    ORDER BY c.label LIMIT 1), '') ELSE '' END
"""


class Migration(migrations.Migration):

    dependencies = [
        ("experiments", "0007_study_plural"),
    ]

    operations = [
        migrations.AddField(
            model_name="prediction",
            name="score",
            field=models.PositiveSmallIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="prediction",
            name="copied_label",
            field=models.CharField(blank=True, default="", max_length=16),
            preserve_default=False,
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="prediction",
            index=models.Index(fields=["run", "condition", "label", "score", "task"], name="prediction_score"),
        ),
        migrations.AddIndex(
            model_name="prediction",
            index=models.Index(fields=["run", "condition", "label", "chosen_label", "copied_label", "task"],
                               name="prediction_choice"),
        ),
        migrations.AddIndex(
            model_name="prediction",
            index=models.Index(condition=models.Q(score__isnull=True), fields=["run", "label", "task"],
                               name="prediction_unscored"),
        ),
    ]
