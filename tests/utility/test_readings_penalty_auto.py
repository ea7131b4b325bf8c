"""The readings penalty's ``design="auto"`` (issue 33 item 3, the default of ``--penalty`` with readings): the band's
upper end wherever the pilot cannot tell the staleness from 0 (the band's lower end is 0 at some age), else the point
estimate; checked on readings whose truth is known (independent meters: the mean's staleness is ≈ 0 at large I) and
on the bundled homes (a clear positive staleness at every age)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from policyopt.data import load_citylearn
from policyopt.utility.readings_penalty import MIN_BOOTSTRAP_PERIODS, ReadingsMSEPenalty, readings_moments

from _cli import ok_json


def _independent(meters: int, days: int, seed: int = 3) -> pd.DataFrame:
    """AR(1) meters, hourly, independent of each other (simulation): the cross term of the staleness is 0."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(meters):
        x = 0.0
        for t in range(24 * days):
            x = 0.9 * x + rng.normal()
            rows.append((f"m{u}", t, min(10.0, max(0.0, 2.0 + 0.5 * x))))
    return pd.DataFrame(rows, columns=["user", "time", "value"])


@pytest.fixture(scope="module")
def independent():
    return readings_moments(_independent(3, 60), 337, value_range=(0.0, 10.0), phase_period=24)


def test_independent_meters_get_the_bands_upper_end(independent):
    auto = ReadingsMSEPenalty(independent, users=50_000, design="auto")
    upper = ReadingsMSEPenalty(independent, users=50_000, design="upper")
    lo = auto.band()[0]
    zero = np.flatnonzero(lo[1:] <= 0) + 1
    assert zero.size > 0  # the pilot cannot tell the staleness from 0 at these ages
    assert auto.design == "upper" and auto.design_requested == "auto"
    np.testing.assert_array_equal(auto.staleness(np.arange(338)), upper.staleness(np.arange(338)))
    assert f"is 0 at {zero.size} of the ages 1..337 (first at age {zero[0]})" in auto.design_reason
    point = ReadingsMSEPenalty(independent, users=50_000)
    assert point.design == point.design_requested == "point" and point.design_reason == "given"
    assert np.all(auto.staleness(np.arange(338)) >= point.staleness(np.arange(338)))


def test_the_choice_is_made_again_for_another_deployment_size(independent):
    auto = ReadingsMSEPenalty(independent, users=50_000, design="auto")
    one = auto.with_users(1)  # one user: the staleness is the meter's own, far from 0
    assert one.design_requested == "auto"
    assert one.design == ("upper" if np.any(one.band()[0][1:] <= 0) else "point") == "point"
    assert one.design_reason == "the 95% band's lower end is above 0 at every age 1..337"


def test_the_bundled_homes_keep_the_point_estimate():
    m = readings_moments(load_citylearn(), 337, value_range=(0.0, 4.0), phase_period=24)
    auto = ReadingsMSEPenalty(m, users=100_000, design="auto")
    assert auto.design == "point" and np.all(auto.band()[0][1:] > 0)
    np.testing.assert_array_equal(auto.staleness(np.arange(338)),
                                  ReadingsMSEPenalty(m, users=100_000).staleness(np.arange(338)))


def test_without_a_band_the_point_estimate_is_used_and_said_so():
    m = readings_moments(_independent(3, MIN_BOOTSTRAP_PERIODS - 2), 24, value_range=(0.0, 10.0), phase_period=24)
    auto = ReadingsMSEPenalty(m, users=1000, design="auto")
    assert auto.design == "point" and auto.band() is None
    assert auto.design_reason.startswith(f"no band: the readings cover {MIN_BOOTSTRAP_PERIODS - 2} periods of 24 slots")


def test_schedule_states_the_choice(tmp_path):
    data = tmp_path / "m3.csv"
    _independent(3, 60).to_csv(data, index=False)
    argv = ["--data", data, "--states", 3, "--value-range", "0:10", "--users", 50_000, "--max-rmse", 0.05,
            "--phase-period", 24]
    auto = ok_json("schedule", *argv)["model"]["readings_penalty"]
    assert (auto["design"], auto["design_requested"]) == ("upper", "auto")
    assert "the pilot cannot tell the staleness there from 0" in auto["design_reason"]
    point = ok_json("schedule", *argv, "--penalty", "readings")["model"]["readings_penalty"]
    assert (point["design"], point["design_requested"], point["design_reason"]) == ("point", "point", "given")


def test_an_unpickled_penalty_refuses_another_deployment_size_it_cannot_band(independent):
    import pickle

    from policyopt.errors import InvalidInputError

    for design in ("auto", "upper"):
        p = pickle.loads(pickle.dumps(ReadingsMSEPenalty(independent, users=50_000, design=design)))
        assert p.design == "upper"  # the unpickled penalty itself keeps its table
        with pytest.raises(InvalidInputError, match=rf"with_users\(10\): .* the band its design '{design}' needs"):
            p.with_users(10)
    point = pickle.loads(pickle.dumps(ReadingsMSEPenalty(independent, users=50_000)))
    assert point.with_users(10).users == 10  # the point estimate needs no band
