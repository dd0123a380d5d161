"""The SQL of interview imports (`import_store`): a lock, COPY, ids from a sequence, a key lookup.

Each statement says the index it needs. Table and column names come from the models, quoted.
"""
from __future__ import annotations

from django.db import connection

IMPORT_LOCK_SPACE = 110_001  # the first key of the imports' advisory locks (the second is the project)


def lock_project_imports(project) -> None:
    """Imports into one project take turns (an advisory lock held until the transaction ends), so
    an import sees every session and person the ones before it stored, and two files never create
    the same person at once."""
    # No index: an advisory lock, no table read.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [IMPORT_LOCK_SPACE, project.pk % 2**31])


def insert_rows(model, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Plain rows into `model`'s table, by COPY."""
    if not rows:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    # No index read: COPY appends; the table's own indexes are kept up to date as it writes.
    with connection.cursor() as cursor:
        with cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


def reserve_ids(model, count: int) -> list[int]:
    """`count` fresh primary keys of `model`, in increasing order, for rows written with their ids.

    Knowing the ids before writing saves reading them back (a query per batch with thousands
    of parameters). They come from the table's sequence.
    """
    if count == 0:
        return []
    table = model._meta.db_table
    # No index: the values come from the table's sequence.
    with connection.cursor() as cursor:
        # The sequence is looked up once (OFFSET 0 keeps the planner from inlining the lookup
        # into every row, which made this query six times slower).
        cursor.execute("SELECT nextval(seq.id) FROM (SELECT pg_get_serial_sequence(%s, 'id')::regclass AS id "
                       "OFFSET 0) seq, generate_series(1, %s)", [connection.ops.quote_name(table), count])
        return sorted(row[0] for row in cursor.fetchall())


def existing_keys(model, field: str, project_id: int, values: list[str]) -> dict[str, int]:
    """value → pk of the project's rows of `model` whose `field` is among `values`."""
    if not values:
        return {}
    table = connection.ops.quote_name(model._meta.db_table)
    column = connection.ops.quote_name(field)
    # Index: the project's unique (project_id, field) constraint (person_label_unique_in_project,
    # session_id_unique_in_project, study_key_unique_in_project).
    with connection.cursor() as cursor:  # one array parameter, not thousands
        cursor.execute(f"SELECT {column}, id FROM {table} WHERE project_id = %s AND {column} = ANY(%s)",
                       [project_id, values])
        return dict(cursor.fetchall())
