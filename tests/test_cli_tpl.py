"""`policyopt tpl` (and its shared matrix/data options): JSON contract and one-line errors."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from policyopt.cli.main import main

FIG8 = ["--pb", "0.8,0.2;0.2,0.8", "--pf", "0.8,0.2;0.1,0.9"]  # source: Cao et al. (2019), Fig. 8 setting


def run(capsys, *args):
    assert main(["tpl", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_tpl_fig8_matrices(capsys):
    out = run(capsys, *FIG8, "--epsilon", "0.23", "--horizon", "10")
    bpl, fpl, tpl = (np.array(out[k]) for k in ("bpl", "fpl", "tpl"))
    assert bpl.shape == fpl.shape == tpl.shape == (10,)
    assert bpl[0] == pytest.approx(0.23) and fpl[-1] == pytest.approx(0.23)  # BPL_1 = FPL_T = ε (13), (15)
    np.testing.assert_allclose(tpl, bpl + fpl - 0.23, rtol=1e-12)  # eq. (10)
    assert np.all(np.diff(bpl) > 0) and out["max_tpl"] == pytest.approx(tpl.max())
    sup = out["supremum"]
    assert sup["bpl"] > bpl[-1] and sup["fpl"] > fpl[0]  # the finite horizon stays below the suprema
    assert sup["tpl"] == pytest.approx(sup["bpl"] + sup["fpl"] - 0.23)


def test_tpl_identity_grows_linearly_and_diverges(tmp_path, capsys):
    # source: Cao et al. (2019), Example 3: P_B = I (the adversary knows the value never changes): BPL_t = t·ε
    budgets = tmp_path / "b.csv"
    budgets.write_text("0.1,0.2\n0.3\n0.4\n")
    out = run(capsys, "--pb", "1,0;0,1", "--budgets", str(budgets))
    np.testing.assert_allclose(out["bpl"], np.cumsum([0.1, 0.2, 0.3, 0.4]), rtol=1e-12)
    assert out["fpl"] == pytest.approx([0.1, 0.2, 0.3, 0.4])  # no P_F: forward correlation unknown, L ≡ 0
    assert out["supremum"]["bpl"] == "divergent" and out["supremum"]["tpl"] == "divergent"
    assert out["supremum_epsilon"] == 0.4


def test_tpl_bundled_data_by_default(capsys):
    out = run(capsys, "--epsilon", "0.1", "--horizon", "24")
    assert "17 users" in out["source"]
    assert len(out["tpl"]) == 24 and out["max_tpl"] > 0.1


@pytest.mark.parametrize(
    "args, match",
    [
        (["--pb", "0.8,0.2;0.3", "--epsilon", "1", "--horizon", "2"], r"--pb '0.8,0.2;0.3': rows have different lengths"),
        (["--pb", "0.8,x;0.2,0.8", "--epsilon", "1", "--horizon", "2"], r"row 0 is not a list of numbers"),
        (["--pb", "0.5,0.4;0.2,0.8", "--epsilon", "1", "--horizon", "2"], r"row 0 sums to 0.9"),
        (["--pb", "0.5,0.5;0.5,0.5", "--epsilon", "1"], r"give --epsilon E and --horizon T"),
        (["--pb", "0.5,0.5;0.5,0.5", "--epsilon", "1", "--horizon", "2", "--budgets", "b.csv"], r"not both"),
        (["--pb", "0.5,0.5;0.5,0.5", "--budgets", "{tmp}/bad.csv"], r"line 2: 'x' is not a number"),
        (["--pb", "0.5,0.5;0.5,0.5", "--data", "d.csv", "--epsilon", "1", "--horizon", "2"], r"not both"),
    ],
)
def test_tpl_errors_one_line_exit_2(tmp_path, capsys, args, match):
    (tmp_path / "bad.csv").write_text("0.1\nx\n")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["tpl", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(match, err), err


def test_tpl_budget_fig8_quantification_and_upper_bound(capsys):
    # source: Cao et al. (2019), Fig. 8 setting, α = 1
    outs = {}
    for method in ("quantification", "upper-bound"):
        assert main(["tpl-budget", *FIG8, "--alpha", "1", "--horizon", "10", "--method", method, "--json"]) == 0
        outs[method] = out = json.loads(capsys.readouterr().out)
        for key in ("budgets", "max_tpl", "alpha", "method", "total_variance"):
            assert key in out
        assert len(out["budgets"]) == 10 and out["max_tpl"] <= 1.0 * (1 + 1e-9)
        assert out["total_variance"] == pytest.approx(sum(2 / e**2 for e in out["budgets"]), rel=1e-12)
        assert out["naive"]["max_tpl"] > 1.0  # ε_t = α ignores the correlations and overshoots
    q, u = outs["quantification"], outs["upper-bound"]
    np.testing.assert_allclose(q["tpl"], 1.0, rtol=1e-9)  # Algorithm 8: TPL_t = α at every t
    assert q["budgets"][4] == pytest.approx(u["budgets"][0], rel=1e-9)  # middle budget = Algorithm 7's constant
    assert q["total_variance"] < u["total_variance"]


def test_tpl_budget_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["tpl-budget", *FIG8, "--alpha", "1", "--horizon", "5", "--method", "nope"])
    assert exc.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["tpl-budget", *FIG8, "--horizon", "5"])
    assert exc.value.code == 2
    assert "--alpha" in capsys.readouterr().err


def test_tpl_budget_optimal_meets_alpha_exactly(capsys):
    # SCIP meets TPL ≤ α only to its tolerance; the returned budgets are scaled to meet it exactly
    assert main(["tpl-budget", *FIG8, "--alpha", "1", "--horizon", "4", "--method", "optimal", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["max_tpl"] <= 1.0
    assert out["savings_vs_quantification"] > 0 and out["savings_vs_upper_bound"] > out["savings_vs_quantification"]


def test_tpl_budget_optimal_text_shows_the_saving(capsys):
    """The text says what the proven optimum saves over Algorithms 8 and 7 (the JSON's savings_vs_*), rounded down."""
    import math

    args = ["tpl-budget", *FIG8, "--alpha", "1", "--horizon", "10", "--method", "optimal"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("saving     :"))
    q, u = (math.floor(10000 * out[f"savings_vs_{k}"]) / 100 for k in ("quantification", "upper_bound"))
    assert line == (f"saving     : the optimum's noise variance is {q:g}% below that of Algorithm 8 (quantification, "
                    f"{out['variance_quantification']:.6g}) and {u:g}% below that of Algorithm 7 (upper bound, "
                    f"{out['variance_upper_bound']:.6g})")
    assert (q, u) == (16.34, 30.98)
