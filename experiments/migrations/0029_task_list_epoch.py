"""The task lists' epoch: a counter that every statement changing what a cohort's task list hash
reads (cohort entries, tasks, sessions, people, studies, turns) moves on, in its own transaction;
and each cohort's hash as last computed, with the epoch it was read at. A seal check whose epoch is
unchanged reads the hash from there (constant in the cohort's size) instead of hashing the whole
list again (`execution.task_list_sql`)."""
from django.db import migrations

TRACKED = ("experiments_cohorttask", "experiments_task", "experiments_session", "experiments_person",
           "experiments_study", "experiments_turn")

FORWARD = [
    "CREATE TABLE experiments_task_list_epoch (id smallint PRIMARY KEY CHECK (id = 1), epoch bigint NOT NULL)",
    "INSERT INTO experiments_task_list_epoch (id, epoch) VALUES (1, 0)",
    "CREATE TABLE experiments_task_list_check (cohort_id bigint PRIMARY KEY, epoch bigint NOT NULL, "
    "sha256 varchar(64) NOT NULL)",
    """CREATE FUNCTION experiments_task_list_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE experiments_task_list_epoch SET epoch = epoch + 1 WHERE id = 1;
    RETURN NULL;
END
$$""",
    *(f"CREATE TRIGGER task_list_moved AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
      f"FOR EACH STATEMENT EXECUTE FUNCTION experiments_task_list_moved()" for table in TRACKED),
]
BACKWARD = [
    *(f"DROP TRIGGER IF EXISTS task_list_moved ON {table}" for table in TRACKED),
    "DROP FUNCTION IF EXISTS experiments_task_list_moved()",
    "DROP TABLE IF EXISTS experiments_task_list_check",
    "DROP TABLE IF EXISTS experiments_task_list_epoch",
]


class Migration(migrations.Migration):

    dependencies = [("experiments", "0028_api_tokens")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
