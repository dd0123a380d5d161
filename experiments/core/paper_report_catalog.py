"""Every table and figure of the paper, in the paper's order, and what builds each for the paper report.

Main text first (Figures 1–5 and Tables 1–3), then the appendices (Tables 4–32, Figures 6–8 and 11,
with the appendix results that have no number where they stand), then the items beyond the paper.
An entry names its builder as ``module:function`` (`build(project, runs)` returning a ReportTable,
a ReportFigure or a Missing of `core.report_table`), the ready-made protocol that produces its input
(`core.paper_protocols` keys; a key that is not a template yet gives no button), and, for an item
no app database can hold, why (`offline_only`): such an item is "not reproducible here" whatever
its builder renders (the algorithm's parameters, say, stand beside the reason).

Titles quote the caption; the text export of the paper has no caption for Tables 3, 5, 6, 7 and 30
nor for the figures, so their titles are taken from the sentences that cite them (`caption=False`).
Every item ends in exactly one of the states below. Pure Python, no Django.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

RENDERED = "rendered"
NEEDS_RUN = "needs run"
NOT_HERE = "not reproducible here"
STATES = (RENDERED, NEEDS_RUN, NOT_HERE)

CACHED = "experiments.analysis.report_items_cached"
AUDIT = "experiments.execution.report_audit"
CROSS = "experiments.analysis.report_items_cross_run"
PER_RUN = "experiments.analysis.report_items_per_run"
SURVEY = "experiments.analysis.report_items_survey"
CONDITIONS = "experiments.analysis.report_items_conditions"
WORKFLOWS = "experiments.analysis.report_items_workflows"
CONTROLS = "experiments.analysis.report_items_controls"

DIAGRAM = "a diagram, not data"
HISTORICAL = ("the paper's numbers are reanalyses of old predictions, which need their memories and predictions "
              "imported; the representations can be run anew as conditions")


@dataclass(frozen=True)
class CatalogItem:
    id: str                     # "Table 13", "Figure 3a", "App. F (centrality)"
    title: str                  # a short quote of the caption (or of the citing sentence)
    section: str
    kind: str                   # "table" or "figure"
    builder: str | None         # "module:function"
    template: str | None = None  # the ready-made protocol that produces its input
    offline_only: str | None = None  # why no app database can hold it
    caption: bool = True        # the title quotes the caption itself
    in_paper: bool = True
    history: str | None = None  # what the paper's numbers came from, when no run of this app made them

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.id.lower()).strip("-")


def _t(id, title, section, builder, template=None, **kw) -> CatalogItem:
    return CatalogItem(id, title, section, "table", builder, template, **kw)


def _f(id, title, section, builder, template=None, **kw) -> CatalogItem:
    return CatalogItem(id, title, section, "figure", builder, template, **kw)


CATALOG: tuple[CatalogItem, ...] = (
    # ---- main text ---------------------------------------------------------------------------
    _f("Figure 1", "OwnWords (Algorithm 1): BM25 ranks the person's own sentences against the question, "
       "a greedy fill keeps them within the budget, and one call answers", "§1, §8", f"{CACHED}:figure1",
       offline_only=f"{DIAGRAM}: the algorithm; the report shows its parameters", caption=False),
    _f("Figure 2", "Rewriting may discard answer-relevant detail", "§1, §9", None,
       offline_only=f"{DIAGRAM}: an illustration built from participant text, which the report never shows",
       caption=False),
    _f("Figure 3a", "Providing the available history and screener instead of the question alone raises the "
       "content score", "§4", f"{CROSS}:figure3a", caption=False),
    _f("Figure 3b", "Concrete memory versus trait memory", "§5", f"{CACHED}:figure3b", "common", caption=False),
    _f("Figure 3c", "The common experiment's means", "§7.2", f"{CACHED}:figure3c", "common", caption=False),
    _t("Table 1", "OwnWords against memory systems at the memory's length", "§8", f"{CROSS}:table1",
       "memory-systems"),
    _t("Table 2", "Evidence-construction comparisons and controls on the comparison cohort", "§8",
       f"{CACHED}:table2", "memory-systems"),
    _t("Table 3", "(no caption in the text export)", "§8", None,
       offline_only="the paper's text export holds neither the caption nor the body of Table 3, so what it "
       "reports cannot be named here", caption=False),
    _f("Figure 4", "The budget sweep: memories of 50, 100, 200 and 400 words, OwnWords and recency at each "
       "B = |memory|", "§8, App. G.1", f"{CACHED}:figure4", "budget-sweep", caption=False),
    _f("Figure 5", "Cohort map", "§8, App. G", f"{CACHED}:figure5", caption=False),
    # ---- appendices ----------------------------------------------------------------------------
    _f("Figure 6", "Grade distributions", "App. A.1", f"{CACHED}:figure6", "common", caption=False),
    _f("Figure 7", "The checked estimates (planned contrasts with their intervals)", "App. A.1",
       f"{CACHED}:figure7", "common", caption=False),
    _t("Table 4", "Actual information available to each condition", "App. B.1", f"{CROSS}:table4"),
    _f("Figure 8", "The workflows with each memory held fixed: three independent calls, then fusion or "
       "selection", "App. B.2", f"{CACHED}:figure8",
       offline_only=f"{DIAGRAM}: the call structure; the report shows its parameters", caption=False),
    _t("Table 5", "Means of the common experiment's conditions", "App. B.2", f"{CACHED}:table5", "common",
       caption=False),
    _t("Table 6", "The conditions of the common experiment", "App. B.2", f"{CACHED}:table6", "common",
       caption=False),
    _t("Table 7", "The eight-contrast planned family", "App. B.3", f"{CACHED}:table7", "common",
       caption=False),
    _t("Table 8", "Post hoc descriptive contrasts (not part of the prespecified family)", "App. B.3",
       f"{PER_RUN}:table8", "common"),
    _t("Table 9", "Prespecified descriptive comparisons and person-weighted point sensitivity", "App. B.3",
       f"{CACHED}:table9", "common"),
    _t("Table 10", "Candidate-pool coverage and selection", "App. B.3", f"{CACHED}:table10", "common"),
    _t("Table 11", "Candidate diagnostics on their own eligible paired sets", "App. B.3", f"{CACHED}:table11",
       "common"),
    _t("Table 12", "Full-plan missing-score bounds", "App. B.3", f"{CACHED}:table12", "common"),
    _t("Table 13", "Actual shared-experiment request accounting", "App. B.2", f"{AUDIT}:table13", "common"),
    _t("Table 14", "Reported token subtotals and coverage", "App. B.2", f"{AUDIT}:table14", "common"),
    _t("Table 15", "Development-half factorial with question-free excerpts", "App. F", f"{CONDITIONS}:table15"),
    _t("App. F (centrality)", "OwnWords's retriever: centrality", "App. F", f"{PER_RUN}:appendix_f_centrality",
       caption=False),
    _t("App. F (routing)", "OwnWords's retriever: routing", "App. F", f"{PER_RUN}:appendix_f_routing",
       caption=False),
    _t("App. F (development attempts)", "Question-specific notes, then an answer; pruning the one-shot draft",
       "App. F, E.12", f"{WORKFLOWS}:development_attempts", "development-attempts", caption=False),
    _t("Table 16", "Tables 1 and 2, plus the no-budget reference", "App. G",
       f"{CROSS}:table16"),
    _t("Table 17", "Every per-budget contrast of the budget sweep", "App. G.1", f"{CACHED}:table17",
       "budget-sweep"),
    _f("Figure 11", "The budget sweep's prespecified replication (third new cohort)", "App. G.1",
       f"{CACHED}:figure11", "budget-sweep", caption=False),
    _t("Table 18", "Budget sweep on the second new cohort", "App. G.1",
       f"{CACHED}:table18", "budget-sweep"),
    _t("Table 19", "Confirmation on the first new cohort", "App. G.2", f"{CACHED}:table19", "confirmation"),
    _t("Table 20", "Memory systems on the second new cohort", "App. G.2", f"{CACHED}:table20", "memory-systems"),
    _t("Table 21", "Earlier Twin-2K-500 runs, with no screener in any condition", "App. H", f"{SURVEY}:table21"),
    _t("Table 22", "Twin-2K-500: 400 respondents, 32,776 closed-form wave-4 answers", "App. H", f"{SURVEY}:table22"),
    _t("Table 23", "Second Twin-2K-500 sample", "App. H", f"{SURVEY}:table23"),
    _t("Table 24", "Threshold decomposition of the normalized differences", "App. I.1", f"{CACHED}:table24",
       "common"),
    _t("Table 25", "Paired grade transitions", "App. I.1", f"{CACHED}:table25", "common"),
    _t("Table 26", "Concrete minus trait memory by tertile of the session length gap", "App. I.2",
       f"{PER_RUN}:table26", "common"),
    _t("Table 27", "Threshold decomposition of the memory experiment's concrete-minus-trait difference by task class", "App. I.2",
       f"{PER_RUN}:table27", "common"),
    _t("Table 28", "Fusion by whether its output is a byte copy of a candidate", "App. I.3", f"{CACHED}:table28",
       "common"),
    _t("Table 29", "Raw-evidence contrasts by target position", "App. I.4", f"{CACHED}:table29", "common"),
    _t("App. I.6 (sampled agreement)", "Judges and generator configurations: sampled agreement", "App. I.6",
       f"{PER_RUN}:appendix_i6_sampled_agreement", caption=False),
    _t("Table 30", "The history benchmark: history and screener against the question alone, four "
       "configurations", "App. J", f"{CROSS}:table30", caption=False),
    _t("Table 31", "Recomputed historical memory results, still limited by source provenance", "App. K",
       f"{CONDITIONS}:table31", history=HISTORICAL),
    _t("Table 32", "Historical concrete minus trait memory, with fixed source-risk exclusions", "App. K",
       f"{CONDITIONS}:table32", history=HISTORICAL),
    # ---- beyond the paper ------------------------------------------------------------------------
    _t("Dense vs BM25", "OwnWords with a dense ranker against BM25 (not in the paper)", "beyond the paper",
       f"{CONDITIONS}:dense_vs_bm25", caption=False, in_paper=False),
    _t("Representations run anew", "App. K's combined profile of imputed scales and tag arm, run anew against the "
       "memories (not in the paper: its Table 31 reanalyses old outputs)", "beyond the paper",
       f"{WORKFLOWS}:representations", "representations", caption=False, in_paper=False),
    _t("Paraphrase controls", "Content versus wording: the evidence verbatim and in other words at the same budget "
       "(not in the paper: the controlled paraphrase comparison it calls for)", "beyond the paper",
       f"{CONTROLS}:paraphrase_controls", "paraphrase-controls", caption=False, in_paper=False),
    _t("Judge invariance", "Each answer and its paraphrase graded by the same judge: grades changed and κ "
       "(not in the paper)", "beyond the paper", f"{CONTROLS}:judge_invariance_report", "answer-controls",
       caption=False, in_paper=False),
    _t("Length control", "The planned contrasts as answered and at equal length (not in the paper)",
       "beyond the paper", f"{CONTROLS}:length_control_report", "answer-controls", caption=False, in_paper=False),
)

PAPER_TABLES = tuple(f"Table {n}" for n in range(1, 33))
PAPER_FIGURES = ("Figure 1", "Figure 2", "Figure 3a", "Figure 3b", "Figure 3c", *(f"Figure {n}" for n in range(4, 9)),
                 "Figure 11")


def catalog_item(item_id: str) -> CatalogItem:
    return next(item for item in CATALOG if item.id == item_id)


def number_of(item_id: str) -> tuple[str, int, str]:
    """("Table", 13, "") / ("Figure", 3, "a"); ("", 0, "") for an unnumbered item."""
    head, _, tail = item_id.partition(" ")
    digits = "".join(ch for ch in tail if ch.isdigit())
    if head not in ("Table", "Figure") or not digits:
        return "", 0, ""
    return head, int(digits), tail[len(digits):]
