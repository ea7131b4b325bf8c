"""Utility bounds beyond float range are one-line errors, not an overflow or an underflow (issue 33, item 12:
`--max-rmse 1e155`; `--max-rmse 1e-200` was refused as "`max_penalty` (f̄) ... got 0.0", an option never given)."""

from __future__ import annotations

import pytest

from tests._cli import run_any, run_cli


@pytest.mark.parametrize("cmd", [("schedule", "--chain", "two-state:p=0.1,q=0.1"), ("backtest",)])
@pytest.mark.parametrize("bound,message", [
    (("--max-rmse", "1e155"), "--max-rmse must be ≤ 1e+150, got '1e155'"),
    (("--max-rmse", "1e-200"), "--max-rmse must be ≥ 1e-150, got '1e-200'"),
    (("--max-penalty", "1e301"), "--max-penalty must be ≤ 1e+300, got '1e301'"),
])
def test_huge_bounds_are_refused_in_one_line(cmd, bound, message):
    res = run_any(*cmd, *bound)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and message in res.stderr and "Traceback" not in res.stderr


def test_the_largest_accepted_rmse_designs():
    # f̄ = 1e300: every age meets the bound; the search limit binds (unbounded), ε* is tiny but stated
    res = run_cli("schedule", "--chain", "two-state:p=0.1,q=0.1", "--max-rmse", "1e150", "--json")
    assert res.returncode == 0, res.stderr
    import json

    out = json.loads(res.stdout)
    assert out["status"] == "unbounded" and out["max_penalty"] == pytest.approx(1e300, rel=1e-12)


def test_the_smallest_accepted_rmse_states_the_pure_bound():
    # f̄ = 1e-300 asks for ε_C ≈ 1.4e149: the model-free (ε, δ) falls back to basic composition (the PLD accountant
    # overflows on such budgets) instead of ending in an internal error
    import json

    res = run_cli("schedule", "--chain", "two-state:p=0.1,q=0.1", "--max-rmse", "1e-150", "--json")
    assert res.returncode == 0, res.stderr
    mf = json.loads(res.stdout)["model_free"]
    assert mf["epsilon_c"] == pytest.approx(2**0.5 * 1e149, rel=1e-9)
    assert mf["epsilon"] == mf["epsilon_pure"] >= mf["releases"] * mf["epsilon_c"]
