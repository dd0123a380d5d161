"""Closed-form survey experiments: the paper's Twin-2K-500 benchmark (§8, App. E, App. H). No Django.

The modules, in the order a run uses them:

- `records`: what a respondent is once read (blocks, questions, answers) and the error an import raises;
- `reader`: the `wave_split` release (parquet chunks) and the same rows as JSON/JSONL, validated whole;
- `leaks`: the per-respondent leak check (persona vs targets; the two wave-4 columns);
- `targets`: the closed-form single-answer wave-4 items and the seeded respondent samples;
- `lines`: a respondent's answers as one line per answered item (what screener and OwnWords show);
- `screener`: the 14 demographic answer lines under [SCREENER Q&A];
- `ownwords`: one BM25 ranking per target survey block, filled round-robin to a budget B;
- `prompt`: the survey conditions and the App. E "Twin-2K-500 answering" messages;
- `answers`: the answer parser (item number -> option number, problems recorded per item);
- `scores`: accuracy, normalized deviation, per-respondent means, paired whole-person intervals,
  the human test-retest row and the prespecified criteria.

Code inside the project imports the defining module; this package re-exports nothing.
"""
