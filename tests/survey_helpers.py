"""Shared pieces of the survey tests: the bundled synthetic sample, rows to mutate, the generator."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE_DIR = REPO / "experiments" / "sample_data" / "twin2k_synthetic"
SAMPLE = SAMPLE_DIR / "wave_split_synthetic.jsonl"
FULL_PERSONA_SAMPLE = SAMPLE_DIR / "full_persona_synthetic.jsonl"
GENERATOR = REPO / "benchmarks" / "make_twin2k_synthetic.py"
JSON_COLUMNS = ("wave1_3_persona_json", "wave4_Q_wave1_3_A", "wave4_Q_wave4_A")


def sample_rows() -> list[dict]:
    """The bundled rows as written (JSON columns still strings)."""
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def decoded(row: dict) -> dict:
    """A row with its three JSON columns decoded, for mutation."""
    return {key: json.loads(value) if key in JSON_COLUMNS else value for key, value in row.items()}


def encoded(row: dict) -> dict:
    return {key: json.dumps(value) if key in JSON_COLUMNS and not isinstance(value, str) else value
            for key, value in row.items()}


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def bad_answer_rows(index: int) -> tuple[list[dict], str, str]:
    """The sample's rows with respondent `index` (from 0) giving an answer outside its options:
    (rows, that respondent's pid, the question's id)."""
    rows = sample_rows()
    bad = decoded(rows[index])
    question = next(q for b in bad["wave4_Q_wave4_A"] for q in b["Questions"]
                    if q.get("QuestionType") == "MC" and q.get("Answers"))
    question["Answers"]["SelectedByPosition"] = 99
    rows[index] = encoded(bad)
    return rows, str(bad["pid"]), question["QuestionID"]


def find_question(blocks: list, qid: str) -> dict:
    for block in blocks:
        for question in block["Questions"]:
            if question.get("QuestionID") == qid:
                return question
    raise KeyError(qid)


def generate(out: Path, *args: str) -> Path:
    """Run the synthetic generator (stdlib only) into `out`; returns the JSONL it wrote."""
    subprocess.run([sys.executable, str(GENERATOR), "--out", str(out), *args], check=True,
                   capture_output=True, text=True, timeout=300)
    return out / "wave_split_synthetic.jsonl"
