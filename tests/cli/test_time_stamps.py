"""ISO 8601 time stamps in every command that reads data (issue 33, item 2).

The same readings written with integer slots and with hourly date-times must give the same design; the time-stamped
file states its slot length (inferred: the most common step between a meter's stamps) and the readings penalty's phase period
defaults to a day of slots (24 here), as ``--slot-length 1h`` gives with integer slots.  Also: stamps outside the
nanosecond range of pandas (years 1677 and 9999), which ended in an internal error.
"""

from __future__ import annotations

import pandas as pd
import pytest

from policyopt.data import load_citylearn
from tests._cli import ok_json, refused, run_any, run_cli

COMMON = ("--value-range", "0:48", "--states", "3")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Four bundled homes over 1,500 hours, as integer slots and as ISO 8601 date-times with an offset."""
    d = load_citylearn()
    users = sorted(d["user"].unique())[:4]
    x = d[d["user"].isin(users) & (d["time"] < 1500)]
    root = tmp_path_factory.mktemp("stamps")
    x.to_csv(root / "slots.csv", index=False)
    stamps = pd.Timestamp("2022-01-01T00:00:00Z") + pd.to_timedelta(x["time"], unit="h")
    x.assign(time=stamps.dt.strftime("%Y-%m-%dT%H:%M:%S+00:00")).to_csv(root / "stamps.csv", index=False)
    return root / "slots.csv", root / "stamps.csv"


@pytest.fixture(scope="module")
def designs(files):
    slots, stamps = files
    args = ("schedule", *COMMON, "--max-rmse", "0.3", "--users", "100000")
    return (ok_json(*args, "--data", stamps), ok_json(*args, "--data", slots, "--slot-length", "1h"),
            ok_json(*args, "--data", slots))


def test_a_time_stamped_csv_designs_as_its_integer_slots(designs):
    stamped, slotted, bare = designs
    for key in ("status", "A", "S_bar", "epsilon_c", "penalty", "max_penalty", "model_free"):
        assert stamped[key] == slotted[key], key
    assert stamped["status"] == "optimal" and stamped["epsilon_c"] > 0
    assert stamped["deployment"]["slot_length"] == slotted["deployment"]["slot_length"] == "1h"
    assert stamped["model_free"]["horizon"] == 8760  # a year of the inferred 1 h slots
    assert "(ISO 8601 time stamps: slot k is 2022-01-01T00:00:00+00:00 + k·1h)" in stamped["model"]["source"]
    # integer slots without a slot length: no day known, no phase, a horizon of the data's length
    assert bare["deployment"]["slot_length"] is None and bare["model_free"]["horizon"] == 1500


def test_the_phase_period_defaults_to_a_day_of_slots(designs):
    stamped, slotted, bare = designs
    def phase(d):
        return d["model"]["readings_penalty"]["phase_period"]

    assert phase(stamped) == phase(slotted) == 24 and phase(bare) == 1
    assert stamped["penalty_comparison"]["phase_period"] == 24


def test_check_model_and_backtest_read_time_stamps(files, tmp_path):
    slots, stamps = files
    check = [ok_json("check-model", "--data", f, *COMMON, "--max-lag", 24, "--draws", 19, "--boot", 20, *extra)
             for f, extra in ((stamps, ()), (slots, ("--slot-length", "1h")))]
    for key in ("passed", "refuted_lags", "lags", "markov_test", "max_tv_check"):
        assert check[0][key] == check[1][key], key
    assert check[0]["slot_seconds"] == check[1]["slot_seconds"] == 3600
    assert "(ISO 8601 time stamps: slot k is 2022-01-01T00:00:00+00:00 + k·1h)" in check[0]["source"]
    sched = tmp_path / "s.json"
    sched.write_text(run_cli("schedule", "--data", stamps, *COMMON, "--max-rmse", "0.3", "--users", "100000",
                             "--json").stdout)
    back = [ok_json("backtest", "--data", f, "--schedule", sched, *extra)
            for f, extra in ((stamps, ()), (slots, ("--phase-period", "24")))]
    for key in ("realized_mse", "realized_mse_lower", "realized_mse_upper", "at_peak_aoi", "split_slot"):
        assert back[0][key] == back[1][key], key
    assert back[0]["at_peak_aoi"]["phase_period"] == 24 and back[0]["realized_mse"] > 0


@pytest.mark.parametrize("year", ["9999-12-31", "1677-09-21"])
def test_stamps_beyond_the_nanosecond_range_are_read(tmp_path, year):
    path = tmp_path / f"y{year[:4]}.csv"
    rows = [f"{u},{year}T{h:02d}:00:00,{v}" for u in "ab" for h, v in ((20, 1), (21, 2), (22, 1), (23, 3))]
    path.write_text("user,time,value\n" + "\n".join(rows) + "\n")
    out = ok_json("check-data", "--data", path, "--value-range", "0:3", "--states", 2)
    assert (out["slot_length"], out["slot_length_source"], out["slots"]) == ("1h", "time stamps", 4)


def test_a_stamp_off_the_grid_is_refused_in_one_line(files, tmp_path):
    _, stamps = files
    text = stamps.read_text().splitlines()
    text[5] = text[5].replace(":00:00+00:00", ":00:30+00:00", 1)
    path = tmp_path / "off.csv"
    path.write_text("\n".join(text) + "\n")
    # the slot length is the most common step within a user's series (1 h), not the smallest (30 s, which would make
    # every stamp "on the grid" and the year 120 times longer)
    refused(run_any("schedule", "--data", path, *COMMON), "line 6", "is not on the grid of 1h slots")


def _without_wall_times(d):
    """`d` with every ``wall_time_s`` left out (at any depth)."""
    if isinstance(d, dict):
        return {k: _without_wall_times(v) for k, v in d.items() if k != "wall_time_s"}
    if isinstance(d, list):
        return [_without_wall_times(v) for v in d]
    return d


@pytest.fixture(scope="module")
def parquet_stamps(files, tmp_path_factory):
    """The same readings as a Parquet data set of two files whose `time` column holds date-times (naive, UTC)."""
    slots, _ = files
    x = pd.read_csv(slots)
    x = x.assign(time=(pd.Timestamp("2022-01-01") + pd.to_timedelta(x["time"], unit="h")).to_numpy())
    root = tmp_path_factory.mktemp("pq_stamps")
    users = sorted(x["user"].unique())
    x[x["user"].isin(users[:2])].to_parquet(root / "a.parquet", index=False)
    x[~x["user"].isin(users[:2])].to_parquet(root / "b.parquet", index=False)
    return root


def test_a_time_stamped_parquet_data_set_designs_as_its_csv(designs, parquet_stamps):
    stamped, _, _ = designs
    pq = ok_json("schedule", *COMMON, "--max-rmse", "0.3", "--users", "100000", "--data", parquet_stamps)
    for key in ("status", "A", "S_bar", "epsilon_c", "penalty", "max_penalty", "model_free", "penalty_comparison"):
        assert pq[key] == stamped[key], key
    assert _without_wall_times(pq["model_check"]) == _without_wall_times(stamped["model_check"])
    assert pq["deployment"]["slot_length"] == "1h" and pq["model_free"]["horizon"] == 8760
    assert "(ISO 8601 time stamps: slot k is 2022-01-01T00:00:00+00:00 + k·1h)" in pq["model"]["source"]


def test_parquet_stamps_off_the_grid_or_mixed_with_slots_are_refused(parquet_stamps, tmp_path):
    x = pd.read_parquet(parquet_stamps / "b.parquet")
    off = tmp_path / "off"
    off.mkdir()
    pd.read_parquet(parquet_stamps / "a.parquet").to_parquet(off / "a.parquet", index=False)
    x.assign(time=x["time"].where(x.index != 7, x["time"].iloc[7] + pd.Timedelta(seconds=30))).to_parquet(
        off / "b.parquet", index=False)
    refused(run_any("schedule", "--data", off, *COMMON), "b.parquet' row 8", "is not on the grid of 1h slots")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    pd.read_parquet(parquet_stamps / "a.parquet").to_parquet(mixed / "a.parquet", index=False)
    x.assign(time=range(len(x))).to_parquet(mixed / "b.parquet", index=False)
    refused(run_any("check-data", "--data", mixed, *COMMON), "holds integer slots and other files date-times")


def test_check_data_reads_parquet_stamps_and_the_dask_reader_refuses_them(parquet_stamps):
    from policyopt.errors import InvalidInputError
    from policyopt.io import read_parquet_partition

    out = ok_json("check-data", "--data", parquet_stamps, *COMMON)
    assert (out["slot_length"], out["slot_length_source"], out["users"]) == ("1h", "time stamps", 4)
    with pytest.raises(InvalidInputError, match=r"column `time` holds date-times \(timestamp\[us\]\); on Dask workers"):
        read_parquet_partition(parquet_stamps / "a.parquet")
    part = read_parquet_partition(parquet_stamps / "a.parquet", stamps=True)
    assert part["time_us"][0] == pd.Timestamp("2022-01-01", tz="UTC").value // 1000 and "time" not in part


def test_backtest_refuses_readings_of_another_slot_length(files, tmp_path):
    slots, stamps = files
    sched = tmp_path / "s.json"
    sched.write_text(run_cli("schedule", "--data", stamps, *COMMON, "--max-rmse", "0.3", "--users", "100000",
                             "--json").stdout)
    x = pd.read_csv(slots)
    half = (pd.Timestamp("2022-01-01T00:00:00Z") + pd.to_timedelta(30 * x["time"], unit="min"))
    path = tmp_path / "half.csv"
    x.assign(time=half.dt.strftime("%Y-%m-%dT%H:%M:%S+00:00")).to_csv(path, index=False)
    refused(run_any("backtest", "--data", path, "--schedule", sched),
            "has slots of 30min, the --schedule was designed for slots of 1h")


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_parquet_stamps_of_every_arrow_unit_read_as_microseconds(tmp_path, unit):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from policyopt.errors import InvalidInputError
    from policyopt.io import read_parquet_partition

    base = pd.Timestamp("2022-01-01T00:00:00", tz="UTC").value // 1000  # µs since 1970
    per_us = {"s": 10**-6, "ms": 10**-3, "us": 1, "ns": 1000}[unit]
    ticks = [int((base + k * 3_600_000_000) * per_us) for k in range(3)]
    table = pa.table({"user": ["a"] * 3, "time": pa.array(ticks, pa.timestamp(unit)), "value": [1.0, 2.0, 3.0]})
    pq.write_table(table, tmp_path / "x.parquet")
    part = read_parquet_partition(tmp_path / "x.parquet", stamps=True)
    assert part["time_us"].tolist() == [base + k * 3_600_000_000 for k in range(3)]
    if unit == "ns":  # a nanosecond past a microsecond is refused with its row
        ticks[1] += 1
        pq.write_table(table.set_column(1, "time", pa.array(ticks, pa.timestamp("ns"))), tmp_path / "y.parquet")
        with pytest.raises(InvalidInputError, match=r"row 2: `time` .* is finer than a microsecond"):
            read_parquet_partition(tmp_path / "y.parquet", stamps=True)
