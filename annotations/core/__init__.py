"""Pure computation of a rating campaign's results: plain tables in, JSON-safe numbers out.

No Django here (tests/test_annotations_results.py checks it): `annotations.campaign_agreement` and
`annotations.contrasts` gather the tables from the database and call these modules, so
every figure can be recomputed from the numbers alone.
"""
