"""The model check on the data runs of ``publish``, ``tpl`` and ``tpl-budget`` (issue 23, item 4): a ``model check``
line and a ``model_check`` object like ``schedule``'s, whose direct Δ̂ is an independent lagged-pair count."""

from __future__ import annotations

import re

import numpy as np
import pytest

import policyopt as po
from policyopt.formatting import text_problems
from policyopt.models.empirical import DEFAULT_MIN_PAIRS
from tests._cli import ok_json, run_cli
from tests.studies.test_check_model import bundled_states, loop_direct_max_tv


def _line(text):
    return next(ln for ln in text.splitlines() if ln.startswith("model check"))


@pytest.mark.slow
def test_publish_on_data_checks_the_accounting_chains(tmp_path):
    args = ("publish", "--A", 24, "--S-bar", 1, "--epsilon-c", 0.34, "--value-range", "0:48", "--through", 60)
    out = ok_json(*args, "--ledger", tmp_path / "a.db")
    mc = out["model_check"]
    assert mc["states"] == 3 and mc["max_lag"] == 25 and mc["level"] == 0.95 and mc["draws"] == 19
    assert mc["design_lags"] == [1, 24]  # A..A + S̄ − 1 = {24} and S̄ = 1
    assert mc["refuted"] and 24 in mc["design_lags_refuted"] and 24 in mc["refuted_lags"]
    # the direct estimate at the worst lag is a plain lagged-pair count on the bundled homes' 3 quantile states
    series = bundled_states(3)
    t = mc["worst_lag"]
    assert mc["worst_empirical_max_tv"] == pytest.approx(loop_direct_max_tv(series, 3, t, DEFAULT_MIN_PAIRS), abs=1e-12)
    assert mc["worst_empirical_max_tv"] > 0.8 > mc["worst_model_critical"]
    text = run_cli(*args, "--ledger", tmp_path / "b.db").stdout
    assert "S̄ = 1 slot," in text and text_problems(text) == [], text
    early = run_cli("ledger", "--ledger", tmp_path / "b.db", "--at", 10).stdout  # before the first release at A = 24
    assert "AoI undefined (nothing released yet)" in early and text_problems(early) == [], early
    line = _line(text)
    assert line.startswith("model check : first-order chains (3 states)") and "lags 1..25" in line
    assert "REFUTED at" in line and "so its ε* is not a bound for the data" in line


def test_publish_with_a_matrix_model_has_no_check(tmp_path):
    out = ok_json("publish", "--A", 0, "--S-bar", 2, "--epsilon-c", 0.3, "--value-range", "0:48", "--through", 10,
                  "--model", "two-state:p=0.1,q=0.2", "--ledger", tmp_path / "m.db")
    assert out["model_check"] is None


def _tpl_states(K):
    """The bundled homes' states as tpl fits them (no value range: the data's own quantiles)."""
    df = po.load_citylearn()
    fit = po.fit_population(df, K)
    return [[int(s) for s in fit.quantizer.transform(df.loc[df["user"] == u].sort_values("time")["value"].to_numpy())]
            for u in fit.users]


@pytest.mark.slow
@pytest.mark.parametrize("cmd", [("tpl", "--epsilon", 0.1, "--horizon", 5), ("tpl-budget", "--alpha", 1, "--horizon", 5)])
def test_tpl_on_data_checks_the_chain_the_adversary_knows(cmd):
    """The chain the adversary is assumed to know is checked on held-out time (issue 32): fitted on the first half of
    each home's year, the held-out half's Δ̂ at the worst lag is a plain lagged-pair count (loops here)."""
    out = ok_json(*cmd)
    mc = out["model_check"]
    assert mc["requested"] == mc["chosen"] == "chain" and mc["refuted"] and not mc["passed"]
    (chain,) = mc["models"]
    assert chain["verdict"] == "refuted" and chain["users"] == 17
    assert chain["fit_slots"] == chain["test_slots"] == 4380
    assert chain["markov_test"]["lags"] == list(range(1, 169)) and chain["markov_test"]["draws"] == 39
    check = chain["max_tv_check"]
    held_out = [x[4380:] for x in _tpl_states(12)]
    assert check["estimate"] == pytest.approx(
        loop_direct_max_tv(held_out, 12, check["worst_lag"], DEFAULT_MIN_PAIRS), abs=1e-12)
    assert check["estimate"] > check["critical"]
    text = run_cli(*cmd).stdout
    line = _line(text)
    assert "fitted on the first 50% of each series" in line and "chain REFUTED" in line
    # the leakage of a refuted chain is not printed as the headline: the model-free guarantee of the budgets is
    assert out["guarantee"]["kind"] == "model-free"
    assert re.match(r"guarantee *: model-free: ", text.splitlines()[1])


def test_tpl_with_matrices_has_no_check():
    args = ("tpl", "--pb", "0.8,0.2;0.2,0.8", "--pf", "0.8,0.2;0.1,0.9", "--epsilon", 0.1, "--horizon", 5)
    assert ok_json(*args)["model_check"] is None
    assert "model check" not in run_cli(*args).stdout
    assert np.isfinite(ok_json(*args)["max_tpl"])
