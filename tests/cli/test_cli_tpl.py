"""`policyopt tpl` and `tpl-budget` (and their shared matrix/data options): JSON contract and one-line errors; on data
the leakage is stated as a bound only under a Markov model that passed its held-out check, and the model-free
guarantee of the releases always."""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import _processes as P
from _cli import strict_json
from policyopt.cli.main import main

FIG8 = ["--pb", "0.8,0.2;0.2,0.8", "--pf", "0.8,0.2;0.1,0.9"]  # source: Cao et al. (2019), Fig. 8 setting
#: Binary readings of the order-2 chain of tests/_processes.py: 10 users × 2000 slots (seed 1) refute a first-order
#: chain at lag 1 and pass as order:2 (held-out p 0.55 / 0.65).
BINARY = ["--states", "2", "--value-range", "0:1"]
ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *args):
    assert main(["tpl", *args, "--json"]) == 0
    return strict_json(capsys.readouterr().out)


@pytest.fixture(scope="module")
def order2_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("tpl") / "order2.csv"
    P.order2_chain().simulate(10, 2000, np.random.default_rng(1)).to_csv(path, index=False)
    return str(path)


@lru_cache(maxsize=None)
def _cli_json(*argv):
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--json"]) == 0
    return out.getvalue()


def cli_json(*argv):
    """The strict JSON of ``policyopt ARGV --json`` run in-process (each distinct command once per session)."""
    return strict_json(_cli_json(*map(str, argv)))


def test_tpl_fig8_matrices(capsys):
    out = run(capsys, *FIG8, "--epsilon", "0.23", "--horizon", "10")
    # without data: the matrices are the model, an assumption; the model-free guarantee is given next to it
    g = out["guarantee"]
    assert g["kind"] == "model-based" and g["epsilon"] == out["max_tpl"] and g["delta"] == 0.0 and g["horizon"] == 10
    assert g["model"] == "the given matrices P_B, P_F" and "an assumption nobody checked" in g["statement"]
    mf = out["model_free"]
    assert mf["releases"] == mf["horizon"] == 10 and mf["delta"] == 1e-6 and mf["epsilon_c"] == 0.23
    assert mf["epsilon_pure"] >= 2.3 and mf["epsilon_pure"] == pytest.approx(2.3, rel=1e-15)  # Σ ε_t, rounded up
    assert out["warnings"] == [] and out["model_check"] is None and out["markov_model"] is None
    assert out["accepted_refuted"] is None and out["dp_delta_source"].startswith("default min(1e-6, 1/(10·I))")
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


def test_tpl_bundled_data_by_default_leads_with_the_model_free_guarantee():
    # 3 states keep the check short (12, the default, is the README example below); the homes refute the chain
    out = cli_json("tpl", "--states", "3", "--epsilon", "0.1", "--horizon", "24")
    assert "bundled CityLearn 2022, 17 homes" in out["source"] and "(17 users)" in out["source"]
    mc = out["model_check"]
    assert mc["requested"] == "chain" and mc["passed"] is False and mc["refuted"] is True
    assert mc["markov_test"]["lags"][-1] == 168  # a week of hourly slots
    g, mf = out["guarantee"], out["model_free"]
    assert g["kind"] == "model-free" and g["model"] is None and g["horizon"] == 24 and g["delta"] == 1e-6
    assert g["epsilon"] == mf["epsilon"] and mf["releases"] == 24 and mf["w_event"] == []  # no window below T = 24
    assert "refuted by the readings" in g["statement"]
    for key in ("bpl", "fpl", "tpl", "max_tpl", "supremum", "rounding_margin"):
        assert out[key] is None, key
    assert out["accepted_refuted"] is None and len(out["warnings"]) == 1 and "chain is refuted" in out["warnings"][0]
    assert out["markov_model"] == {"requested": "chain", "used": "chain", "states": 3, "z_states": 3,
                                   "description": "first-order chain on the 3 quantile states"}


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


# ------------------------------------------------------------------ on data: the guarantee follows the evidence


def test_tpl_order2_readings_refute_the_chain_and_lead_with_the_model_free_guarantee(order2_csv):
    from policyopt.privacy.model_free import laplace_epsilon

    out = cli_json("tpl", "--data", order2_csv, *BINARY, "--epsilon", "0.1", "--horizon", "48")
    mc = out["model_check"]
    assert mc["passed"] is False and mc["markov_test"]["refuted"] is True and mc["markov_test"]["worst_lag"] == 1
    g, mf = out["guarantee"], out["model_free"]
    assert g["kind"] == "model-free" and out["max_tpl"] is None and out["tpl"] is None and out["supremum"] is None
    # the 48 releases composed: pure Σ ε_t and the PLD (ε, δ) of dp_accounting, δ = min(1e-6, 1/(10·10 users))
    assert mf["epsilon_pure"] == pytest.approx(4.8, rel=1e-15) and mf["epsilon_pure"] >= 4.8
    assert mf["delta"] == 1e-6 and out["dp_delta_source"] == "default min(1e-6, 1/(10·I)) with I = 10"
    assert g["epsilon"] == mf["epsilon"] == laplace_epsilon([0.1] * 48, [1] * 48, 1e-6) < mf["epsilon_pure"]
    assert [w["w"] for w in mf["w_event"]] == [24]  # the slot length is unknown: windows of 24 and 168 steps, < T only
    assert mf["w_event"][0]["epsilon_pure"] == pytest.approx(2.4, rel=1e-15)
    assert out["warnings"] == [w for w in out["warnings"] if "order" not in w] and len(out["warnings"]) == 1


def test_tpl_text_under_a_refuted_model_states_the_model_free_guarantee_first(order2_csv):
    from policyopt.studies.tpl_report import format_tpl_report

    out = cli_json("tpl", "--data", order2_csv, *BINARY, "--epsilon", "0.1", "--horizon", "48")
    lines = format_tpl_report({**out, "wall_time_s": 1.0}).splitlines()
    assert lines[1].startswith("guarantee: model-free: 48 releases of ε_C = 0.1 over 48 slots: (")
    assert "— stated because the Markov model chain is refuted by the readings (held-out Markov test p = 0.025 (worst " \
           "lag 1), Δ(t) check p = " in lines[1] and lines[1].endswith(", level 0.95)")
    assert "max TPL  : not stated: Cao et al.'s leakage assumes an adversary who knows the model, and the readings refute " \
           "the Markov model chain (--accept-refuted REASON prints it, marked)" in lines
    assert not any(x.startswith(("   t ", "supremum")) for x in lines)  # no table of numbers that are not bounds
    assert any(x.startswith("model check: fitted on the first 50% of each series") for x in lines)
    assert [x for x in lines if x.startswith("warning  : ")] == [f"warning  : {w}" for w in out["warnings"]]
    assert lines[-1] == "wall time: 1.000 s"


def test_tpl_accept_refuted_prints_the_chains_numbers_marked_and_keeps_the_model_free_headline(order2_csv):
    reason = "compare with the order-2 model"
    out = cli_json("tpl", "--data", order2_csv, *BINARY, "--epsilon", "0.1", "--horizon", "48", "--accept-refuted", reason)
    assert out["guarantee"]["kind"] == "model-free" and out["accepted_refuted"] == {"model": "chain", "reason": reason}
    assert len(out["tpl"]) == 48 and 0.1 < out["max_tpl"] < 4.8  # the chain's (unsupported) leakage
    assert out["warnings"][-1].startswith("the refuted model chain's leakage (")
    assert out["warnings"][-1].endswith(f"nats) is printed on request (--accept-refuted: {reason}); it is not a bound "
                                        "for these data")
    from policyopt.studies.tpl_report import format_tpl_report

    text = format_tpl_report(out)
    assert f"refuted  : the BPL/FPL/TPL below are the refuted model chain's numbers, printed on request " \
           f"(--accept-refuted: {reason}); not bounds for these data" in text.splitlines()
    assert text.splitlines()[1].startswith("guarantee: model-free:")


def test_tpl_with_the_order2_model_is_computed_on_z(order2_csv):
    import pandas as pd

    from policyopt.models.estimation import fit_population
    from policyopt.privacy.tpl_leakage import leakage_upper
    from policyopt.studies.markov_check import fit_for_design

    out = cli_json("tpl", "--data", order2_csv, *BINARY, "--epsilon", "0.1", "--horizon", "48", "--markov-model", "order:2")
    mc = out["model_check"]
    assert mc["requested"] == "order:2" and mc["passed"] is True and out["warnings"] == []
    assert out["markov_model"]["used"] == "order:2" and out["markov_model"]["z_states"] == 4
    assert "augmented chain Z of order:2 (4 states)" in out["source"]
    g = out["guarantee"]
    assert g["kind"] == "model-based" and g["model"] == "order:2" and g["epsilon"] == out["max_tpl"]
    # the same number from policyopt.privacy called on Z's matrices directly (P_B: the reversal by a linear solve)
    df = pd.read_csv(order2_csv)
    fitted = fit_population(df, 2, value_range=(0.0, 1.0))
    PZ = fit_for_design("order:2", df, fitted.quantizer, fitted.users, value_range=(0.0, 1.0), smoothing=0.01).z_matrices()
    P_B = []
    for Pz in PZ:
        M = np.vstack([(Pz - np.eye(4)).T, np.ones(4)])
        pi = np.linalg.lstsq(M, np.r_[np.zeros(4), 1.0], rcond=None)[0]
        P_B.append((Pz.T * pi[None, :]) / pi[:, None])  # Zhang et al. 2024, eq. (1)
    direct = leakage_upper(P_B, list(PZ), np.full(48, 0.1))
    assert out["max_tpl"] == pytest.approx(direct.tpl_level, rel=1e-12)
    np.testing.assert_allclose(out["tpl"], direct.tpl, rtol=1e-12)
    # on an order-k Z the rows differing in a reading have disjoint supports: L(α) = α, TPL = Σ ε_t (Cao et al. eq. (24))
    assert out["max_tpl"] == pytest.approx(4.8, rel=1e-9) and out["max_tpl"] >= 4.8
    assert out["supremum"] == {"bpl": "divergent", "fpl": "divergent", "tpl": "divergent"}


def test_tpl_budget_under_a_refuted_chain_gives_the_budgets_model_free_guarantee(order2_csv):
    from policyopt.privacy.model_free import laplace_epsilon

    out = cli_json("tpl-budget", "--data", order2_csv, *BINARY, "--alpha", "1", "--horizon", "24")
    assert out["status"] == "feasible" and len(out["budgets"]) == 24
    assert out["alpha_supported"] is False and out["max_tpl"] is None and out["naive"]["max_tpl"] is None
    assert out["tpl"] is None and out["bpl"] is None and out["fpl"] is None
    g, mf = out["guarantee"], out["model_free"]
    assert g["kind"] == "model-free" and g["epsilon"] == mf["epsilon"]
    assert mf["epsilon"] == laplace_epsilon(out["budgets"], [1] * 24, 1e-6)
    assert math.fsum(out["budgets"]) <= mf["epsilon_pure"] <= math.fsum(out["budgets"]) * (1 + 1e-15)
    assert g["statement"].endswith("the budgets' α-DP_T (α = 1 nats) is not supported: it assumes that model")
    from policyopt.studies.tpl_report import format_tpl_budget_report

    text = format_tpl_budget_report({**out, "wall_time_s": 1.0})
    assert "after      : max TPL not stated and α-DP_T not supported: Cao et al.'s leakage assumes an adversary who " \
           "knows the model, and the readings refute the Markov model chain (--accept-refuted REASON prints it, " \
           "marked)" in text.splitlines()
    assert text.splitlines()[1].startswith("guarantee  : model-free: 24 releases of ε_C from ")


def test_tpl_budget_with_the_order2_model_states_why_no_budgets(order2_csv):
    out = cli_json("tpl-budget", "--data", order2_csv, *BINARY, "--alpha", "1", "--horizon", "24",
                   "--markov-model", "order:2")
    # L_F(α) = α on Z: Algorithm 8 has no positive solution; nothing is released, so there is no guarantee to state
    assert out["model_check"]["passed"] is True and out["status"] == "unknown" and out["budgets"] is None
    assert out["guarantee"] is None and out["model_free"] is None and out["alpha_supported"] is None
    assert out["naive"]["max_tpl"] == pytest.approx(24.0, rel=1e-9)  # α every step: Σ = 24 α on Z


def test_readme_tpl_examples_still_run(monkeypatch):
    """The README's `tpl` and `tpl-budget` lines (the bundled homes, 12 states), run as written; the held-out check
    is made with 3 simulated data sets instead of 39 to keep the test short (tests/docs/test_commands.py runs them in
    full), and the text is the report of the same JSON."""
    import policyopt.studies.markov_check as mcheck
    from policyopt.studies.tpl_report import format_tpl_budget_report, format_tpl_report

    monkeypatch.setattr(mcheck, "CHECK_DRAWS", 3)
    lines = [m.group(1) for m in re.finditer(r"`policyopt (tpl(?:-budget)? [^`]*)`", (ROOT / "README.md").read_text())]
    assert lines == ["tpl --epsilon 0.1 --horizon 24", "tpl-budget --alpha 1 --horizon 24"]
    for line, fmt in zip(lines, (format_tpl_report, format_tpl_budget_report)):
        out = strict_json(_run_text(line.split() + ["--json"]))
        assert out["markov_model"]["states"] == 12 and out["model_check"]["requested"] == "chain"
        assert out["model_check"]["models"][0]["draws"] == 3
        assert out["guarantee"]["kind"] in ("model-based", "model-free") and out["model_free"]["releases"] == 24
        assert fmt(out).splitlines()[1].startswith(("guarantee: ", "guarantee  : "))


def _run_text(argv):
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


@pytest.mark.parametrize(
    "args, match",
    [
        (["--markov-model", "phase:24"], r"--markov-model phase:24: a phase chain is time-inhomogeneous .* use chain, "
                                         r"order:K, hmm:R or auto$"),
        (["--markov-model", "order:7"], r"--markov-model 'order:7': `model` order:7: the order k must be an integer in "
                                        r"1\.\.4"),
        (["--markov-model", "hmm:2", "--states", "50"], r"--markov-model hmm:2 with 50 states gives an augmented chain Z "
                                                        r"of 100 states; .* use --states 40 or fewer, or fewer regimes$"),
        (["--accept-refuted", " "], r"--accept-refuted needs a reason \(a non-empty text\), got ' '$"),
        (["--slot-length", "30min"], r"--slot-length 30min is not the bundled data's slot \(1h\)$"),
        ([*FIG8, "--markov-model", "auto"], r"--markov-model applies to data \(--data or the bundled homes\) only: the "
                                            r"matrices --pb/--pf you give are the model; omit it$"),
        ([*FIG8, "--value-range", "0:1"], r"--value-range applies to data"),
        ([*FIG8, "--accept-refuted", "why"], r"--accept-refuted applies to data"),
        ([*FIG8, "--delta", "1"], r"--delta must be strictly between 0 and 1 \(e\.g\. 1e-6\), got '1'$"),
    ],
)
@pytest.mark.parametrize("command", ["tpl", "tpl-budget"])
def test_tpl_guarantee_option_errors_are_one_line_exit_2(capsys, command, args, match):
    tail = ["--epsilon", "0.1", "--horizon", "4"] if command == "tpl" else ["--alpha", "1", "--horizon", "4"]
    code = None
    try:
        code = main([command, *args, *tail])
    except SystemExit as exc:  # argparse's own errors (--delta's type) exit from the parser
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(match, err.rstrip("\n")), err
