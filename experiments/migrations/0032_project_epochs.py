"""The seal check's epochs per project (replacing 0029's one epoch row for all projects, on which
every import of every project waited for every other's commit).

`experiments_project_epoch` holds two counters per project: "tasks", moved by every statement that
changes what a cohort's task list or a survey sample's respondent list hashes (cohort entries,
tasks, sessions, people, studies, turns; sample members, respondents), and "memories", moved by
what the imported memories' digest reads that the "tasks" counter does not cover (a memory of a
run past its memories phase, a slot's request hash, a protocol's generator). Each statement
trigger finds the projects its rows belong to in its transition tables and moves only their
counters, taking their rows in project order within the statement (a transaction's statements take
theirs in the statements' order): imports into two different projects take different rows and do
not wait on each other there.
A memory written by a run in its memories phase moves nothing (no one imports from such a run:
`import_run_problems`; phases only move on). The memory trigger reads the run's phase after taking
the run's row FOR SHARE: a phase advance not yet committed is waited for and then read (the epoch
moves), and one not yet made waits for the memory's commit (a seal check after it sees the memory).
The phase read in the writer's snapshot alone could miss an advance committed meanwhile, and a
digest computed then would be stored under an epoch that the memory's commit does not move.
(FOR KEY SHARE, which the foreign key check takes, does not block a phase update.)

`experiments_seal_check` keeps each hash as last computed with the epochs read before computing it
(`execution.seal_checks`); a TRUNCATE of any tracked table moves every counter and empties it.
"""
import importlib

from django.db import migrations

# The transition relation is %1$s (the new rows; on UPDATE also the old ones): the project of each.
OWN_PROJECT = "SELECT project_id FROM %1$s"
VIA_COHORT = "SELECT k.project_id FROM %1$s r JOIN experiments_cohort k ON k.id = r.cohort_id"
VIA_SESSION = ("SELECT s.project_id FROM (SELECT DISTINCT session_id FROM %1$s) r "
               "JOIN experiments_session s ON s.id = r.session_id")
VIA_TASK_SET = ("SELECT t.project_id FROM (SELECT DISTINCT task_set_id FROM %1$s) r "
                "JOIN experiments_taskset t ON t.id = r.task_set_id")
VIA_SURVEY_STUDY = ("SELECT s.project_id FROM (SELECT DISTINCT study_id FROM %1$s) r "
                    "JOIN experiments_surveystudy s ON s.id = r.study_id")
# Only a run past its memories phase can be imported from; the engine writes a run's memories before.
VIA_RUN_PAST_MEMORIES = ("SELECT p.project_id FROM (SELECT DISTINCT run_id FROM %1$s) r "
                         "JOIN experiments_run u ON u.id = r.run_id AND u.phase <> 'memories' "
                         "JOIN experiments_protocol p ON p.id = u.protocol_id")
# Taken before that query (a later statement, so it reads the phase as committed after any wait here).
LOCK_RUNS = "SELECT 1 FROM experiments_run WHERE id IN (SELECT run_id FROM %1$s) ORDER BY id FOR SHARE"

TRACKED = {
    "experiments_cohorttask": ("tasks", VIA_COHORT),
    "experiments_task": ("tasks", VIA_TASK_SET),
    "experiments_session": ("tasks", OWN_PROJECT),
    "experiments_person": ("tasks", OWN_PROJECT),
    "experiments_study": ("tasks", OWN_PROJECT),
    "experiments_turn": ("tasks", VIA_SESSION),
    "experiments_surveysamplemember": ("tasks", VIA_COHORT),
    "experiments_surveyrespondent": ("tasks", VIA_SURVEY_STUDY),
    "experiments_memory": ("memories", VIA_RUN_PAST_MEMORIES, LOCK_RUNS),
}
TRANSITIONS = {"INSERT": "NEW TABLE AS moved_rows", "DELETE": "OLD TABLE AS moved_rows",
               "UPDATE": "NEW TABLE AS moved_rows OLD TABLE AS moved_before"}


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


FORWARD = [
    "CREATE TABLE experiments_project_epoch (project_id bigint NOT NULL, what varchar(16) NOT NULL, "
    "epoch bigint NOT NULL, PRIMARY KEY (project_id, what))",
    "CREATE TABLE experiments_seal_check (what varchar(32) NOT NULL, subject_id bigint NOT NULL, "
    "tasks_epoch bigint NOT NULL, memories_epoch bigint NOT NULL, inputs_sha256 varchar(64) NOT NULL, "
    "sha256 varchar(64) NOT NULL, PRIMARY KEY (what, subject_id))",
    """CREATE FUNCTION experiments_epoch_reset() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE experiments_project_epoch SET epoch = epoch + 1;
    INSERT INTO experiments_project_epoch (project_id, what, epoch)
        SELECT p.id, w.what, 1 FROM experiments_project p CROSS JOIN (VALUES ('tasks'), ('memories')) w(what)
        ON CONFLICT (project_id, what) DO NOTHING;
    DELETE FROM experiments_seal_check;
END
$$""",
    """CREATE FUNCTION experiments_epoch_move(projects bigint[], counter text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO experiments_project_epoch (project_id, what, epoch)
        SELECT DISTINCT p, counter, 1 FROM unnest(projects) p WHERE p IS NOT NULL ORDER BY p
    ON CONFLICT (project_id, what) DO UPDATE SET epoch = experiments_project_epoch.epoch + 1
$$""",
    # TG_ARGV: the counter, the query of the projects of the rows in the relation %1$s and, optionally,
    # a locking statement over all the moved rows run first (each statement of this volatile function
    # takes a new snapshot: the projects' query sees what committed while the lock waited).
    """CREATE FUNCTION experiments_epoch_moved() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    projects bigint[];
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM experiments_epoch_reset();
        RETURN NULL;
    END IF;
    IF TG_NARGS > 2 THEN
        EXECUTE format(TG_ARGV[2], CASE WHEN TG_OP = 'UPDATE'
            THEN '(SELECT * FROM moved_rows UNION ALL SELECT * FROM moved_before) moved' ELSE 'moved_rows' END);
    END IF;
    EXECUTE 'SELECT array_agg(project_id) FROM (' || format(TG_ARGV[1], 'moved_rows')
        || CASE WHEN TG_OP = 'UPDATE' THEN ' UNION ALL ' || format(TG_ARGV[1], 'moved_before') ELSE '' END
        || ') moved(project_id)' INTO projects;
    IF projects IS NOT NULL THEN
        PERFORM experiments_epoch_move(projects, TG_ARGV[0]);
    END IF;
    RETURN NULL;
END
$$""",
    *(f"CREATE TRIGGER epoch_moved_{op.lower()} AFTER {op} ON {table} REFERENCING {TRANSITIONS[op]} "
      f"FOR EACH STATEMENT EXECUTE FUNCTION experiments_epoch_moved({', '.join(map(_literal, arguments))})"
      for table, arguments in TRACKED.items() for op in TRANSITIONS),
    *(f"CREATE TRIGGER epoch_moved_truncate AFTER TRUNCATE ON {table} "
      f"FOR EACH STATEMENT EXECUTE FUNCTION experiments_epoch_moved('tasks', '')" for table in TRACKED),
    # Rows that never change in practice (a sealed protocol is read-only; a slot's request is written
    # once), checked per row only when the column is written, and only counted when it changed.
    """CREATE FUNCTION experiments_epoch_protocol_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM experiments_epoch_move(ARRAY[NEW.project_id, OLD.project_id], 'memories');
    RETURN NULL;
END
$$""",
    "CREATE TRIGGER epoch_generator_moved AFTER UPDATE OF generator, project_id ON experiments_protocol FOR EACH ROW "
    "WHEN (OLD.generator IS DISTINCT FROM NEW.generator OR OLD.project_id IS DISTINCT FROM NEW.project_id) "
    "EXECUTE FUNCTION experiments_epoch_protocol_moved()",
    """CREATE FUNCTION experiments_epoch_slot_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM experiments_epoch_move(ARRAY(SELECT p.project_id FROM experiments_run u
        JOIN experiments_protocol p ON p.id = u.protocol_id WHERE u.id = NEW.run_id), 'memories');
    RETURN NULL;
END
$$""",
    "CREATE TRIGGER epoch_request_moved AFTER UPDATE OF request_sha256 ON experiments_slot FOR EACH ROW "
    "WHEN (OLD.request_sha256 IS DISTINCT FROM NEW.request_sha256) EXECUTE FUNCTION experiments_epoch_slot_moved()",
    # 0029's one counter, its triggers and its stored hashes go (they were a cache).
    *(f"DROP TRIGGER IF EXISTS task_list_moved ON {table}" for table in (
        "experiments_cohorttask", "experiments_task", "experiments_session", "experiments_person",
        "experiments_study", "experiments_turn")),
    "DROP FUNCTION IF EXISTS experiments_task_list_moved()",
    "DROP TABLE IF EXISTS experiments_task_list_check",
    "DROP TABLE IF EXISTS experiments_task_list_epoch",
]

BACKWARD = [
    "DROP TRIGGER IF EXISTS epoch_request_moved ON experiments_slot",
    "DROP TRIGGER IF EXISTS epoch_generator_moved ON experiments_protocol",
    *(f"DROP TRIGGER IF EXISTS epoch_moved_{op} ON {table}" for table in TRACKED
      for op in ("insert", "update", "delete", "truncate")),
    "DROP FUNCTION IF EXISTS experiments_epoch_slot_moved()",
    "DROP FUNCTION IF EXISTS experiments_epoch_protocol_moved()",
    "DROP FUNCTION IF EXISTS experiments_epoch_moved()",
    "DROP FUNCTION IF EXISTS experiments_epoch_move(bigint[], text)",
    "DROP FUNCTION IF EXISTS experiments_epoch_reset()",
    "DROP TABLE IF EXISTS experiments_seal_check",
    "DROP TABLE IF EXISTS experiments_project_epoch",
    *importlib.import_module("experiments.migrations.0029_task_list_epoch").FORWARD,  # 0029's, as it made them
]


class Migration(migrations.Migration):

    dependencies = [("experiments", "0031_protocol_pairwise_judge")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
