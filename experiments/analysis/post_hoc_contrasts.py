"""Paper Table 8: the contrasts the paper computed after seeing the results (§7, App. B.3), on the common run:
each one-shot memory and the current dialogue minus the whole record, with the planned contrasts' estimator
(`dashboard.descriptive_contrasts`) and the run's whole-person draws; descriptive, not in the family."""
from __future__ import annotations

from experiments.analysis.dashboard import descriptive_contrasts
from experiments.analysis.grades import grade_matrix
from experiments.analysis.run_report_inputs import notes_for, report_inputs, run_settings
from experiments.core.conditions import CURRENT_DIALOGUE, WHOLE_RECORD
from experiments.core.report_table import ReportTable
from experiments.models import Run

CONCRETE_ONE_SHOT = "memory(concrete,100w)+one-shot"
TRAIT_ONE_SHOT = "memory(trait,100w)+one-shot"
POST_HOC = (("concrete one-shot − whole record", CONCRETE_ONE_SHOT),
            ("trait one-shot − whole record", TRAIT_ONE_SHOT),
            ("current dialogue − whole record", CURRENT_DIALOGUE))
POST_HOC_COLUMNS = ("Contrast", "Estimate", "95% lo", "95% hi", "Person-weighted", "Wins", "Ties", "Losses", "Tasks",
                    "People")


def post_hoc_table(run: Run):
    """Table 8: the post hoc contrasts, each minus the whole record, with the planned contrasts' estimator
    and the run's whole-person draws; descriptive (pointwise 95 %, not in the family)."""
    seed, draws = run_settings(run)
    contrasts = [{"name": name, "terms": {key: 1, WHOLE_RECORD: -1}} for name, key in POST_HOC]
    matrix = grade_matrix(run, [*(key for _, key in POST_HOC), WHOLE_RECORD])
    rows = [(c["name"], c.get("estimate"), c.get("lo"), c.get("hi"), c.get("person_weighted"), c.get("wins"),
             c.get("ties"), c.get("losses"), c["n_tasks"], c.get("people"))
            for c in descriptive_contrasts(contrasts, matrix, seed=seed, draws=draws)]
    return ReportTable(
        columns=POST_HOC_COLUMNS, rows=tuple(rows), inputs=report_inputs(run),
        digits={c: 4 for c in ("Estimate", "95% lo", "95% hi", "Person-weighted")},
        signed=frozenset({"Estimate", "95% lo", "95% hi", "Person-weighted"}),
        notes=notes_for(run, "Post hoc descriptive contrasts (not part of the prespecified family): the planned "
                             "contrasts' task-weighted estimator on jointly graded tasks, whole-person bootstrap "
                             f"(seed {seed}, {draws:,} draws), pointwise 95% intervals, unadjusted. Grades "
                             "normalised to 0–1 as on the dashboard."))
