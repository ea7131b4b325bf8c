"""FRAN leakages rounded outward in every --bound mode, checked against 60-digit mpmath (tests/_mp_fran_refs.py),
and the Python report (design_fran → FRANReport) that prints exactly what ``policyopt fran`` prints.

Source of the formulas: Y. Luo, M. Zhang, J. Xu, J. Chen, J. Huang, "Correlated-Sequence Differential Privacy",
preprint, 2025 — Definition 6 (exact leakage), eq. (15) (paper bound), eq. (45) first line (sound bound).
"""

from __future__ import annotations

import math
import warnings

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _mp_fran_refs import MpCMC
from policyopt import FRANReport, design_fran
from policyopt.errors import InvalidInputError
from policyopt.formatting import fmt_epsilon_c, fmt_upper
from policyopt.models.cmc import CouplingMarkovChain, two_binary_cmc
from policyopt.privacy.fran import (
    PaperBoundWarning,
    Query,
    exact_leakage,
    exact_leakage_margin,
    exact_leakage_upper,
    paper_leakage,
    paper_leakage_upper,
)

from _cli import TableCells, run_cli, strict_json  # noqa: E402
TWO_BINARY = "p=0.3,q=0.3,lambda=0.5"
TWO_BINARY_LABEL = "two binary sequences p=0.3 q=0.3 lambda=0.5 (Luo et al. 2025, eq. 25)"





def random_cmc(seed: int, m: int):
    rng = np.random.default_rng(seed)
    T = rng.dirichlet(np.ones(m) * rng.uniform(0.3, 3.0), size=(2, 2, m))
    lam = rng.dirichlet(np.ones(2), size=2)
    values = np.sort(rng.normal(size=m)) * rng.choice([1.0, 100.0])
    return CouplingMarkovChain(T, lam, values), MpCMC(T.tolist(), lam.tolist(), values.tolist())


# ---------------------------------------------------------------------------------------------
# exact leakage: the rounded-up value is ≥ the 60-digit exact leakage, and only a rounding margin above it
# ---------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), m=st.integers(2, 3), query=st.sampled_from(["mean", "sum", "max", "min"]),
       a1=st.integers(0, 6), a2=st.integers(0, 6), eps=st.sampled_from([1e-3, 0.3, 1.0, 5.0, 50.0]))
def test_exact_leakage_upper_dominates_mpmath(seed, m, query, a1, a2, eps):
    cmc, ref = random_cmc(seed, m)
    q = Query(query)
    value = exact_leakage(cmc, q, [a1, a2], eps)
    up = exact_leakage_upper(value, cmc, q, [a1, a2], eps)
    exact = ref.exact_leakage(query, [a1, a2], eps)
    assert mp.mpf(up) >= exact, (up, exact)
    assert up - value <= 1e-9  # a stated rounding margin, not a loose bound
    assert abs(mp.mpf(value) - exact) <= mp.mpf(exact_leakage_margin(cmc, q, [a1, a2], eps))


def test_exact_leakage_margin_cases():
    cmc = two_binary_cmc(0.3, 0.3, 0.5)
    # a callable query's rounding is not analysed: no finite margin is claimed
    assert exact_leakage_margin(cmc, Query(lambda v: v.sum(axis=1), name="total"), [1, 1], 1.0) == math.inf
    assert exact_leakage_upper(0.5, cmc, Query(lambda v: v.sum(axis=1)), [1, 1], 1.0) == math.inf
    assert exact_leakage_upper(None, cmc, Query("mean"), [1, 1], 1.0) is None
    with pytest.raises(InvalidInputError, match=r"the exact leakage needs a scalar query \(d = 1\), query `identity` has d = 2"):
        exact_leakage_margin(cmc, Query("identity"), [1, 1], 1.0)
    with pytest.raises(InvalidInputError, match=r"`epsilon_c` must be"):
        exact_leakage_margin(cmc, Query("mean"), [1, 1], 0.0)
    # ε_C = 50: the margin stays a rounding margin (log space throughout)
    assert 0 < exact_leakage_margin(cmc, Query("mean"), [2, 3], 50.0) < 1e-10


def test_paper_leakage_upper_dominates_mpmath():
    cmc, ref = random_cmc(20261124, 3)
    for aoi, eps in (([0, 0], 1.0), ([2, 4], 0.3), ([5, 1], 50.0)):
        dist = cmc.aged_distance(aoi)
        value = paper_leakage(dist, eps, 2.0, warn=False)
        up = paper_leakage_upper(value, max(aoi))
        exact = 2 * ref.distance(aoi) * mp.mpf(eps)
        assert mp.mpf(up) >= exact and up - value <= 1e-12 * max(1.0, value)
    assert paper_leakage_upper(None, 3) is None


# ---------------------------------------------------------------------------------------------
# the installed CLI: exact and paper leakages (and every baseline) are rounded outward
# ---------------------------------------------------------------------------------------------


def _two_binary_ref():
    return MpCMC([[[[0.7, 0.3], [0.3, 0.7]]] * 2] * 2, [[0.5, 0.5], [0.5, 0.5]], [0, 1])


def test_cli_exact_bound_is_rounded_outward():
    args = ["fran", "--two-binary", TWO_BINARY, "--max-mse", "0.5", "--max-age", "3", "--bound", "exact"]
    out = strict_json(run_cli(*args, "--json").stdout)
    ref = _two_binary_ref()
    exact = ref.exact_leakage("mean", out["aoi"], out["epsilon_c"])
    assert mp.mpf(out["epsilon_s"]) >= exact
    assert out["epsilon_s"] - float(exact) <= 1e-9
    raw = exact_leakage(two_binary_cmc(0.3, 0.3, 0.5), Query("mean"), out["aoi"], out["epsilon_c"])
    assert out["epsilon_s"] > raw  # moved up by the margin, not printed as computed
    text = run_cli(*args).stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("epsilon_s"))
    assert line.startswith(f"epsilon_s   : {fmt_upper(out['epsilon_s'])} nats (exact leakage of FRAN, rounded up)")
    assert mp.mpf(line.split()[2]) >= exact
    # the sound baselines are rounded outward in --bound exact too (they were printed raw before)
    for name in ("dp", "ddp", "adp", "csdp"):
        snd = out["baselines"][name]["sound"]
        if snd["epsilon_s"] is None:
            continue
        if name in ("dp", "ddp"):  # no aging: Δ = 1, ε_S = d·ε_C exactly
            assert mp.mpf(snd["epsilon_s"]) >= (2 if name == "ddp" else 1) * mp.mpf(snd["epsilon_c"])
        if name == "csdp":
            d = ref.distance(snd["aoi"])
            assert mp.mpf(snd["epsilon_s"]) >= mp.log1p(d * mp.expm1(2 * mp.mpf(snd["epsilon_c"])))


def test_cli_paper_bound_is_rounded_up_and_still_labelled_unsound():
    args = ["fran", "--two-binary", TWO_BINARY, "--max-mse", "0.8", "--max-age", "4", "--bound", "paper"]
    proc = run_cli(*args, "--json")
    assert "NOT an upper bound" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    out = strict_json(proc.stdout)
    ref = _two_binary_ref()
    paper = 2 * ref.distance(out["aoi"]) * mp.mpf(out["epsilon_c"])  # eq. (15), d(2) = 2
    assert mp.mpf(out["epsilon_s"]) >= paper and out["epsilon_s"] - float(paper) <= 1e-12
    raw = paper_leakage(two_binary_cmc(0.3, 0.3, 0.5).aged_distance(out["aoi"]), out["epsilon_c"], 2.0, warn=False)
    assert out["epsilon_s"] > raw  # rounded up like every printed leakage
    csdp = out["baselines"]["csdp"]["paper"]
    assert mp.mpf(csdp["epsilon_s"]) >= 2 * ref.distance(csdp["aoi"]) * mp.mpf(csdp["epsilon_c"])
    ddp = out["baselines"]["ddp"]["paper"]
    assert mp.mpf(ddp["epsilon_s"]) >= 2 * mp.mpf(ddp["epsilon_c"])
    text = run_cli(*args).stdout
    assert "NOT an upper bound, rounded up)" in text


# ---------------------------------------------------------------------------------------------
# the Python path: str(report) is the CLI's stdout, to_dict() its --json
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("extra, kw", [
    ([], {}),
    (["--max-age", "3", "--bound", "exact", "--max-mse", "0.5"], {"max_age": 3, "bound": "exact", "max_mse": 0.5}),
    (["--bound", "paper", "--query", "max", "--max-mse", "0.6"], {"bound": "paper", "query": "max", "max_mse": 0.6}),
    (["--method", "groups", "--query", "sum", "--max-mse", "3"], {"method": "groups", "query": "sum", "max_mse": 3.0}),
])
def test_report_str_and_dict_are_the_cli_output(extra, kw):
    argv = ["fran", "--two-binary", TWO_BINARY, "--max-mse", "0.8", *extra]
    text = run_cli(*argv).stdout
    doc = strict_json(run_cli(*argv, "--json").stdout)
    kw = dict({"max_mse": 0.8}, **kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = design_fran(two_binary_cmc(0.3, 0.3, 0.5), kw.pop("max_mse"), model_label=TWO_BINARY_LABEL, **kw)
    assert isinstance(report, FRANReport)
    assert text == str(report) + "\n"
    assert doc == report.to_dict()
    # a paper-bound design warns once from Python (the CLI prints its own line instead)
    assert [w.category for w in caught] == ([PaperBoundWarning] if kw.get("bound") == "paper" else [])
    assert report.status == doc["status"] and report.epsilon_s == doc["epsilon_s"]



def test_report_html_table_shows_the_rounded_up_leakage():
    report = design_fran(two_binary_cmc(0.3, 0.3, 0.5), 0.5, max_age=3)
    page = report._repr_html_()
    parser = TableCells()
    parser.feed(page)
    rows = dict(zip(parser.cells[::2], parser.cells[1::2]))
    assert page.startswith("<table class='policyopt-fran'>")
    assert rows["ε_S (nats, sound bound)"] == fmt_upper(report.epsilon_s)
    assert rows["ε_C (nats)"] == fmt_epsilon_c(report.to_dict()["epsilon_c"])  # 6 digits, rounded up (issue 33)
    assert rows["AoI vector (slots)"] == "[3, 3]"
    assert rows["baseline: standard DP (no aging)"] == fmt_upper(report.to_dict()["baselines"]["dp"]["sound"]["epsilon_s"])


def test_design_fran_errors():
    cmc = two_binary_cmc(0.3, 0.3, 0.5)
    with pytest.raises(InvalidInputError, match=r"`method` must be one of \('enumeration', 'cvxpy', 'scip', 'groups'\), got 'brute'"):
        design_fran(cmc, 0.8, method="brute")
    with pytest.raises(InvalidInputError, match=r"`bound` must be 'sound' or 'paper', got 'exact'"):
        design_fran(cmc, 0.8, method="groups", bound="exact")


def test_docstring_examples_run():
    import doctest

    import policyopt.privacy.fran
    import policyopt.studies.discounted_report
    import policyopt.studies.fran_report

    for module in (policyopt.studies.fran_report, policyopt.studies.discounted_report, policyopt.privacy.fran):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__
