"""A new campaign's items and assignments written by COPY (`import_store_sql.insert_rows`), whatever
its kind (pairs, `pairwise`; original and paraphrase, `content_check`): 10,000 items and 20,000
assignments in a fraction of bulk_create's time, the very rows bulk_create wrote (tests compare them)."""
from __future__ import annotations

from django.db import connection

from annotations.models import RatingCampaign, RatingItem
from experiments.data.import_store_sql import insert_rows, reserve_ids

# What a candidate item (a dict) gives its RatingItem, beside the campaign, its conditions and number.
ITEM_FIELDS = ("task_id", "answer_sha256", "prediction_id", "prediction_b_id", "stratum", "judge_score",
               "judge_score_b")


def db_value(model, name: str, value):
    """`value` of `model`'s field `name` as the database takes it (a list as JSON, say)."""
    field = model._meta.get_field(name)
    return field.get_db_prep_save(value, connection)


def insert_with_defaults(model, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """`rows` (values of `columns`) into `model`'s table by COPY, every other column at its field's
    default, as a model instance has it."""
    rest = [f for f in model._meta.concrete_fields if f.attname not in columns and not f.primary_key]
    defaults = tuple(db_value(model, f.name, f.get_default()) for f in rest)
    insert_rows(model, (*columns, *(f.column for f in rest)), [row + defaults for row in rows])


def items_insert(campaign: RatingCampaign, items: list[dict], conditions: list[list[str]]) -> list[int]:
    """The campaign's items, numbered from 1 in the order given (each a dict with ITEM_FIELDS, and
    its conditions in `conditions`): their ids, from the table's sequence, in that order."""
    ids = reserve_ids(RatingItem, len(items))
    as_stored = {}  # each distinct list of conditions as the database takes it, once
    for c in conditions:
        if tuple(c) not in as_stored:
            as_stored[tuple(c)] = db_value(RatingItem, "conditions", list(c))
    insert_with_defaults(RatingItem, ("id", "campaign_id", "conditions", "number", *ITEM_FIELDS),
                         [(pk, campaign.pk, as_stored[tuple(c)], n, *(item[f] for f in ITEM_FIELDS))
                          for n, (pk, item, c) in enumerate(zip(ids, items, conditions), start=1)])
    return ids
