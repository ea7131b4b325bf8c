"""A long --horizon under a refuted premise designs model-free without running Theorem 3's O(H)-per-cell enumeration
(issue 33, item 12: `schedule --max-tv empirical --horizon 10000000` hung)."""

from __future__ import annotations

import math

from tests._cli import ok_json


def test_long_horizon_under_refuted_premise_is_model_free():
    H = 1_000_000
    out = ok_json("schedule", "--max-tv", "empirical", "--horizon", H, "--max-penalty", "1e-6")
    assert out["A"] is None  # condition (31) fails at this f̄: no finite ε*
    hd = out["horizon_design"]
    assert hd["accounting"] == "model-free" and hd["horizon"] == H
    mf = out["model_free"]
    assert out["guarantee"]["kind"] == "model-free" and mf["horizon"] == H
    assert mf["releases"] == math.ceil(H / hd["S_bar"])
    assert mf["epsilon_pure"] >= mf["releases"] * mf["epsilon_c"] * (1 - 1e-12) and mf["epsilon"] <= mf["epsilon_pure"]
