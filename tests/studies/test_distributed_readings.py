"""The readings penalty and the model check on the Dask path (Parquet data set, ``--workers``).

A small data set written from six of the bundled homes (60 days, three files of two homes): the per-slot
sums reduced over the files must give the serial path's moments, and ``policyopt schedule --workers 2``
the serial run's JSON numbers (to 1e-12 relative).
"""

from __future__ import annotations

import numpy as np
import pytest

from _cli import ok_json
from policyopt.data import load_citylearn
from policyopt.studies.distributed import fit_partitions
from policyopt.studies.distributed_checks import check_partitions, readings_moments_partitions
from policyopt.utility.readings_penalty import ReadingsMSEPenalty, readings_moments

DAYS, HOMES, PER_FILE = 60, 6, 2
A_MAX = S_MAX = 24


@pytest.fixture(scope="module")
def homes(tmp_path_factory):
    """(directory of three Parquet files, the same readings as one DataFrame)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = load_citylearn()
    users = sorted(df["user"].unique())[:HOMES]
    df = df[df["user"].isin(users) & (df["time"] < 24 * DAYS)][["user", "time", "value"]].reset_index(drop=True)
    root = tmp_path_factory.mktemp("homes")
    for i in range(0, HOMES, PER_FILE):
        part = df[df["user"].isin(users[i:i + PER_FILE])]
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), root / f"part-{i // PER_FILE}.parquet")
    return root, df


def _close(a, b, rel=1e-12, scale=False):
    """Equal to `rel` relative; with `scale`, relative to the array's largest entry (per-slot cross terms are
    differences (Σd)² − Σd² whose rounding is relative to Σd², not to the difference)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    both = np.isfinite(a) & np.isfinite(b)
    assert np.array_equal(np.isfinite(a), np.isfinite(b))
    ref = np.max(np.abs(a[both])) if scale else np.maximum(np.abs(a[both]), np.abs(b[both]))
    assert np.all(np.abs(a[both] - b[both]) <= rel * ref + 1e-300), float(np.max(np.abs(a[both] - b[both]) / (ref + 1e-300)))


@pytest.mark.parametrize("phase", [None, 24])
def test_partition_sums_give_the_serial_moments(homes, phase):
    root, df = homes
    L = A_MAX + S_MAX + 1
    serial = readings_moments(df, L, phase_period=phase)
    dist, stats = readings_moments_partitions(root, L, phase_period=phase, chunk_users=1)  # in process, 1 user per chunk
    assert stats["partitions"] == 3
    assert (dist.n_users, dist.slots, dist.first_slot, dist.phase_period) == (serial.n_users, serial.slots,
                                                                             serial.first_slot, serial.phase_period)
    assert dist.value_range == serial.value_range and dist.value_range_declared is False and dist.clipped == 0
    for name in ("self_sum", "self_cnt", "cross_sum", "cross_cnt"):
        _close(getattr(dist, name), getattr(serial, name), scale=True)
    a = ReadingsMSEPenalty(serial, users=10**5, design="upper")
    b = ReadingsMSEPenalty(dist, users=10**5, design="upper")
    _close(a.staleness(np.arange(L + 1)), b.staleness(np.arange(L + 1)))
    _close(a.band()[0], b.band()[0])
    assert b.bootstrap_info() == a.bootstrap_info()


def test_files_with_disjoint_time_ranges_add_up_slot_by_slot(tmp_path):
    """Files starting at different slots are aligned on the slot before they are added."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    frames = [pd.DataFrame({"user": f"u{i}", "time": np.arange(t0, t0 + n), "value": rng.uniform(0, 2, n)})
              for i, (t0, n) in enumerate([(5, 40), (0, 30), (20, 50), (60, 15)])]
    for i, f in enumerate(frames):
        pq.write_table(pa.Table.from_pandas(f, preserve_index=False), tmp_path / f"p{i}.parquet")
    serial = readings_moments(pd.concat(frames), 6)
    dist, _ = readings_moments_partitions(tmp_path, 6)
    assert dist.first_slot == serial.first_slot == 0 and dist.slots == serial.slots == 75
    for name in ("self_sum", "self_cnt", "cross_sum", "cross_cnt"):
        _close(getattr(dist, name), getattr(serial, name), scale=True)


SKIP = {"wall_time_s", "credible", "distributed", "data_check", "row_transitions", "min_row_transitions", "sparse_states",
        "max_tv_witnesses", "warnings"}


def _compare(a, b, path=""):
    """Every number of the serial JSON `a` in the Dask JSON `b` to 1e-12 relative (serial-only posterior facts skipped)."""
    if isinstance(a, dict):
        for k in a:
            if k in SKIP:
                continue
            assert k in b, f"{path}/{k} missing on the Dask path"
            _compare(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _compare(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, (int, float)) and path.endswith("/epsilon") and \
            path.startswith(("/model_free", "/guarantee", "/horizon_design")):
        # the PLD accountant's ε moves by ~1e-8 relative when ε_C moves by 1e-15 (its adaptive discretisation), and ε_C
        # comes from the readings penalty, whose sums the Dask path adds in another order
        assert b == pytest.approx(a, rel=1e-6), path
    elif isinstance(a, float) and isinstance(b, (int, float)):
        assert b == pytest.approx(a, rel=1e-12, abs=1e-300), path
    elif isinstance(a, str) and path.endswith("explanation"):
        pass  # prose around the same numbers; compared through the fields
    else:
        assert a == b, path


@pytest.mark.slow
@pytest.mark.parametrize("extra", [["--phase-period", "1", "--max-penalty", "3"],
                                   ["--penalty", "readings-upper", "--max-penalty", "5"]])  # phase: a day, from 1 h slots
def test_cli_dask_readings_penalty_equals_serial(homes, extra):
    root, _ = homes
    # --slot-length: the model-free horizon is then a year of slots on both paths (without it the serial run takes the
    # readings' span, which the Dask run does not know yet: the guarantee settings are not a map-reduce)
    common = ["schedule", "--data", root, "--max-age", A_MAX, "--max-interval", S_MAX, "--slot-length", "1h", *extra]
    ser = ok_json(*common)
    dask = ok_json(*common, "--workers", 2)
    assert dask["model"]["readings_penalty"]["readings_users"] == HOMES
    assert dask["penalty_comparison"] is not None and dask["penalty_comparison"]["chain_staleness"] > 0
    assert not any("readings penalty is not available" in w for w in dask["warnings"])
    _compare(ser, dask)
    assert set(dask["warnings"]) <= set(ser["warnings"])  # the serial run adds its posterior (credible) warnings

    # the chains' held-out check ran on the partitions (Markov test and Δ(t) check, 39 simulated sets each), and the
    # guarantee follows its verdict as the serial run's does (_compare: peak_risk, guarantee, model_check, …)
    mc = dask["model_check"]
    assert mc["refuted"] is True and mc["models"][0]["draws"] == 39 and mc["markov_test"]["refuted"] is True
    assert dask["guarantee"]["kind"] == "model-free" and dask["peak_risk"] is None
    assert not any("not checked against the readings" in w for w in dask["warnings"])


def test_user_streams_make_the_draws_independent_of_the_grouping():
    """Each user simulated from its own stream: the max over all users is the max of the groups' maxima, draw by draw."""
    from policyopt.models.empirical import chain_statistic_draws, simulate_chain_states, user_streams

    rng = np.random.default_rng(5)
    P = [rng.dirichlet(np.ones(3), size=3) for _ in range(5)]
    users = [f"home-{i}" for i in range(5)]
    x = rng.integers(0, 3, size=(5, 400))
    x[1, 300:] = -1  # a shorter series
    whole = chain_statistic_draws(P, x, 3, 30, min_pairs=20, draws=7, rng=user_streams(users, 3))
    parts = [chain_statistic_draws(P[a:b], x[a:b], 3, 30, min_pairs=20, draws=7, rng=user_streams(users[a:b], 3))
             for a, b in ((0, 2), (2, 5))]
    np.testing.assert_array_equal(whole, np.maximum(*parts))
    # the same user's series whatever the batch of draws: 7 at once = 3 then 4 from the same streams
    s7 = simulate_chain_states(P[:1], [400], [0], 7, user_streams(users[:1], 3))
    g = user_streams(users[:1], 3)
    s34 = np.concatenate([simulate_chain_states(P[:1], [400], [0], 3, g), simulate_chain_states(P[:1], [400], [0], 4, g)])
    np.testing.assert_array_equal(s7, s34)


def test_partition_check_equals_the_serial_quick_check(homes):
    """check_partitions (in process, per file, combined by max) = quick_check on the same readings: every array."""
    from policyopt.models.estimation import fit_population
    from policyopt.studies.check_model import QUICK_DRAWS, check_fitted, data_states, quick_max_lag

    root, df = homes
    fit = fit_partitions(root, 12, smoothing=0.01, horizon=A_MAX + 1, n_staleness=A_MAX + S_MAX + 2)
    dist, stats = check_partitions(root, fit, A_MAX, S_MAX, seed=4)
    fitted = fit_population(df, 12, smoothing=0.01)
    states, users = data_states(df, fitted)
    ser = check_fitted(fitted, states, users, max_lag=quick_max_lag(A_MAX, S_MAX, states.shape[1]), draws=QUICK_DRAWS,
                       n_boot=0, seed=4)
    assert dist.empirical.max_lag == ser.empirical.max_lag == A_MAX + S_MAX - 1
    np.testing.assert_array_equal(dist.empirical.estimate, ser.empirical.estimate)
    np.testing.assert_array_equal(dist.draws, ser.draws)
    np.testing.assert_array_equal(dist.p_values, ser.p_values)
    np.testing.assert_array_equal(dist.empirical.users_without_claim, ser.empirical.users_without_claim)
    np.testing.assert_allclose(dist.model_max_tv, ser.model_max_tv, rtol=1e-12, atol=1e-300)
    assert dist.summary() == ser.summary() and dist.summary()["refuted"]
    assert len(stats["partition_seconds"]) == 3


def test_cli_dask_readings_too_short_is_one_line_exit_2(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from _cli import refused, run_any

    rng = np.random.default_rng(2)
    pq.write_table(pa.table({"user": np.repeat(["a", "b"], 30), "time": np.tile(np.arange(30), 2),
                             "value": rng.uniform(0, 3, 60)}), tmp_path / "p.parquet")
    res = run_any("schedule", "--data", tmp_path, "--states", "2", "--max-age", "20", "--max-interval", "20",
                  "--workers", "1")
    refused(res, "the readings span 30 slots; the readings penalty needs ages up to 41")
