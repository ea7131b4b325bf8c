"""The per-user Markov models of a Parquet data set as a map-reduce (policyopt.studies.distributed_models).

A small data set of an order-2 binary process (``tests/_processes.order2_chain``), 240 users in four files: the Dask
run must give the serial run's numbers exactly, and both must equal ``fit_markov_model`` on all users' states at
once (the maximum over users of ln Δ_Z to 1e-12, the summed counts exactly).
"""

from __future__ import annotations

import numpy as np
import pytest

from _processes import order2_chain
from policyopt.errors import InvalidInputError
from policyopt.models.markov_model import fit_markov_model
from policyopt.studies.distributed import dask_client, fit_partitions
from policyopt.studies.distributed_models import markov_model_partitions

USERS, SLOTS, FILES, FIRST_SLOT, HORIZON = 240, 400, 4, 5, 40
CONTINUE_RUN, AFTER_CHANGE = 0.905, 0.65  # order2_chain's defaults


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """(directory of FILES Parquet files, the readings as one DataFrame).

    Half the users are the other half's series flipped (X → 1 − X, the same order-2 process by symmetry) with the
    same missing slots, so exactly half the readings are 1 and the median edge of K = 2 quantile states separates the
    0s (readings in [0, 0.4)) from the 1s (in [1, 1.4)): the states are the simulated X.
    """
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(32)
    half = USERS // 2
    x = order2_chain(CONTINUE_RUN, AFTER_CHANGE).simulate(half, SLOTS, rng)["value"].to_numpy().reshape(half, SLOTS)
    x = np.concatenate([x, 1.0 - x])
    keep = rng.random((half, SLOTS)) >= 0.02  # 2 % missing slots
    keep = np.concatenate([keep, keep])
    value = x + 0.4 * rng.random(x.shape)
    names = np.array([f"u{i:03d}" for i in range(USERS)], dtype=object)
    uid, tt = np.nonzero(keep)
    df = pd.DataFrame({"user": names[uid], "time": tt + FIRST_SLOT, "value": value[uid, tt]})
    root = tmp_path_factory.mktemp("order2")
    for f in range(FILES):  # users interleaved over the files
        part = df[df["user"].isin(names[f::FILES])]
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), root / f"part-{f}.parquet")
    return root, df, x, keep


@pytest.fixture(scope="module")
def chains(data):
    return fit_partitions(data[0], 2, smoothing=0.01, horizon=HORIZON, n_staleness=2)


@pytest.fixture(scope="module")
def client():
    with dask_client(workers=2) as c:
        yield c


def _all_users_states(df, edges) -> tuple[np.ndarray, tuple]:
    """All users' states at once: a (U, last slot + 1) matrix, column = absolute slot (−1 missing), users sorted."""
    users = tuple(sorted(df["user"].unique()))
    row = {u: i for i, u in enumerate(users)}
    m = np.full((len(users), int(df["time"].max()) + 1), -1, dtype=np.int64)
    m[df["user"].map(row).to_numpy(), df["time"].to_numpy()] = np.searchsorted(edges, df["value"].to_numpy(), side="right")
    return m, users


def test_the_quantile_states_are_the_simulated_process(data, chains):
    _, df, x, keep = data
    assert chains.excluded == {} and chains.users == USERS and chains.readings == int(keep.sum())
    assert 0.4 <= chains.edges[0] < 1.0  # between the largest 0-reading and the smallest 1-reading
    m, _ = _all_users_states(df, chains.edges)
    assert np.array_equal(m[:, FIRST_SLOT:][keep], x[keep].astype(np.int64))


@pytest.mark.parametrize("spec", ["chain", "order:2", "phase:24"])
def test_dask_equals_serial_and_the_fit_of_all_users_at_once(data, chains, client, spec):
    root, df, _, _ = data
    serial = markov_model_partitions(root, spec, chains)  # client=None: file after file in this process
    dask = markov_model_partitions(root, spec, chains, client=client)
    m, users = _all_users_states(df, chains.edges)
    ref = fit_markov_model(spec, m, 2, users=users, smoothing=0.01)  # column = slot: starts 0
    ages = np.arange(HORIZON + 1)
    want = ref.log_max_tv(ages)
    for got in (serial, dask):
        assert got.spec == spec and got.users == USERS and got.partitions == FILES
        assert got.log_max_tv.shape == (HORIZON + 1,) and got.log_max_tv[0] == 0.0
        assert np.max(np.abs(got.log_max_tv[1:] - want[1:])) <= 1e-12
        assert np.array_equal(got.counts, ref.counts.sum(axis=0))
        assert got.transitions == sum(ref.transitions.values())
        assert got.description == ref.description and got.n_parameters == ref.n_parameters
    assert np.array_equal(dask.log_max_tv, serial.log_max_tv) and np.array_equal(dask.counts, serial.counts)
    assert len(dask.partition_seconds) == FILES and set(serial.peak_rss_mib) == {"local"}
    assert all(v > 0 for v in dask.peak_rss_mib.values())
    assert np.all(np.diff(dask.log_max_tv) <= 1e-12)  # Δ_Z is non-increasing in t (TV contracts)
    np.testing.assert_allclose(dask.max_tv, np.exp(dask.log_max_tv))


def test_order2_counts_recover_the_process(data, chains, client):
    """The summed (context, next) counts give the simulated conditionals; the order-2 Δ_Z differs from the chain's."""
    root = data[0]
    o2 = markov_model_partitions(root, "order:2", chains, client=client)
    c = o2.counts  # context z = x_{t−1} + 2·x_t (x_t most significant), next y
    assert c.shape == (4, 2) and o2.transitions == int(c.sum())
    stay_run = (c[0, 0] + c[3, 1]) / (c[0].sum() + c[3].sum())
    stay_change = (c[1, 0] + c[2, 1]) / (c[1].sum() + c[2].sum())
    assert abs(stay_run - CONTINUE_RUN) < 0.01 and abs(stay_change - AFTER_CHANGE) < 0.02
    chain = markov_model_partitions(root, "chain", chains, client=client)
    # every window (x_{t−1}, x_t, y) holds a pair x_t → y; a pair after a missing slot is in no window
    by_last = np.stack([c[0] + c[1], c[2] + c[3]])
    assert np.all(chain.counts >= by_last) and chain.transitions > o2.transitions > 0.9 * chain.transitions
    assert o2.log_max_tv[HORIZON] > chain.log_max_tv[HORIZON] + 0.1  # the order-2 Z chain forgets more slowly


def test_chunks_of_users_do_not_change_the_numbers(data, chains):
    root = data[0]
    a = markov_model_partitions(root, "phase:24", chains, horizon=10)
    b = markov_model_partitions(root, "phase:24", chains, horizon=10, chunk_users=7)
    assert np.array_equal(a.log_max_tv, b.log_max_tv) and np.array_equal(a.counts, b.counts)
    assert a.counts.shape == (24, 2, 2) and a.log_max_tv.shape == (11,)


@pytest.mark.parametrize(("spec", "text"), [("hmm:2", "`spec` 'hmm:2' is fitted by EM"),
                                            ("auto", "`spec` 'auto' selects among models"),
                                            ("order:9", "`spec` 'order:9' is not a model"),
                                            ("phase", "`spec` 'phase' is not a model")])
def test_refuses_models_not_fitted_from_counts(data, chains, spec, text):
    with pytest.raises(InvalidInputError, match=text):
        markov_model_partitions(data[0], spec, chains)


def test_refuses_bad_arguments(data, chains):
    root = data[0]
    with pytest.raises(InvalidInputError, match="`horizon` must be an integer ≥ 0, got -1"):
        markov_model_partitions(root, "chain", chains, horizon=-1)
    with pytest.raises(InvalidInputError, match="`chunk_users`"):
        markov_model_partitions(root, "chain", chains, chunk_users=0)
    with pytest.raises(InvalidInputError, match="`smoothing`"):
        markov_model_partitions(root, "chain", chains, smoothing=0.0)
    with pytest.raises(InvalidInputError, match="`fit` must be a DistributedFit"):
        markov_model_partitions(root, "chain", {"edges": [0.5]})
