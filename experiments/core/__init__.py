"""The paper's procedures as plain Python: imports no Django, so a notebook can `from experiments.core import evidence, stats`.

Readers of interview files (`interviews`), the task rule (`tasks`), the cohort draw (`cohorts`),
evidence builders (`evidence`), prompts and message assembly (`prompts`, `assembly`), the
condition registry (`conditions`), output parsers (`parsers`), planned-contrast syntax
(`contrasts`), the LLM wire and client (`llm`), the statistics (`stats`), canonical JSON
(`canonical`). Modules here import nothing outside this package (tests/test_layout.py).
"""
