"""The paper's statistics in pure NumPy, one module per kind; this package re-exports them for notebooks.

Everything here works on plain arrays and mappings so that the numbers of a
dashboard, of ``manage.py contrast`` and of a notebook come from one place.

Units
-----
Grades are the judge's raw integer content grades 0..3 (``None``/NaN when a
judgment is missing; App. B.3 "Missing judgments remain null").  The paper
reports *normalized* scores, raw / 3 in [0, 1] (App. B.3: "The factor of three
normalizes the raw grades to [0, 1]").  In this module:

* ``PairedSet.diff``, ``interaction``, ``ThresholdDecomposition.difference`` and
  ``missing_bounds`` return **normalized** differences (raw contrast / 3);
* ``ThresholdDecomposition.delta`` holds ΔP≥k, differences of *shares* of tasks;
* ``paired_bootstrap``, ``person_weighted``, ``sign_test``, ``win_tie_loss`` and
  ``group_by`` take per-task differences in whatever unit they are given
  (normally the normalized ones from ``PairedSet.diff``) and return that unit;
* ``transition_table`` and ``quadratic_kappa`` take raw grades.

Modules: `arguments` (the tails, draws and paired differences every bootstrap checks), `paired` (one contrast),
`shared` (many bootstraps on one stream of draws), `shifts` (I.1), `grouping` (G.1, interactions), `agreement`
(graders), `reference` (plain-loop bootstrap), `robustness` (I.1 intervals and monotone rescoring, subgroups and
their differences, covariate regressions, weightings and exclusions: I.2, I.5, I.7, I.8).

Paper sections: B.3 (paired estimator, whole-person bootstrap, family tails,
missing-score bounds, sign test), G.1 (grouping by budget share), G.2 (100,000
PCG64 draws in blocks of 2,000, linear percentiles), I.1 (threshold
decomposition, transitions), I.8 (person-weighted estimates).
"""

from experiments.core.stats.agreement_stats import (
    AgreementResult, Interval, MeanVsJudge, agreement_bootstrap, alpha_bootstrap, alpha_from_coincidences,
    coincidence_matrix, confusion_matrix, exact_agreement, kappa_from_tables, krippendorff_alpha_ordinal,
    mean_vs_judge, quadratic_kappa, within_one,
)
from experiments.core.stats.grouping import (
    BUDGET_SHARE_GROUPS, budget_share_group, candidate_mean, group_by, interaction,
)
from experiments.core.stats.paired import (
    DEFAULT_DRAWS, DEFAULT_SEED, GRADES, MAX_GRADE, BootstrapResult, MissingBounds, PairedSet, SignTest, family_tails,
    missing_bounds, normalize, paired_bootstrap, paired_matrix, paired_set, person_weighted, sign_test,
    study_bootstrap,
)
from experiments.core.stats.shared import BootstrapRequest, shared_bootstraps
from experiments.core.stats.reference import paired_bootstrap_loop
from experiments.core.stats.shifts import (
    ThresholdDecomposition, WinTieLoss, threshold_decomposition, transition_table, win_tie_loss,
)

__all__ = [
    "GRADES", "MAX_GRADE", "BUDGET_SHARE_GROUPS", "DEFAULT_SEED", "DEFAULT_DRAWS",
    "BootstrapResult", "ThresholdDecomposition", "MissingBounds", "PairedSet", "SignTest", "WinTieLoss",
    "normalize", "paired_bootstrap", "paired_bootstrap_loop", "study_bootstrap",
    "family_tails", "person_weighted", "threshold_decomposition",
    "transition_table", "win_tie_loss", "missing_bounds", "sign_test",
    "quadratic_kappa", "paired_set", "paired_matrix", "BootstrapRequest", "shared_bootstraps", "interaction", "candidate_mean",
    "group_by", "budget_share_group",
    "AgreementResult", "Interval", "MeanVsJudge", "confusion_matrix", "exact_agreement", "within_one",
    "kappa_from_tables", "coincidence_matrix", "alpha_from_coincidences", "krippendorff_alpha_ordinal",
    "agreement_bootstrap", "alpha_bootstrap", "mean_vs_judge",
]
