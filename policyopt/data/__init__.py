"""Real data shipped with policyopt (see ``PROVENANCE.md`` in this folder)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["load_citylearn", "CITYLEARN_PATH", "BUNDLED_USERS", "BUNDLED_VALUE_RANGE", "BUNDLED_STATES",
           "BUNDLED_SMOOTHING", "BUNDLED_SLOT_LENGTH"]

#: Path of the bundled CityLearn 2022 equipment-load file.
CITYLEARN_PATH = Path(__file__).with_name("citylearn_2022_equipment_kwh.csv.gz")

# The bundled pilot's documented deployment: one definition for `schedule` (which designs it) and
# `publish` / `ledger` (which account for it), so the two can never fit different chains.
#: Deployment size I of the bundled pilot's documented deployment (homes); see PROVENANCE.md.
BUNDLED_USERS = 100_000
#: Public a-priori range of one bundled reading (kWh in one hour): 0 to a 200 A, 240 V service's 48 kW for an hour.
BUNDLED_VALUE_RANGE = (0.0, 48.0)
#: States of the bundled pilot's chains (every row of every home observed ≥ 143 times at K = 3).
BUNDLED_STATES = 3
#: Additive smoothing of the bundled pilot's chains.
BUNDLED_SMOOTHING = 0.01
#: Length of one slot of the bundled data (hourly readings).
BUNDLED_SLOT_LENGTH = "1h"


def load_citylearn():
    """Hourly equipment electricity use of the 17 CityLearn 2022 homes, as a tidy table.

    Returns
    -------
    pandas.DataFrame
        148,920 rows with columns ``user`` (str, ``Building_1`` … ``Building_17``),
        ``time`` (int, hour 0..8759) and ``value`` (float, kWh in that hour).  ``df.attrs["unit"]``
        is ``"kWh"``, which :func:`~policyopt.models.estimation.fit_population` carries into the model.

    Notes
    -----
    Source: ``citylearn==2.1.2`` (MIT licence), column ``Equipment Electric Power [kWh]`` of
    ``citylearn_challenge_2022_phase_all/Building_{1..17}.csv``; provenance and licence
    in ``PROVENANCE.md`` beside this module.
    """
    import pandas as pd

    wide = pd.read_csv(CITYLEARN_PATH, compression="gzip")
    tidy = wide.melt(id_vars="hour", var_name="user", value_name="value").rename(columns={"hour": "time"})
    out = tidy[["user", "time", "value"]].reset_index(drop=True)
    out.attrs["unit"] = "kWh"
    return out
