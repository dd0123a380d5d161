"""Closed-form survey experiments: the paper's Twin-2K-500 benchmark (§8, App. E, App. H). No Django.

The modules, in the order a run uses them:

- `records`: what a respondent is once read (blocks, questions, answers) and the error an import raises;
- `reader`: the `wave_split` release (parquet chunks) and the same rows as JSON/JSONL, validated whole
  (`questions`: the per-type checks of one column's blocks and questions);
- `prepare`: respondents made ready to store in batches, in worker processes (`PreparedStream`), for
  imports that write while they read;
- `leaks`: the per-respondent leak check (persona vs targets; the two wave-4 columns);
- `targets`: the closed-form single-answer wave-4 items and the seeded respondent samples;
- `lines`: a respondent's answers as one line per answered item (what screener and OwnWords show);
- `screener`: the 14 demographic answer lines under [SCREENER Q&A];
- `ownwords`: one BM25 ranking per target survey block, filled round-robin to a budget B;
- `prompt`: the survey conditions and the App. E "Twin-2K-500 answering" messages;
- `answers`: the answer parser (item number -> option number, problems recorded per item);
- `scores`: accuracy, normalized deviation, per-respondent means, paired whole-person intervals
  (`intervals`: many contrasts on one stream of draws), the human test-retest row and the
  prespecified criteria.

In a notebook:

    from experiments.core.survey.reader import read_survey_path
    from experiments.core.survey.leaks import split_leaks
    from experiments.core.survey.targets import target_items, respondent_samples
    from experiments.core.survey.screener import screener_text
    from experiments.core.survey.ownwords import survey_ownwords
    from experiments.core.survey.prompt import OWNWORDS, assemble_survey
    from experiments.core.survey.answers import parse_survey_answer
    from experiments.core.survey.scores import score_items

    respondents, violations = split_leaks(read_survey_path("wave_split/chunks"))
    items = target_items(respondents[0])
    sent = assemble_survey(OWNWORDS, items, screener=screener_text(respondents[0]),
                           excerpts=survey_ownwords(respondents[0], len(memory)))
    parsed = parse_survey_answer(reply_text, [len(i.options) for i in items])
    scores = score_items(respondents[0].pid, items, [a.option for a in parsed.items])

Code inside the project imports the defining module; this package re-exports nothing.
"""
