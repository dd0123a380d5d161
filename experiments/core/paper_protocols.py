"""The paper's experiments as ready-made protocols: conditions, planned contrasts and analysis
settings of each, for any cohort. Pure Python, no Django.

- ``common``: the common memory-by-workflow experiment (§7): the concrete and the trait memory,
  each one-shot (its pool's b0), by fusion and by selection over three candidates (b0, b1, b2),
  the whole record and the current dialogue, with the eight-contrast family of App. B.3;
- ``confirmation``: the OwnWords confirmation (§8): the memory one-shot, OwnWords at B = |memory|
  and the whole record;
- ``memory-systems``: Table 1 / App. H: the memory, OwnWords, Mem0, the MemGPT-style design,
  memory + OwnWords and the whole record, with the six descriptive contrasts;
- ``budget-sweep``: App. G.1: memories of 50, 100, 200 and 400 words, OwnWords and recency at
  each B = |memory|, the whole record, with its three criteria (and every per-budget contrast,
  descriptive, as Table 17);
- ``factorial``: App. F, Table 15: the memory and question-free excerpts, each under the memory
  header and the raw-evidence header, with both main effects and the interaction;
- ``dense-vs-bm25``: beyond the paper: OwnWords against a dense ranker on the same path, and the memory;
- ``wrong-person``: App. K's control: own versus a wrong person's memory, and the screener-only reference;
- ``development-attempts``: App. F / E.12: the memory one-shot, notes then an answer (from the record
  or the memory), the pruned one-shot draft and the whole record, descriptive;
- ``paraphrase-controls``: beyond the paper: OwnWords, recency and the whole record, each verbatim and in other
  words at the same budget, and the memory (content versus wording);
- ``answer-controls``: beyond the paper: the memory, OwnWords and the whole record, each answer also in other words
  (judge invariance) and at 60 words (the contrasts at equal length);
- ``length-median-controls``: beyond the paper: the same three, each answer also rewritten to the median length in
  words of the memory's answers in the run (`<base>+length(median:<memory>)`, the target computed when the
  rewrites are planned);
- ``representations``: App. K: the combined profile of imputed scales, the tag arm, the concrete and trait
  memories and the screener-only reference.

`paper_protocol(name, runnable)` gives the conditions and contrasts to store; a condition the
installation cannot run (e.g. Mem0 without its optional packages) is left out with its contrasts,
and `unavailable` says which and why, so the page and the command can say it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from experiments.core.conditions import CONDITIONS, SWEEP_MEMORY_WORDS, get_condition
from experiments.core.contrasts import INTERVAL_ABOVE_ZERO
from experiments.core.wrong_person import WRONG_PERSON_SEED

MEMORY = "memory(concrete,100w)+one-shot"
OWNWORDS = "ownwords(B=|memory|)"
WHOLE_RECORD = "whole-record"
CURRENT_DIALOGUE = "current-dialogue"
MEM0 = "mem0(B=|memory|)"
MEMGPT = "memgpt-style(B=|memory|)"
MEMORY_PLUS_OWNWORDS = "memory+ownwords"


def _memory(kind: str, workflow: str, words: int = 100) -> str:
    return f"memory({kind},{words}w)+" + ("one-shot" if workflow == "one-shot" else f"{workflow}(3)")


def _contrast(name: str, terms: dict, *, family: bool = False, criterion: bool = False) -> dict:
    return {"name": name, "terms": terms, "family": family,
            "criterion": INTERVAL_ABOVE_ZERO if criterion else None}


@dataclass(frozen=True)
class PaperProtocol:
    key: str
    title: str
    section: str
    description: str
    conditions: tuple[str, ...]
    contrasts: tuple[dict, ...]
    bootstrap: dict
    notes: tuple[str, ...] = ()


@dataclass
class Instantiated:
    """A template made for this installation: what to store, and what had to be left out."""

    template: PaperProtocol
    conditions: list[str]
    contrasts: list[dict]
    unavailable: list[str] = field(default_factory=list)  # sentences, one per condition left out


def _common() -> PaperProtocol:
    c = {(kind, wf): _memory(kind, wf) for kind in ("concrete", "trait") for wf in ("one-shot", "fusion", "selection")}
    conditions = (*c.values(), WHOLE_RECORD, CURRENT_DIALOGUE)
    family = (
        _contrast("concrete: fusion − one-shot", {c["concrete", "fusion"]: 1, c["concrete", "one-shot"]: -1},
                  family=True, criterion=True),
        _contrast("trait: fusion − one-shot", {c["trait", "fusion"]: 1, c["trait", "one-shot"]: -1}, family=True),
        _contrast("fusion: concrete − trait", {c["concrete", "fusion"]: 1, c["trait", "fusion"]: -1}, family=True),
        _contrast("interaction: (concrete fusion − one-shot) − (trait fusion − one-shot)",
                  {c["concrete", "fusion"]: 1, c["concrete", "one-shot"]: -1, c["trait", "fusion"]: -1,
                   c["trait", "one-shot"]: 1}, family=True),
        _contrast("concrete: fusion − selection", {c["concrete", "fusion"]: 1, c["concrete", "selection"]: -1},
                  family=True, criterion=True),
        _contrast("trait: fusion − selection", {c["trait", "fusion"]: 1, c["trait", "selection"]: -1}, family=True),
        _contrast("concrete fusion − whole record", {c["concrete", "fusion"]: 1, WHOLE_RECORD: -1},
                  family=True, criterion=True),
        _contrast("concrete fusion − current dialogue", {c["concrete", "fusion"]: 1, CURRENT_DIALOGUE: -1},
                  family=True, criterion=True),
    )
    return PaperProtocol(
        "common", "Common memory-by-workflow experiment", "§7, App. B.3",
        "Concrete and trait memories, one-shot (b0), fusion and selection over three identical-prompt candidates "
        "(b0, b1, b2), against the whole record and the current dialogue; the eight-contrast family "
        "(Bonferroni tails 0.003125 / 0.996875).",
        conditions, family, {"seed": 20260918, "draws": 100_000},
        ("The primary interval is concrete fusion − one-shot; fusion beating all four comparators needs the four "
         "marked criteria met together (B.3).",),
    )


def _confirmation() -> PaperProtocol:
    return PaperProtocol(
        "confirmation", "OwnWords confirmation", "§8, Table 19",
        "The written memory (one call), OwnWords at its length B = |memory| (one call, no model-written text) and "
        "the whole record without a budget.",
        (MEMORY, OWNWORDS, WHOLE_RECORD),
        (_contrast("OwnWords − memory", {OWNWORDS: 1, MEMORY: -1}, criterion=True),
         _contrast("whole record − OwnWords", {WHOLE_RECORD: 1, OWNWORDS: -1})),
        {"seed": 20260920, "draws": 100_000},
        ("The criterion, fixed in advance: OwnWords − memory has its 95% interval above zero.",),
    )


def _memory_systems() -> PaperProtocol:
    return PaperProtocol(
        "memory-systems", "Memory systems", "Table 1, App. H",
        "OwnWords against the written memory, Mem0 as deployed, the MemGPT-style design and memory + OwnWords, "
        "with the whole record; six contrasts, declared descriptive (no criterion).",
        (MEMORY, OWNWORDS, MEM0, MEMGPT, MEMORY_PLUS_OWNWORDS, WHOLE_RECORD),
        (_contrast("Mem0 − OwnWords", {MEM0: 1, OWNWORDS: -1}),
         _contrast("Mem0 − memory", {MEM0: 1, MEMORY: -1}),
         _contrast("MemGPT-style − memory + OwnWords", {MEMGPT: 1, MEMORY_PLUS_OWNWORDS: -1}),
         _contrast("memory + OwnWords − OwnWords", {MEMORY_PLUS_OWNWORDS: 1, OWNWORDS: -1}),
         _contrast("OwnWords − memory", {OWNWORDS: 1, MEMORY: -1}),
         _contrast("whole record − OwnWords", {WHOLE_RECORD: 1, OWNWORDS: -1})),
        {"seed": 20260922, "draws": 100_000},
    )


def _sweep_keys(words: int) -> tuple[str, str, str]:
    budget = "B=|memory|" if words == 100 else f"B=|memory(concrete,{words}w)|"
    return _memory("concrete", "one-shot", words), f"ownwords({budget})", f"recency({budget})"


def _budget_sweep() -> PaperProtocol:
    per_budget = {words: _sweep_keys(words) for words in SWEEP_MEMORY_WORDS}
    conditions = (*(key for keys in per_budget.values() for key in keys), WHOLE_RECORD)
    share = 1 / len(SWEEP_MEMORY_WORDS)
    criteria = (
        _contrast("mean over budgets: OwnWords − memory",
                  {**{o: share for _, o, _ in per_budget.values()}, **{m: -share for m, _, _ in per_budget.values()}},
                  criterion=True),
        _contrast("mean over budgets: OwnWords − recency",
                  {**{o: share for _, o, _ in per_budget.values()}, **{r: -share for _, _, r in per_budget.values()}},
                  criterion=True),
        _contrast("OwnWords at 400 − at 50 words", {per_budget[400][1]: 1, per_budget[50][1]: -1}, criterion=True),
    )
    descriptive = tuple(
        _contrast(f"{words}w: {label}", terms)
        for words, (m, o, r) in per_budget.items()
        for label, terms in (("OwnWords − memory", {o: 1, m: -1}), ("OwnWords − recency", {o: 1, r: -1}),
                             ("whole record − OwnWords", {WHOLE_RECORD: 1, o: -1}))
    )
    return PaperProtocol(
        "budget-sweep", "Budget sweep", "App. G.1, Table 17",
        "Concrete memories of 50, 100, 200 and 400 words; OwnWords and the most recent sentences at each "
        "B = |memory|; the whole record. Three criteria fixed before the first call, and every per-budget "
        "contrast (descriptive).",
        conditions, criteria + descriptive, {"seed": 20260924, "draws": 100_000},
        ("Within a task, conditions with byte-identical messages share one answer and one grade (G.1).",),
    )


QUESTION_FREE = "question-free(B=|memory|)"
MEMORY_RAW_HEADER = "memory(concrete,100w)+raw-header"
QUESTION_FREE_MEMORY_HEADER = "question-free(B=|memory|)+memory-header"
DENSE = "dense(B=|memory|)"
# Table 15's cells: (evidence, header) → condition.
FACTORIAL_CELLS = {("memory", "memory"): MEMORY, ("memory", "raw"): MEMORY_RAW_HEADER,
                   ("excerpts", "memory"): QUESTION_FREE_MEMORY_HEADER, ("excerpts", "raw"): QUESTION_FREE}


def _factorial() -> PaperProtocol:
    c = FACTORIAL_CELLS
    return PaperProtocol(
        "factorial", "Evidence × header factorial", "App. F, Table 15",
        "What the evidence is (the written memory, or question-free excerpts at B = |memory|) crossed with how it is "
        "introduced (the memory header of E.6, or the raw-evidence header of E.7): four cells, one generation call "
        "each at the same per-task character budget; the two main effects and the interaction, descriptive.",
        (c["memory", "memory"], c["memory", "raw"], c["excerpts", "memory"], c["excerpts", "raw"]),
        (_contrast("evidence: excerpts − memory (mean over headers)", {
            c["excerpts", "memory"]: 0.5, c["excerpts", "raw"]: 0.5, c["memory", "memory"]: -0.5, c["memory", "raw"]: -0.5}),
         _contrast("header: raw-evidence − memory (mean over evidence)", {
             c["memory", "raw"]: 0.5, c["excerpts", "raw"]: 0.5, c["memory", "memory"]: -0.5, c["excerpts", "memory"]: -0.5}),
         _contrast("interaction: (excerpts − memory, raw-evidence header) − (excerpts − memory, memory header)", {
             c["excerpts", "raw"]: 1, c["memory", "raw"]: -1, c["excerpts", "memory"]: -1, c["memory", "memory"]: 1}),
         _contrast("excerpts, raw-evidence header − memory one-shot", {c["excerpts", "raw"]: 1, c["memory", "memory"]: -1})),
        {"seed": 20260920, "draws": 100_000},
        ("Post hoc in the paper (the development half, after OwnWords's selection step was fixed); all four cells are "
         "generated and graded in one run, and the table uses the tasks graded in all four.",),
    )


def _dense_vs_bm25() -> PaperProtocol:
    return PaperProtocol(
        "dense-vs-bm25", "Dense retriever versus BM25 (beyond the paper)", "§9 future work; not in the paper",
        "OwnWords (BM25) against the same path with a dense ranker (cosine similarity of all-MiniLM-L6-v2 sentence "
        "embeddings to the question) at B = |memory|, and the written memory; descriptive contrasts.",
        (MEMORY, OWNWORDS, DENSE),
        (_contrast("dense − OwnWords (BM25)", {DENSE: 1, OWNWORDS: -1}),
         _contrast("dense − memory", {DENSE: 1, MEMORY: -1}),
         _contrast("OwnWords − memory", {OWNWORDS: 1, MEMORY: -1})),
        {"seed": 20260922, "draws": 100_000},
        ("Not an experiment of the paper: the seed is the one it uses for the analyses added after the first "
         "confirmation. Within a task, a record that fits B gives both retrievers the same message, one shared answer.",),
    )


NOTES_FROM_RECORD = "whole-record+notes(120w)"
NOTES_FROM_MEMORY = "memory(concrete,100w)+notes(120w)"
PRUNED = "memory(concrete,100w)+pruned"


def _development_attempts() -> PaperProtocol:
    return PaperProtocol(
        "development-attempts", "Development attempts: notes, then an answer; pruning the one-shot draft", "App. F, E.12",
        "The memory one-shot against two added model stages: question-specific notes (at most 120 words) from the "
        "whole record (as the paper) or from the memory, then an answer; and the one-shot draft pruned by one extra "
        "call; with the whole record. Descriptive contrasts.",
        (MEMORY, NOTES_FROM_RECORD, NOTES_FROM_MEMORY, PRUNED, WHOLE_RECORD),
        (_contrast("notes (whole record) − whole record", {NOTES_FROM_RECORD: 1, WHOLE_RECORD: -1}),
         _contrast("notes (whole record) − memory one-shot", {NOTES_FROM_RECORD: 1, MEMORY: -1}),
         _contrast("notes (memory) − memory one-shot", {NOTES_FROM_MEMORY: 1, MEMORY: -1}),
         _contrast("pruned − memory one-shot (the unedited draft)", {PRUNED: 1, MEMORY: -1})),
        {"seed": 20260919, "draws": 100_000},
        ("The pruned condition's draft b0 is the memory one-shot's own answer (one shared call and grade).",
         "Notes from the memory are not in the paper (it wrote them from the record): an added comparison."),
    )


SCREENER_ONLY = "screener-only"
PROFILE = "memory(profile,100w)+one-shot"
TRAIT = "memory(trait,100w)+one-shot"
TAGS = "tags(6-10,top-40)+one-shot"


def _representations() -> PaperProtocol:
    gains = tuple(_contrast(f"{label} − screener-only", {key: 1, SCREENER_ONLY: -1})
                  for label, key in (("concrete memory", MEMORY), ("trait memory", TRAIT), ("combined profile", PROFILE),
                                     ("tags", TAGS)))
    return PaperProtocol(
        "representations", "Representations run anew: the combined profile of imputed scales and tags", "App. K, Tables 31-32",
        "App. K's schema-constrained representation written anew from the permitted record: the combined profile "
        "(28 model-imputed entries: Big Five, MBTI, Schwartz values, self-determination needs, moral foundations, "
        "four dispositions) at the memories' length, and the tag arm (free labels per session, then 6-10 tags "
        "chosen from the cohort's 40 most frequent), against the concrete and trait memories; gains relative to the "
        "screener-only reference, as Table 31. Descriptive contrasts.",
        (SCREENER_ONLY, MEMORY, TRAIT, PROFILE, TAGS),
        (*gains, _contrast("combined profile − trait memory", {PROFILE: 1, TRAIT: -1}),
         _contrast("combined profile − concrete memory", {PROFILE: 1, MEMORY: -1})),
        {"seed": 20260917, "draws": 10_000},
        ("App. K's numbers are reanalyses of old outputs; this runs the representation anew under the verified "
         "protocol (earliest-prefix source, same generator and judge). The profile and tag prompts are written here.",
         "The tag vocabulary is the run's cohort's 40 most frequent generated labels (App. K: the respondents')."),
    )


WRONG_PERSON = f"memory(concrete,100w)+wrong-person(seed={WRONG_PERSON_SEED})"
SCREENER_REFERENCE = "screener-only"


def _wrong_person() -> PaperProtocol:
    return PaperProtocol(
        "wrong-person", "Own versus a wrong person's memory", "App. K",
        "Each session's own concrete memory against another cohort member's (a seeded derangement of the sessions "
        "across people: no one is shown their own), with the screener-only reference; descriptive contrasts.",
        (MEMORY, WRONG_PERSON, SCREENER_REFERENCE),
        (_contrast("own − wrong person", {MEMORY: 1, WRONG_PERSON: -1}),
         _contrast("own − screener-only", {MEMORY: 1, SCREENER_REFERENCE: -1}),
         _contrast("wrong person − screener-only", {WRONG_PERSON: 1, SCREENER_REFERENCE: -1})),
        {"seed": 20260917, "draws": 10_000},
        ("The control reflects both own-person information and harm from irrelevant narratives (App. K). App. K's "
         "numbers are reanalyses of old profiles; this runs the control anew on permitted-prefix memories.",),
    )


QUESTION_ALONE = "question-only"


def _history_benchmark() -> PaperProtocol:
    return PaperProtocol(
        "history-benchmark", "History benchmark: history and screener against the question alone",
        "§4, Fig. 3a, Table 30 (App. J)",
        "The available history (the current dialogue) with the screener against the question alone, one call "
        "each. Run it once per generator configuration on the same cohort with the same judge: the report pairs "
        "the runs that differ only in the generator (Fig. 3a, Table 30).",
        (CURRENT_DIALOGUE, QUESTION_ALONE),
        (_contrast("history − question alone", {CURRENT_DIALOGUE: 1, QUESTION_ALONE: -1}),),
        {"seed": 20260917, "draws": 10_000},
        ("The paper's four configurations were minimum-effort generators (App. J); each is one run of this "
         "protocol with its own generator settings.",),
    )


RECENCY = "recency(B=|memory|)"
PARAPHRASED = {OWNWORDS: f"{OWNWORDS}+paraphrased", RECENCY: f"{RECENCY}+paraphrased",
               WHOLE_RECORD: f"{WHOLE_RECORD}+paraphrased"}


def _paraphrase_controls() -> PaperProtocol:
    return PaperProtocol(
        "paraphrase-controls", "Content versus wording: the evidence in other words (beyond the paper)",
        "§9 (the controlled paraphrase comparison it calls for); not in the paper",
        "OwnWords and recency at B = |memory| and the whole record, each verbatim and rewritten in other words by "
        "one call within the same character budget (then answered with the same prompt), and the written memory: "
        "verbatim − paraphrased isolates the wording of the evidence from its content. Descriptive contrasts.",
        (MEMORY, OWNWORDS, PARAPHRASED[OWNWORDS], RECENCY, PARAPHRASED[RECENCY], WHOLE_RECORD, PARAPHRASED[WHOLE_RECORD]),
        (_contrast("OwnWords: verbatim − paraphrased", {OWNWORDS: 1, PARAPHRASED[OWNWORDS]: -1}),
         _contrast("recency: verbatim − paraphrased", {RECENCY: 1, PARAPHRASED[RECENCY]: -1}),
         _contrast("whole record: verbatim − paraphrased", {WHOLE_RECORD: 1, PARAPHRASED[WHOLE_RECORD]: -1}),
         _contrast("OwnWords − memory", {OWNWORDS: 1, MEMORY: -1}),
         _contrast("paraphrased OwnWords − memory", {PARAPHRASED[OWNWORDS]: 1, MEMORY: -1})),
        {"seed": 20260922, "draws": 100_000},
        ("Not an experiment of the paper: the seed is the one it uses for the analyses added after the first "
         "confirmation. A paraphrase over its budget is cut at the budget (at the last whitespace within it); "
         "the share cut is reported.",),
    )


REWRITE_BASES = (MEMORY, OWNWORDS, WHOLE_RECORD)
REWRITE_CONTRASTS = (_contrast("OwnWords − memory", {OWNWORDS: 1, MEMORY: -1}),
                     _contrast("whole record − memory", {WHOLE_RECORD: 1, MEMORY: -1}),
                     _contrast("OwnWords − whole record", {OWNWORDS: 1, WHOLE_RECORD: -1}))
REWRITE_NOTE = ("Not an experiment of the paper: the seed is the one it uses for the analyses added after the first "
                "confirmation. Each rewrite's draft is its base condition's own answer (one shared call and grade).")


def _answer_controls() -> PaperProtocol:
    return PaperProtocol(
        "answer-controls", "Judge invariance and equal length: each answer in other words and at 60 words "
        "(beyond the paper)", "§9 (content versus wording or brevity); not in the paper",
        "The memory one-shot, OwnWords at B = |memory| and the whole record; each answer rewritten once in other "
        "words with its content kept and once to about 60 words, every rewrite graded by the same judge: the share "
        "of grades a paraphrase changes, κ between the gradings, and each contrast under the paraphrase grades and "
        "at equal length. Descriptive contrasts.",
        (*REWRITE_BASES, *(f"{key}+answer-paraphrased" for key in REWRITE_BASES),
         *(f"{key}+length(60w)" for key in REWRITE_BASES)),
        REWRITE_CONTRASTS, {"seed": 20260922, "draws": 100_000}, (REWRITE_NOTE,),
    )


def _length_median_controls() -> PaperProtocol:
    rewritten = {key: f"{key}+length(median:{MEMORY})" for key in REWRITE_BASES}
    return PaperProtocol(
        "length-median-controls", "Equal length at the memory's median: each answer rewritten to the median length "
        "of the memory's answers (beyond the paper)", "§9 (content versus wording or brevity); not in the paper",
        "The memory one-shot, OwnWords at B = |memory| and the whole record; each answer rewritten once to the median "
        "length in words of the memory one-shot's answers in this run (computed when the rewrites are planned and "
        "stated in every rewrite's journaled request), every rewrite graded by the same judge: each contrast as "
        "answered and at the memory's length. Descriptive contrasts.",
        (*REWRITE_BASES, *rewritten.values()),
        REWRITE_CONTRASTS, {"seed": 20260922, "draws": 100_000}, (REWRITE_NOTE,),
    )


PAPER_PROTOCOLS: dict[str, PaperProtocol] = {
    p.key: p for p in (_common(), _confirmation(), _memory_systems(), _budget_sweep(), _factorial(), _dense_vs_bm25(), _wrong_person(),
                        _development_attempts(), _representations(), _history_benchmark(),
                        _paraphrase_controls(), _answer_controls(), _length_median_controls())
}


def _is_runnable(key: str) -> bool:
    return key in CONDITIONS and get_condition(key).runnable


def paper_protocol(name: str, runnable: Callable[[str], bool] = _is_runnable) -> Instantiated:
    """The template `name` for this installation: conditions it cannot run are left out with the
    contrasts that use them, each named in `unavailable`."""
    try:
        template = PAPER_PROTOCOLS[name]
    except KeyError:
        raise KeyError(f"no ready-made protocol {name!r}; known: {', '.join(PAPER_PROTOCOLS)}") from None
    missing = [key for key in template.conditions if not runnable(key)]
    unavailable = []
    for key in missing:
        why = get_condition(key).note if key in CONDITIONS else "not a condition of this installation"
        dropped = [c["name"] for c in template.contrasts if key in c["terms"]]
        unavailable.append(f"{key} is unavailable here ({why}); left out"
                           + (f", with its contrasts {', '.join(dropped)}" if dropped else ""))
    return Instantiated(
        template,
        [key for key in template.conditions if key not in missing],
        [dict(c, terms=dict(c["terms"])) for c in template.contrasts if not set(c["terms"]) & set(missing)],
        unavailable,
    )
