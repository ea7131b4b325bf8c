"""Issue 32 for ``publish`` and ``ledger``: a schedule designed under a richer Markov model (``--markov-model
order:K|phase:P|hmm:R``) is accounted under that model — refitted on the pinned design data, Theorem 3 on its
augmented chain Z — and its ε(t) is stated first only while the design's check of that model passed;
``--markov-model`` accounts (``publish``, first run) or audits (``ledger``) under another model, with the verdict the
design's check gave it.

Reference values: Theorem 3 (:func:`policyopt.privacy.age_dependent.compose`) under the model the design itself fits
(:func:`policyopt.studies.markov_check.fit_for_design` on the design's readings and quantile states, the path of
``schedule``), and the closed form n·ε_C of an order-2 chain whose Δ_Z(1) = 1 (the augmented states of consecutive
slots share a reading, so nothing is forgotten between releases one slot apart).
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

import _processes as P
from _cli import refused, run_any
from policyopt.cli.main import main
from policyopt.deploy import ModelSpec
from policyopt.errors import InvalidInputError
from policyopt.models.estimation import fit_population
from policyopt.privacy.age_dependent import compose
from policyopt.studies.markov_check import fit_for_design

USERS, SLOTS = 20, 3000
COMMON = ("--value-range", "0:1", "--states", "2", "--max-age", "24", "--max-interval", "24", "--users", "10000",
          "--max-rmse", "0.005", "--slot-length", "1h", "--phase-period", "1")  # the processes' MSE has no daily cycle


def cli_json(*args) -> dict:
    """``policyopt ARGS --json`` in this process (exit 0 asserted), strict JSON."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in (*args, "--json")])
    assert code == 0, err.getvalue()

    def bad(c):
        raise ValueError(f"non-finite JSON constant {c}")

    return json.loads(out.getvalue(), parse_constant=bad)


@pytest.fixture(scope="module")
def designs(tmp_path_factory):
    """Readings of the XOR chain (an order-2 chain) and of a daily habit, and a schedule of each designed under
    ``order:2`` and ``phase:24``: {name: (csv, schedule path, schedule JSON)}."""
    d = tmp_path_factory.mktemp("pub_markov")
    out = {}
    for name, make, model in (("xor", P.xor_chain, "order:2"), ("daily", P.daily_habit, "phase:24")):
        csv = d / f"{name}.csv"
        make().simulate(USERS, SLOTS, np.random.default_rng(1)).to_csv(csv, index=False)
        sched = cli_json("schedule", "--data", csv, *COMMON, "--markov-model", model)
        path = d / f"{name}.json"
        path.write_text(json.dumps(sched))
        out[name] = (csv, path, sched)
    return out


def design_model(csv, spec: str):
    """The model ``schedule`` designs with: `spec` fitted on every reading with the chains' quantile states."""
    import pandas as pd

    df = pd.read_csv(csv)
    fitted = fit_population(df, 2, smoothing=0.01, value_range=(0.0, 1.0))
    return fit_for_design(spec, df, fitted.quantizer, fitted.users, value_range=(0.0, 1.0), smoothing=0.01, seed=0)


def reference_risk(led: dict, model) -> np.ndarray:
    """ε(S_n) of the ledger's releases by Theorem 3 (eq. (25)) under `model`."""
    released = [r for r in led["releases"] if r["status"] == "released"]
    S = np.array([r["slot"] for r in released]) - led["schedule"]["origin"]
    ages = np.array([r["slot"] - r["input_time"] for r in released])
    ref = compose(S, ages, np.array([r["epsilon_spent"] for r in released]), model, horizon=int(S[-1]))
    return ref.risk[S]


def test_the_schedule_records_the_markov_model_it_designed_with(designs):
    for name, model in (("xor", "order:2"), ("daily", "phase:24")):
        rec = designs[name][2]["deployment"]["model"]
        assert rec["markov_model"] == model and rec["markov_seed"] == 0 and rec["max_tv_source"] == "chain"
    assert designs["xor"][2]["model_check"]["passed"] is True  # order:2 passes on an order-2 chain


def test_an_order2_design_is_published_and_audited_under_order2(designs, tmp_path):
    csv, path, sched = designs["xor"]
    ledger = tmp_path / "l.db"
    pub = cli_json("publish", "--trial", "a pilot stream", "--schedule", path, "--data", csv, "--ledger", ledger, "--through", 200)
    g, mv = pub["guarantee"], pub["model_verdict"]
    assert mv["model"] == "order:2" and mv["verdict"] == "passed" and mv["bound"] is True
    assert g["kind"] == "model-based" and g["model"] == "order:2"
    led = cli_json("ledger", "--ledger", ledger)
    eps = led["schedule"]["epsilon_c"]
    released = [r for r in led["releases"] if r["status"] == "released"]
    got = np.array([r["risk_at_release"] for r in released])
    assert got.size == 201 - led["schedule"]["A"]
    model = design_model(csv, "order:2")
    assert model.max_tv(1) == 1.0  # consecutive augmented states share a reading: Δ_Z(1) = 1
    assert np.allclose(got, reference_risk(led, model), rtol=1e-9, atol=0)
    # the publisher's and the ledger's upper bounds are rounded up along different routes: equal to the last digits
    assert led["peak_risk"] >= got.max() and g["epsilon"] == pytest.approx(got.max(), rel=1e-12)
    # with Δ_Z(S̄) = Δ_Z(1) = 1 nothing is forgotten between releases: ε(S_n) grows with every release, below the
    # basic composition of the releases made (up to the outward rounding of each step, ~300 u of ε per release)
    assert np.all(np.diff(got) > 0) and got[-1] <= got.size * eps * (1 + 1e-10)
    # the ledger recomputes the design's horizon risk under the refitted model to the schedule's printed value
    assert led["designed_horizon_risk"] == pytest.approx(sched["horizon_design"]["horizon_risk"], rel=1e-9)
    # the same releases under the first-order chains, which this design (--markov-model order:2) did not check
    chain = cli_json("ledger", "--ledger", ledger, "--markov-model", "chain")
    assert chain["model_verdict"]["model"] == "chain" and chain["model_verdict"]["verdict"] == "unchecked"
    assert "not the first-order chains" in chain["model_verdict"]["why"]
    assert chain["guarantee"]["kind"] == "model-free" and chain["model_is_recorded"] is False
    assert chain["peak_risk"] < 0.1 * led["peak_risk"]  # the chains forget fast: their ε(t) is far smaller
    # a model the design did not check is unchecked
    other = cli_json("ledger", "--ledger", ledger, "--markov-model", "order:3")
    assert other["model_verdict"]["verdict"] == "unchecked" and other["guarantee"]["kind"] == "model-free"
    assert "did not check order:3" in other["model_verdict"]["why"]
    assert other["provenance"]["design_checks"]["order:2"]["verdict"] == "passed"


def test_a_phase_design_is_accounted_with_the_designs_own_delta_z(designs, tmp_path):
    csv, path, _ = designs["daily"]
    ledger = tmp_path / "l.db"
    cli_json("publish", "--trial", "a pilot stream", "--schedule", path, "--data", csv, "--ledger", ledger, "--through", 150)
    led = cli_json("ledger", "--ledger", ledger)
    released = [r for r in led["releases"] if r["status"] == "released"]
    got = np.array([r["risk_at_release"] for r in released])
    assert np.allclose(got, reference_risk(led, design_model(csv, "phase:24")), rtol=1e-9, atol=0)
    assert 0.0 < got[-1] < len(released) * led["schedule"]["epsilon_c"]  # Δ_Z < 1 somewhere: less than composition
    assert "Markov model phase:24" in led["model"]


def test_markov_model_options_refused_in_one_line(designs, tmp_path):
    csv, path, _ = designs["xor"]
    ledger = tmp_path / "l.db"
    refused(run_any("publish", "--schedule", path, "--data", csv, "--ledger", ledger, "--markov-model", "auto"),
            "--markov-model auto selects a model at design time")
    refused(run_any("publish", "--A", 0, "--S-bar", 1, "--epsilon-c", 0.1, "--value-range", "0:1", "--model",
                    "two-state:p=0.1,q=0.2", "--data", csv, "--ledger", ledger, "--markov-model", "order:2"),
            "--markov-model order:2 is fitted to readings", "two-state:p=0.1,q=0.2")
    refused(run_any("publish", "--schedule", path, "--data", csv, "--ledger", ledger, "--markov-model", "order:0"),
            "--markov-model")
    # the ledger's model is fixed by its first run
    cli_json("publish", "--trial", "a pilot stream", "--schedule", path, "--data", csv, "--ledger", ledger, "--through", 20,
             "--markov-model", "chain")
    refused(run_any("publish", "--schedule", path, "--data", csv, "--ledger", ledger, "--through", 30),
            "accounts with model", "--markov-model")


def test_model_spec_round_trip_and_old_records():
    m = ModelSpec("bundled", markov_model="hmm:2", markov_seed=3)
    assert ModelSpec.from_dict(m.to_dict()) == m and m.to_dict()["markov_model"] == "hmm:2"
    old = ModelSpec().to_dict()
    assert "markov_model" not in old and ModelSpec.from_dict(old).markov_model == "chain"
    for bad in ("auto", "phase", "order:x"):
        with pytest.raises(InvalidInputError, match="markov_model|model"):
            ModelSpec("bundled", markov_model=bad)
    with pytest.raises(InvalidInputError, match="fitted to data"):
        ModelSpec("two-state:p=0.1,q=0.1", markov_model="order:2")
