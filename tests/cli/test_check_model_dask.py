"""``policyopt check-model --workers N``: the full check with its band as a map-reduce over Parquet files.

The bundled homes (17 homes, hourly kWh, a year) split into three Parquet files of whole homes: the Dask run must
print the serial run's numbers exactly (every user resamples the band's blocks and simulates its chain from its own
streams keyed by its name).  Partition invariance on synthetic meters (``tests/benchmarks/make_meters``: sticky
random chains over 12 levels, 1 % missing slots), written once as one file and once as three files.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _cli import ok_json, refused, run_any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from make_meters import write_meters  # noqa: E402

#: Small but not trivial: 3 states, 24 lags, 19 simulated data sets, 20 replicates.
OPTIONS = ("--states", "3", "--max-lag", "24", "--draws", "19", "--boot", "20")


def _write_split(table, users, out: Path, files: int) -> Path:
    """`table`'s readings as `files` Parquet files of whole users, users interleaved over the files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir()
    names = np.unique(users)
    for i in range(files):
        pq.write_table(table.filter(pa.array(np.isin(users, names[i::files]))), out / f"part-{i}.parquet")
    return out


@pytest.fixture(scope="module")
def homes(tmp_path_factory):
    """The bundled homes as three Parquet files."""
    import pyarrow as pa

    from policyopt.data import load_citylearn

    df = load_citylearn()
    users = df["user"].astype(str).to_numpy()
    table = pa.table({"user": pa.array(users.tolist(), type=pa.string()), "time": df["time"].to_numpy(np.int64),
                      "value": df["value"].to_numpy(float)})
    return _write_split(table, users, tmp_path_factory.mktemp("homes") / "three", 3)


@pytest.fixture(scope="module")
def meters(tmp_path_factory):
    """(one-file directory, three-file directory) holding the same 120 synthetic meters × 600 slots."""
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("meters")
    (one,) = write_meters(root / "one", 120, users_per_file=120, slots=600, seed=11)
    table = pq.read_table(one)
    return root / "one", _write_split(table, np.asarray(table.column("user").to_pylist()), root / "three", 3)


@pytest.fixture(scope="module")
def cluster():
    """The address of one local Dask cluster (one worker process, one thread) shared by the tests below that compare a
    distributed run with the serial one: ``--scheduler ADDRESS`` sends the same map-reduce tasks to the same kind of
    worker process that ``--workers 1`` starts for itself, without starting a cluster (about 10 s) for every run.
    ``--workers N`` itself (the local cluster a run starts and ends) is run by
    :func:`test_dask_cli_prints_the_serial_numbers_with_a_band` and
    :func:`test_a_repeated_reading_in_the_held_out_part_is_refused`."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield c.scheduler_address


def _numbers(out: dict) -> dict:
    """The report without what may differ between runs: timing, how it ran, the data's name, the data check (of
    readings held in memory: the serial path's only), and the Markov test's G² sums (compared to rounding by
    :func:`_same`: the Dask path adds the users' G² in another order)."""
    def without_g2(mt):
        return {k: v for k, v in mt.items() if k != "statistic"}

    out = {k: v for k, v in out.items() if k not in ("wall_time_s", "distributed", "source", "data_check")}
    out["markov_test"] = without_g2(out["markov_test"])
    out["models"] = [{**m, "markov_test": without_g2(m["markov_test"])} for m in out["models"]]
    return out


def _same(dask: dict, serial: dict) -> None:
    """Every number of the Dask report equals the serial report's; the G² sums to 1e-12 relative."""
    assert _numbers(dask) == _numbers(serial)
    for d, s in ((dask, serial), *zip(dask["models"], serial["models"])):
        np.testing.assert_allclose(d["markov_test"]["statistic"], s["markov_test"]["statistic"], rtol=1e-12, atol=0)


@pytest.mark.slow
def test_dask_cli_prints_the_serial_numbers_with_a_band(homes, tmp_path):
    three = homes
    serial = ok_json("check-model", "--data", three, *OPTIONS)
    png = tmp_path / "check.png"
    dask = ok_json("check-model", "--data", three, *OPTIONS, "--workers", "2", "--plot", png)
    assert dask.pop("plot") == str(png) and png.stat().st_size > 10_000
    _same(dask, serial)
    assert dask["distributed"]["partitions"] == 3 and dask["distributed"]["workers"] == 2
    assert len(dask["distributed"]["peak_rss_mib"]) >= 1
    assert dask["users"] == 17 and dask["max_lag"] == 24 and "block bootstrap" in dask["estimate_method"]
    lags = dask["lags"]
    for row in lags:  # band ≥ estimate ≥ lower, all in [0, 1]
        assert 0.0 <= row["empirical_lower"] <= row["empirical_max_tv"] <= row["empirical_upper"] <= 1.0
    assert all(row["users_without_claim"] == 0 and row["empirical_upper"] < 1.0 for row in lags)  # a real band
    assert all(row["empirical_upper"] > row["empirical_max_tv"] for row in lags)
    assert dask["refuted_lags"] == list(range(3, 25))  # pointwise: the homes keep their habits (as the serial guide says)
    # the held-out Markov test ran on the partitions too (lags 1..--max-lag), and refutes the chains family-wise
    mt = dask["markov_test"]
    assert mt["lags"] == list(range(1, 25)) and mt["holdout"] == 0.5 and mt["users"] == 17 and mt["refuted"]
    assert dask["refuted"] is True and dask["distributed"]["markov_test_s"] > 0


@pytest.mark.slow
def test_holdout_and_value_range_on_dask_equal_serial(homes, cluster):
    three = homes
    opts = (*OPTIONS, "--holdout", "0.4", "--value-range", "0:4")
    serial = ok_json("check-model", "--data", three, *opts)
    dask = ok_json("check-model", "--data", three, *opts, "--scheduler", cluster)
    assert dask["distributed"]["scheduler"] == cluster
    _same(dask, serial)
    assert dask["holdout"] == 0.4 and dask["value_range"] == [0.0, 4.0]
    assert dask["markov_test"]["holdout"] == 0.4  # the Markov test is held out on the same cut
    assert dask["slots"] < dask["fit_slots"]  # tested on the last 40 % of each series, fitted on the first 60 %


def test_partitioning_does_not_change_the_numbers(meters):
    from policyopt.studies.distributed_checks import check_model_partitions

    one, three = meters
    kw = dict(n_states=3, max_lag=12, draws=19, n_boot=20, min_pairs=20, seed=5)
    a, stats_a = check_model_partitions(one, **kw)
    b, stats_b = check_model_partitions(three, **kw)
    assert stats_a["partitions"] == 1 and stats_b["partitions"] == 3
    _same(a.to_dict(), b.to_dict())
    np.testing.assert_array_equal(a.draws, b.draws)
    assert "block bootstrap" in a.empirical.method and a.empirical.lower.max() > 0.5  # a band was resampled


def test_parts_of_user_groups_merge_into_the_whole_band():
    from policyopt.models.empirical import estimate_max_tv, max_tv_band, max_tv_part, user_streams

    rng = np.random.default_rng(3)
    x = np.where(rng.random((7, 1500)) < 0.02, -1, (np.cumsum(rng.random((7, 1500)) < 0.05, axis=1) // 3) % 3)
    names = [f"u{i}" for i in range(7)]
    whole = estimate_max_tv(x, 3, 10, n_boot=40, min_pairs=20, rng=user_streams(names, 9, stream=2))
    groups = ([4, 0, 6], [1, 5], [2, 3])
    parts = [max_tv_part(x[g], 3, 10, n_boot=40, min_pairs=20, keep_users=False,
                         rng=user_streams([names[i] for i in g], 9, stream=2)) for g in groups]
    merged = max_tv_band(parts[0].merge(parts[1]).merge(parts[2]), 0.95)
    for key in ("estimate", "lower", "upper", "users_without_claim"):
        np.testing.assert_array_equal(getattr(merged, key), getattr(whole, key))
    assert merged.method == whole.method and merged.n_users == 7
    assert np.all(whole.upper >= whole.estimate) and whole.upper.min() < 1.0


def test_check_model_workers_refusals(homes, tmp_path):
    csv = tmp_path / "r.csv"
    csv.write_text("user,time,value\na,0,1.0\na,1,2.0\n")
    refused(run_any("check-model", "--data", csv, "--workers", "2"), "need a Parquet --data", "r.csv")
    refused(run_any("check-model", "--workers", "2"), "need a Parquet --data", "no --data")
    three = homes
    refused(run_any("check-model", "--data", three, "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"),
            "either --workers 2", "not both")
    for bad in ("0", "two"):
        res = run_any("check-model", "--data", three, "--workers", bad)
        assert res.returncode == 2 and res.stdout == "" and res.stderr.count("\n") == 1, res.stderr
        assert "--workers" in res.stderr and bad in res.stderr and "Traceback" not in res.stderr
    refused(run_any("check-model", "--data", three, *OPTIONS[:2], "--max-lag", "9000", "--workers", "1"),
            "--max-lag 9000 must be below the series length T = 8760 slots")


def test_a_repeated_reading_in_the_held_out_part_is_refused(tmp_path, cluster):
    """The held-out part is quantised by the same step as the fit (``sorted_states``), which refuses a repeated
    (user, time) there too, not only in the fit part (on the workers of an existing cluster); a run on the local
    cluster it starts (``--workers 1``) counts it in words."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    T = 400
    users = np.repeat(["a", "b"], T).tolist() + ["b"]
    times = np.concatenate([np.arange(T), np.arange(T), [350]])  # b's slot 350 twice: in the held-out half
    (tmp_path / "d").mkdir()
    pq.write_table(pa.table({"user": pa.array(users, type=pa.string()), "time": times,
                             "value": rng.random(2 * T + 1)}), tmp_path / "d" / "p.parquet")
    refused(run_any("check-model", "--data", tmp_path / "d", "--scheduler", cluster, "--states", "2", "--max-lag", "5",
                    "--holdout", "0.5"), "user 'b' has a second reading at time 350")
    (tmp_path / "d" / "p.parquet").unlink()  # without the repeated reading: one file, one worker, counted in words
    pq.write_table(pa.table({"user": pa.array(users[:-1], type=pa.string()), "time": times[:-1],
                             "value": rng.random(2 * T)}), tmp_path / "d" / "p.parquet")
    text = run_any("check-model", "--data", tmp_path / "d", "--workers", "1", "--states", "2", "--max-lag", "5").stdout
    assert "map-reduce over 1 Parquet file on a local cluster of 1 worker (" in text, text


@settings(max_examples=15, deadline=None)
@given(group=st.lists(st.integers(0, 2), min_size=6, max_size=6), seed=st.integers(0, 2**16),
       missing=st.sampled_from([0.0, 0.05]))
def test_any_grouping_of_users_gives_the_same_band(group, seed, missing):
    from policyopt.models.empirical import estimate_max_tv, max_tv_band, max_tv_part, user_streams

    rng = np.random.default_rng(seed)
    x = (np.cumsum(rng.random((6, 600)) < 0.1, axis=1) // 2) % 3
    x = np.where(rng.random(x.shape) < missing, -1, x)
    names = [f"meter-{i}" for i in range(6)]
    whole = estimate_max_tv(x, 3, 6, n_boot=20, min_pairs=10, rng=user_streams(names, seed, stream=2))
    parts = [max_tv_part(x[[i for i in range(6) if group[i] == g]], 3, 6, n_boot=20, min_pairs=10, keep_users=False,
                         rng=user_streams([names[i] for i in range(6) if group[i] == g], seed, stream=2))
             for g in sorted(set(group))]
    merged = parts[0]
    for p in parts[1:]:
        merged = merged.merge(p)
    band = max_tv_band(merged, 0.95)
    for key in ("estimate", "lower", "upper", "users_without_claim"):
        np.testing.assert_array_equal(getattr(band, key), getattr(whole, key))
    assert np.all((0 <= band.lower) & (band.lower <= band.estimate) & (band.estimate <= band.upper) & (band.upper <= 1))


def test_parts_that_do_not_fit_together_are_refused():
    from policyopt.errors import InvalidInputError
    from policyopt.models.empirical import max_tv_part, user_streams

    x = np.tile([0, 1, 1, 2, 2, 2], (2, 100))
    a = max_tv_part(x, 3, 5, n_boot=20, rng=user_streams(["a", "b"], 0, stream=2))
    with pytest.raises(InvalidInputError, match="cannot merge parts of 5 lags, 20 replicates"):
        a.merge(max_tv_part(x, 3, 5, n_boot=0))
    with pytest.raises(InvalidInputError, match=r"one numpy Generator per user \(2\), got 1"):
        max_tv_part(x, 3, 5, n_boot=20, rng=user_streams(["a"], 0, stream=2))
    with pytest.raises(InvalidInputError, match="`stream` must be an integer ≥ 1, got 0"):
        user_streams(["a"], 0, stream=0)



def _gappy_meters(root: Path, *, gappy_half: str | None, pairs: bool = True) -> Path:
    """Three regular meters over 4000 slots and one, ``gappy``, whose first (``train``) or second (``test``) half
    holds only a pair of consecutive readings every 60 slots (68 readings over about 2000 slots: mostly gaps, yet 34
    transitions, enough for its chain to be fitted); ``pairs=False``: single readings (no transition: excluded)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(5)
    users, times = [], []
    for u in ("m0", "m1", "m2"):
        users += [u] * 4000
        times += list(range(4000))
    if gappy_half is not None:
        sparse = [t + d for t in range(0, 1990, 60) for d in ((0, 1) if pairs else (0,))]
        offset, dense = (0, range(2000, 4000)) if gappy_half == "train" else (2000, range(0, 2000))
        gappy = sorted([offset + t for t in sparse] + list(dense))
        users += ["gappy"] * len(gappy)
        times += gappy
    root.mkdir()
    pq.write_table(pa.table({"user": users, "time": np.asarray(times, np.int64),
                             "value": rng.gamma(2.0, 0.5, len(times))}), root / "m.parquet")
    return root


@pytest.mark.parametrize("gappy_half", ["train", "test"])
def test_a_mostly_gaps_series_is_refused_in_either_part_serially_and_on_dask(tmp_path, gappy_half, cluster):
    """--holdout 0.5: a user whose training or held-out half is mostly gaps is refused by both paths alike."""
    data = _gappy_meters(tmp_path / "d", gappy_half=gappy_half)
    args = ("check-model", "--data", data, *OPTIONS, "--holdout", "0.5")
    serial, dask = run_any(*args), run_any(*args, "--scheduler", cluster)
    refused(serial, "user 'gappy' has", "the series is mostly gaps; put the readings on a regular slot grid")
    assert dask.stderr == serial.stderr and dask.returncode == 2


def test_one_excluded_user_is_counted_in_the_singular(tmp_path, cluster):
    """A user without transitions in the training half is excluded from the fit: ``excluded    : 1 user: …``
    (serially and on a Dask cluster)."""
    data = _gappy_meters(tmp_path / "d", gappy_half="train", pairs=False)
    args = ("check-model", "--data", data, *OPTIONS, "--holdout", "0.5")
    for extra in ((), ("--scheduler", cluster)):
        res = run_any(*args, *extra)
        assert res.returncode == 0, res.stderr
        assert "\nexcluded    : 1 user: gappy (0 transitions < 30 needed)\n" in res.stdout
        assert "\ndata        : " in res.stdout and "3 users, 3 quantile states" in res.stdout


# ---------------------------------------------------------------------------------------------------------------------
# the held-out check of the chains as a map-reduce (check-model's Markov test; schedule --workers' model check)


def test_held_out_check_on_partitions_is_the_serial_design_check(meters):
    """held_out_check_partitions (1 file, 3 files, groups of 7 users inside a file) = the serial check_markov_model of
    the chains on the same readings with the fit's quantizer: every field, the G² sums to rounding."""
    import pyarrow.parquet as pq

    from policyopt.models.estimation import fit_population
    from policyopt.studies.distributed import fit_partitions
    from policyopt.studies.distributed_heldout import held_out_check_partitions
    from policyopt.studies.markov_check import check_markov_model, split_states

    one, three = meters
    df = pq.read_table(one).to_pandas()
    fitted = fit_population(df, 3, smoothing=0.01)
    kw = dict(markov_lags=20, max_tv_lags=30, seed=3, draws=5)
    serial = check_markov_model("chain", split_states(df, fitted.quantizer, fitted.users), **kw)  # as design_check
    fit = fit_partitions(three, 3, smoothing=0.01, horizon=2, n_staleness=2)
    np.testing.assert_array_equal(fit.edges, fitted.quantizer.edges)
    a, stats = held_out_check_partitions(three, fit, **kw)
    b, _ = held_out_check_partitions(one, fit, **kw)
    # users handled in groups of 7 within the one file: the same numbers (each user simulates from its own streams)
    c, _ = held_out_check_partitions(one, fit, chunk_bytes=7 * 8 * 8 * serial.info["test_slots"], **kw)
    assert len(stats["partition_seconds"]) == 3
    for got in (a, b, c):
        assert (got.model, got.description, got.n_parameters, got.passed) == (serial.model, serial.description,
                                                                             serial.n_parameters, serial.passed)
        assert {k: v for k, v in got.info.items() if k != "wall_time_s"} == \
            {k: v for k, v in serial.info.items() if k != "wall_time_s"}
        assert got.max_tv_check == serial.max_tv_check
        g2 = {k: v for k, v in got.markov_test.items() if k != "statistic"}
        assert g2 == {k: v for k, v in serial.markov_test.items() if k != "statistic"}
        np.testing.assert_allclose(got.markov_test["statistic"], serial.markov_test["statistic"], rtol=1e-12, atol=0)
    assert serial.info["users"] == 120 and serial.markov_test["lags"] == list(range(1, 21))
    assert serial.max_tv_check["max_lag"] == 30 and len(serial.max_tv_check["pointwise_p_values"]) == 30


def test_check_model_workers_refuses_other_models(homes):
    refused(run_any("check-model", "--data", homes, "--workers", "1", "--markov-model", "order:2"),
            "--markov-model order:2 is fitted to readings held in memory", "--markov-model chain")
