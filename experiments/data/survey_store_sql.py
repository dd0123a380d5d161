"""The SQL of survey imports (`survey_store`): the server's compression for this transaction.

Rows go in with `import_store_sql`'s COPY and reserved ids.
"""
from __future__ import annotations

from django.db import connection


def use_fast_compression() -> bool:
    """lz4 for the large values this transaction stores, where the server was built with it (see
    `survey_store`'s docstring)."""
    # No index: pg_settings is a view of the server's settings; SET LOCAL ends with the transaction.
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
        row = cursor.fetchone()
        if not (row and row[0]):
            return False
        cursor.execute("SET LOCAL default_toast_compression = 'lz4'")
    return True
