"""The Python report of discounted DP (design_discounted → DiscountedReport) prints exactly what
``policyopt discounted`` prints, and lower bounds (Solution.bound, a MIP/LP/dual bound on a minimised objective)
are printed rounded down in text and JSON.

Source of the schedules: F. Farokhi, "Temporally Discounted Differential Privacy for Evolving Datasets on an
Infinite Horizon", ACM/IEEE ICCPS, 2020, Corollaries 8, 12, 16.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyopt import DiscountedReport, Population, design_discounted, design_schedule, two_state_chain
from policyopt.errors import InvalidInputError
from policyopt.formatting import fmt_lower, fmt_upper, fmt_value, round_down
from policyopt.io import read_readings_csv

from _cli import TableCells, run_cli, strict_json  # noqa: E402
import _warm_cli  # noqa: E402





def without_wall_time(text: str) -> list:
    lines = text.rstrip("\n").splitlines()
    assert lines[-1].startswith("wall time  : ")
    return lines[:-1]


CASES = [
    (["--notion", "exponential", "--epsilon", "1", "--alpha", "0.9", "--horizon", "30"],
     dict(notion="exponential", epsilon=1.0, horizon=30, alpha=0.9)),
    (["--notion", "dp", "--epsilon", "2", "--horizon", "400"], dict(notion="dp", epsilon=2.0, horizon=400)),
    # source: Farokhi (2020), eq. (14) at β = 4 breaks the guarantee at t = 1 (a warning on stderr)
    (["--notion", "hyperbolic", "--epsilon", "1", "--beta", "4", "--horizon", "20", "--schedule", "paper"],
     dict(notion="hyperbolic", epsilon=1.0, horizon=20, beta=4.0, schedule="paper")),
    (["--notion", "hyperbolic", "--epsilon", "1", "--beta", "0.5", "--horizon", "30", "--schedule", "optimal"],
     dict(notion="hyperbolic", epsilon=1.0, horizon=30, beta=0.5, schedule="optimal")),
]


@pytest.mark.parametrize("argv, kw", CASES)
def test_report_str_and_dict_are_the_cli_output(argv, kw):
    """Identical text and JSON but the wall time; the warnings are the CLI's stderr lines."""
    text = run_cli("discounted", *argv)
    doc = strict_json(run_cli("discounted", *argv, "--json").stdout)
    report = design_discounted(kw.pop("notion"), kw.pop("epsilon"), kw.pop("horizon"), **kw)
    assert isinstance(report, DiscountedReport)
    assert without_wall_time(text.stdout) == without_wall_time(str(report))
    py = report.to_dict()
    assert doc.pop("wall_time_s") >= 0 and py.pop("wall_time_s") >= 0
    assert doc == py
    assert text.stderr.splitlines() == [f"policyopt: warning: {w}" for w in report.warnings]


def test_paper_corollary16_warning_is_in_the_report():
    # source: Farokhi (2020), eq. (14) at β = 4: loss at t = 1 is ε/0.94009 > ε
    report = design_discounted("hyperbolic", 1.0, 20, beta=4.0, schedule="paper")
    assert not report.to_dict()["holds"] and report.to_dict()["worst_t"] == 1
    assert any("Corollary 16 as printed (eq. 14) is invalid" in w for w in report.warnings)


def test_report_with_a_data_file(tmp_path):
    # two homes, 3 days of hourly readings: the CLI names the file, Python the same source label
    rng = np.random.default_rng(7)
    rows = [(u, t, float(rng.uniform(0.1, 2.0))) for u in ("a", "b") for t in range(72)]
    path = tmp_path / "r.csv"
    pd.DataFrame(rows, columns=["user", "time", "value"]).to_csv(path, index=False)
    argv = ["discounted", "--notion", "dp", "--epsilon", "1", "--horizon", "5", "--data", str(path), "--clip", "50"]
    text = run_cli(*argv)
    report = design_discounted("dp", 1.0, 5, data=read_readings_csv(str(path)), clip=50.0, source=f"data {path}")
    assert without_wall_time(text.stdout) == without_wall_time(str(report))
    assert report.to_dict()["source"] == f"data {path}, 2 homes, 3 days of 24 hourly readings, daily kWh"
    assert "data given in Python, 2 homes" in str(design_discounted("dp", 1.0, 5, data=read_readings_csv(str(path))))



def test_report_html_table():
    report = design_discounted("exponential", 1.0, 30, alpha=0.9)
    parser = TableCells()
    parser.feed(report._repr_html_())
    rows = dict(zip(parser.cells[::2], parser.cells[1::2]))
    r = report.to_dict()
    assert rows["worst discounted loss (nats, upper bound)"] == f"{fmt_upper(r['worst_discounted_loss'], 12)} at slot 30"
    assert rows["guarantee"] == "holds at every slot"
    assert rows["total variance (kWh²)"] == fmt_value(r["total_variance"])
    assert report.worst_discounted_loss == r["worst_discounted_loss"] <= 1.0


@pytest.mark.parametrize("args, kw, match", [
    (("geometric", 1.0, 10), {}, r"`notion` must be one of \('dp', 'exponential', 'hyperbolic'\), got 'geometric'"),
    (("dp", 1.0, 10), {"schedule": "best"}, r"`schedule` must be one of \('corollary', 'optimal', 'paper'\), got 'best'"),
    (("dp", 1.0, 10), {"alpha": 0.5}, r"`notion`='dp' takes neither `alpha` nor `beta`, got alpha=0.5, beta=None"),
    (("exponential", 1.0, 10), {"alpha": 1.5}, r"`alpha` must be in \(0, 1\) \(\(0, 1\] with schedule='optimal'\), got 1.5"),
    (("exponential", 1.0, 10), {}, r"`notion`='exponential' takes `alpha` in \(0, 1\) and no `beta`, got alpha=None"),
    (("hyperbolic", 1.0, 10), {"alpha": 0.5}, r"`notion`='hyperbolic' takes `beta` > 0 and no `alpha`, got alpha=0.5"),
    (("dp", 1.0, 10), {"solver": "dual"}, r"`solver`='dual' applies to schedule='optimal' only, got schedule='corollary'"),
])
def test_design_discounted_errors(args, kw, match):
    with pytest.raises(InvalidInputError, match=match):
        design_discounted(*args, **kw)


# ---------------------------------------------------------------------------------------------
# lower bounds are rounded down
# ---------------------------------------------------------------------------------------------


def test_fmt_lower_floors_many_digits():
    # source: the cases below, by hand (floor at 6 and 8 significant digits)
    assert fmt_lower(0.123456789) == "0.123456" and fmt_value(0.123456789) == "0.123457"
    assert fmt_lower(332.094775210843) == "332.094" and fmt_value(332.094775210843) == "332.095"
    assert fmt_lower(1.4913211368245343, 8) == "1.4913211"
    assert fmt_lower(-2.5000001) == "-2.50001"
    assert fmt_lower(None) == "—" and fmt_lower(0.0) == "0"


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_infinity=False))
def test_printed_lower_bounds_are_rounded_down(x):
    assert float(fmt_lower(x)) <= x and float(fmt_lower(x, 8)) <= x
    assert round_down(x) <= x


def test_discounted_optimal_bound_is_rounded_down_in_json():
    report = design_discounted("hyperbolic", 1.0, 30, beta=0.5, schedule="optimal")
    raw = report.solution.bound
    assert report.to_dict()["bound"] == math.nextafter(raw, -math.inf) < raw
    doc = strict_json(run_cli("discounted", "--notion", "hyperbolic", "--epsilon", "1", "--beta", "0.5", "--horizon", "30",
                          "--schedule", "optimal", "--json").stdout)
    assert doc["bound"] == report.to_dict()["bound"]


def test_schedule_bounds_are_rounded_down_in_json_and_text():
    report = design_schedule(Population([two_state_chain(0.1, 0.1)], [20]), max_penalty=0.09, A_max=60, S_max=60,
                             method="all", relax=True)
    out = report.to_dict()
    assert out["bound"] == math.nextafter(report.solution.bound, -math.inf)
    argv = ["schedule", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.09", "--max-age", "60",
            "--max-interval", "60", "--method", "all", "--relax"]
    doc = strict_json(run_cli(*argv, "--json").stdout)
    text = run_cli(*argv).stdout
    pyomo = next(r for r in doc["comparison"] if r["method"].startswith("pyomo"))
    assert pyomo["bound"] is not None and pyomo["bound"] <= pyomo["objective"]
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("pyomo"))
    assert fmt_lower(pyomo["bound"], 8) in line.split() and float(fmt_lower(pyomo["bound"], 8)) <= pyomo["bound"]
    # SCIP's bound here is 1.71302417562…: rounded to nearest it would print 1.7130242, above the bound
    assert pyomo["bound"] == pytest.approx(1.7130241756, rel=1e-9) and fmt_value(pyomo["bound"], 8) not in line.split()


def test_tpl_budget_lower_bound_is_rounded_down_in_text():
    argv = ["tpl-budget", "--pb", "0.8,0.2;0.2,0.8", "--pf", "0.8,0.2;0.1,0.9", "--alpha", "1", "--horizon", "10",
            "--method", "optimal"]
    doc = strict_json(run_cli(*argv, "--json").stdout)
    key = "dual_bound" if doc["proof"] == "scip" else "lp_bound"
    text = run_cli(*argv).stdout
    shown = re.search(r"lower bound ([0-9.e+-]+)\)", text).group(1)
    assert shown == fmt_lower(doc[key]) and float(shown) <= doc[key]


def test_data_without_every_hour_names_the_home_the_day_and_the_resolution(tmp_path):
    """Half-hourly readings with one gap: the error names the home, the day, its slots and the expected hourly
    resolution (issue 27: it said only "some home misses a day")."""
    rows = [(u, t, 0.5) for u in ("a", "b") for t in range(96) if not (u == "b" and t == 50)]
    path = tmp_path / "half.csv"
    pd.DataFrame(rows, columns=["user", "time", "value"]).to_csv(path, index=False)
    proc = _warm_cli.run(["discounted", "--notion", "dp", "--epsilon", "1", "--horizon", "2", "--data", str(path)],
                         timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("policyopt: error: `df` (--data): home 'b' has 23 of the 24 readings of day 2 (slots 48..71): "
                           "daily means need one reading per home in each of the 24 slots of every day (hourly kWh, "
                           "time in whole hours from slot 0); finer or coarser readings (e.g. half-hourly) must be "
                           "summed to hours first\n")
    # a complete half-hourly file is not refused, but the report says how many 24-slot days it read (4, not 2)
    full = tmp_path / "full.csv"
    pd.DataFrame([(u, t, 0.5) for u in ("a", "b") for t in range(96)], columns=["user", "time", "value"]).to_csv(
        full, index=False)
    text = run_cli("discounted", "--notion", "dp", "--epsilon", "1", "--horizon", "2", "--data", str(full)).stdout
    assert "2 homes, 4 days of 24 hourly readings, daily kWh" in text
