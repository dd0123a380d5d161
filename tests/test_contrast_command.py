"""manage.py contrast: the app's statistics on any CSV of paired grades."""
import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from experiments.core import stats


def write_csv(path, rows, header="person,a,b"):
    path.write_text(header + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return path


def run(*args):
    out = StringIO()
    call_command("contrast", *args, stdout=out)
    return out.getvalue()


def test_it_reproduces_the_bootstrap_and_skips_missing_grades(tmp_path):
    rng = np.random.default_rng(1)
    rows = [(f"p{i % 7}", int(rng.integers(0, 4)), int(rng.integers(0, 4))) for i in range(40)]
    rows.append(("p1", "", 2))  # missing: not paired
    path = write_csv(tmp_path / "g.csv", rows)
    report = json.loads(run("--csv", str(path), "--a", "a", "--b", "b", "--person", "person",
                            "--seed", "11", "--draws", "3000", "--json"))
    diff = (np.array([r[1] for r in rows[:-1]]) - np.array([r[2] for r in rows[:-1]])) / 3
    expected = stats.paired_bootstrap([r[0] for r in rows[:-1]], diff, seed=11, draws=3000)
    assert report["estimate"] == pytest.approx(expected.estimate)
    assert (report["lo"], report["hi"]) == pytest.approx((expected.lo, expected.hi))
    assert (report["tasks"], report["people"], report["lost_to_missing"]) == (40, 7, 1)


def test_the_family_interval_shares_the_draws_and_is_paired_bootstraps_to_the_bit(tmp_path):
    rng = np.random.default_rng(5)
    rows = [(f"p{i % 9}", int(rng.integers(0, 4)), int(rng.integers(0, 4))) for i in range(60)]
    path = write_csv(tmp_path / "g.csv", rows)
    report = json.loads(run("--csv", str(path), "--a", "a", "--b", "b", "--person", "person",
                            "--seed", "4", "--draws", "2500", "--family-size", "8", "--json"))
    clusters = [r[0] for r in rows]
    diff = (np.array([r[1] for r in rows]) - np.array([r[2] for r in rows])) / 3
    plain = stats.paired_bootstrap(clusters, diff, seed=4, draws=2500)
    family = stats.paired_bootstrap(clusters, diff, seed=4, draws=2500, tails=stats.family_tails(8))
    assert (report["lo"], report["hi"]) == (plain.lo, plain.hi)
    assert (report["family_lo"], report["family_hi"]) == (family.lo, family.hi)
    assert report["family_lo"] < report["lo"] and report["hi"] < report["family_hi"]


def test_text_output_names_the_contrast_and_the_family_interval(tmp_path):
    path = write_csv(tmp_path / "g.csv", [("x", 3, 1), ("y", 2, 2), ("z", 1, 0)])
    text = run("--csv", str(path), "--a", "a", "--b", "b", "--person", "person", "--seed", "1",
               "--draws", "1000", "--family-size", "8")
    assert text.startswith("a minus b: +0.3333")
    assert "family interval" in text and "(m=8)" in text


@pytest.mark.parametrize(
    "rows, args, message",
    [
        ([("x", 3, 1)], ["--a", "nope"], "no column nope"),
        ([("x", 4, 1)], [], "grades are 0, 1, 2 or 3"),
        ([("x", "high", 1)], [], "is not a grade"),
        ([("x", "", 1)], [], "no task has both grades"),
        ([("x", "inf", 1)], [], "grades are 0, 1, 2 or 3"),
    ],
)
def test_bad_input_gets_a_clear_message(tmp_path, rows, args, message):
    path = write_csv(tmp_path / "g.csv", rows)
    base = {"--a": "a", "--b": "b", "--person": "person", "--seed": "1"}
    base.update(dict(zip(args[::2], args[1::2])))
    with pytest.raises(CommandError, match=message):
        run("--csv", str(path), *[x for kv in base.items() for x in kv])


def test_a_missing_file_is_reported(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        run("--csv", str(tmp_path / "none.csv"), "--a", "a", "--b", "b", "--person", "p", "--seed", "1")
