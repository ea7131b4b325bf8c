"""``schedule --relax`` with a fractional relaxed A, through every (39) back end (issue: the relaxation crashed the
explanation with an internal error whenever A was not whole)."""

from __future__ import annotations

import pytest

from _cli import ok_json, run_any

ARGS = ("schedule", "--chain", "two-state:p=0.1,q=0.1", "--users", "100", "--max-penalty", "0.0198",
        "--max-age", "60", "--max-interval", "60", "--relax")


@pytest.mark.parametrize("method", ["cvxpy", "heuristic", "pyomo"])
def test_a_fractional_relaxed_aging_is_reported_with_its_integer_neighbour(method):
    r = ok_json(*ARGS, "--method", method)
    assert r["relaxed"] is True
    assert not float(r["A"]).is_integer() and 4.2 < r["A"] < 4.25  # the relaxation's A, between the neighbours 4 and 5
    d = r["deployable"]
    # source: the exact eq. (30) at the best integer neighbour, the same for every back end (independent of the relaxation)
    assert (d["A"], d["S_bar"]) == (4, 6)
    assert d["peak_risk"] == pytest.approx(0.458626, abs=1e-6)
    assert any("not a whole number of slots" in s for s in r["explanation"])


def test_the_text_of_a_fractional_relaxation_exits_0():
    res = run_any(*ARGS, "--method", "cvxpy")
    assert res.returncode == 0, res.stderr
    assert "relaxation  : A = 4.2167" in res.stdout and "deployable  : A = 4 slots, S̄ = 6 slots" in res.stdout
