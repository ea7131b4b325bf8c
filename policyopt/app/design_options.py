"""The options of one deployment design (``policyopt schedule`` and :func:`policyopt.design_deployment`), typed and
checked once: :class:`DesignOptions`.

The command line parses its options into the same fields (:meth:`DesignOptions.from_namespace`), so a Python call
and the command with the same options run the same code and give the same report.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from policyopt.app.inputs import (
    DEFAULT_MAX_AGE,
    DEFAULT_MAX_INTERVAL,
    DEFAULT_RELEASES,
    MAX_AGE_LIMIT,
    MAX_COUNT,
    MAX_DRAWS,
    MAX_HORIZON,
    MAX_LOCAL_WORKERS,
    MAX_PLOT_EPOCHS,
    MAX_STATES,
    PENALTY_CHOICES,
)
from policyopt.app.option_fields import CommandOptions
from policyopt.errors import InvalidInputError, fmt

__all__ = ["DesignOptions", "ModelOptions", "MODEL_RULES", "METHOD_CHOICES", "PRIVACY_CHOICES"]

#: ``method``: exact = problem (28) with the exact Δ(t); heuristic/cvxpy/pyomo = problem (39); all = every back end.
METHOD_CHOICES = ("exact", "heuristic", "cvxpy", "pyomo", "all")
#: ``privacy``: what the design minimises.
PRIVACY_CHOICES = ("model-based", "model-free")

#: The rules (:class:`~policyopt.app.option_fields.CommandOptions`) of the options every design on a model shares.
MODEL_RULES = {
    "data": ("text",), "chain": ("text",), "matrix": ("text",), "states": ("int", 2, MAX_STATES),
    "users": ("int", 1, MAX_COUNT), "value_range": ("range",), "max_age": ("int", 0, MAX_AGE_LIMIT),
    "max_interval": ("int", 1, MAX_AGE_LIMIT), "releases": ("int", 1, MAX_COUNT),
    "smoothing": ("float", 0.0, math.inf, False), "method": ("choice", METHOD_CHOICES), "relax": ("bool",),
    "penalty": ("choice", PENALTY_CHOICES), "phase_period": ("int", 1, MAX_AGE_LIMIT), "penalty_level": ("level",),
    "max_tv": ("text",), "horizon": ("int", 1, MAX_HORIZON), "markov_model": ("text",), "delta": ("level",),
    "privacy": ("choice", PRIVACY_CHOICES), "accept_refuted": ("text",),
}


@dataclass(frozen=True)
class ModelOptions(CommandOptions):
    """The options every design on a model shares — its source, the deployment, the penalty, the search box and the
    guarantee (rules :data:`MODEL_RULES`): the fields ``data`` … ``accept_refuted`` of :class:`DesignOptions`, which
    documents them, and of :class:`~policyopt.app.sweep.SweepOptions`."""

    RULES = MODEL_RULES

    data: str | os.PathLike | None = None
    chain: str | None = None
    matrix: str | os.PathLike | None = None
    states: int | None = None
    users: int | None = None
    value_range: tuple | None = None
    max_age: int = DEFAULT_MAX_AGE
    max_interval: int = DEFAULT_MAX_INTERVAL
    releases: int = DEFAULT_RELEASES
    smoothing: float | None = None
    method: str = "exact"
    relax: bool = False
    penalty: str | None = None
    phase_period: int | None = None
    penalty_level: float | None = None
    max_tv: str | None = None
    horizon: int | None = None
    markov_model: str | None = None
    delta: float | None = None
    privacy: str | None = None
    accept_refuted: str | None = None


@dataclass(frozen=True)
class DesignOptions(ModelOptions):
    """What one deployment design is asked: the model source, the deployment, the bound and the search box.

    Every attribute is the keyword of :func:`policyopt.design_deployment` and the ``policyopt schedule`` option of
    the same name (``max_age`` is ``--max-age``); ``None`` means that option's default, as on the command line (the
    defaults are stated in ``policyopt schedule --help`` and in the CLI reference).

    Attributes
    ----------
    data : str or os.PathLike, optional
        Long CSV ``user,time,value`` (integer slots or ISO 8601 time stamps) or Parquet with those columns.  With
        none of `data`, `chain`, `matrix`: the bundled CityLearn 2022 pilot (17 homes, hourly kWh).
    chain : str, optional
        ``two-state:p=P,q=Q`` (Zhang et al. 2024, eq. (43)).
    matrix : str or os.PathLike, optional
        CSV/NPY transition matrix, K×K or (K+1)×K with the state values first.
    states : int, optional
        Quantile states fitted to data, 2 to 200.
    users : int, optional
        Deployment size I (users whose mean is released), 1 to 10⁹.
    value_range : (float, float), optional
        Public range (LO, HI) of one reading, data units; the sensitivity of the mean is (HI − LO)/I.
    max_age, max_interval : int
        Largest aging A (0 to 10⁵, default 168) and inter-publish time S̄ (1 to 10⁵, default 168) searched, slots.
    releases : int
        Releases after which the noise-only benchmark's risk is reported (default 24).
    smoothing : float, optional
        Additive smoothing pseudo-count of the fitted chains, ≥ 0.
    method : str
        ``exact`` (problem (28), default), ``heuristic``, ``cvxpy``, ``pyomo`` (problem (39)) or ``all``.
    relax : bool
        Continuous relaxation of A and S̄ for the problem (39) back ends.
    penalty : str, optional
        ``readings-auto`` (default with data: the upper end of the bootstrap band when it reaches 0 at some age, else
        the point estimate), ``readings``, ``readings-upper`` or ``chain``.
    phase_period : int, optional
        Slots per cycle of the readings penalty (default: a day of slots when the slot length is known, else 1).
    penalty_level : float, optional
        Two-sided level of the readings penalty's bootstrap band, in (0, 1).
    max_penalty : float, optional
        Bound f̄ on the MSE of the released mean, readings' unit squared (> 0, at most 1e300).
    max_rmse : float, optional
        The same bound as a root-mean-square error R (f̄ = R²), in [1e-150, 1e150]; not with `max_penalty`.
    min_row_transitions, credible, robust, draws, seed : optional
        The posterior checks of a design on data: sparse-row threshold (≥ 1), credible level and ``robust`` band level
        (in (0, 1)), posterior draws (2 to 10⁴) and the simulation seed (≥ 0; never released noise).
    slot_length : str, optional
        Duration of one slot of `data` (e.g. ``30min``).
    max_tv : str, optional
        ``model`` (default) or ``empirical[:LEVEL]``: Δ(t) from the data's upper band.
    horizon : int, optional
        Slots the model-free guarantee covers, 1 to 10⁷.
    markov_model : str, optional
        ``chain`` (default), ``phase[:P]``, ``order:K``, ``hmm:R`` or ``auto``.
    delta : float, optional
        δ of the model-free (ε, δ) guarantee, in (0, 1).
    privacy : str, optional
        ``model-based`` (default) or ``model-free``.
    accept_refuted : str, optional
        A reason to print a refuted model's ε* anyway (never the guarantee stated first).
    backtest : float, optional
        Design on this first fraction of the readings' time range and replay the design on the rest, in (0, 1).
    plot : str or os.PathLike, optional
        Draw ε(t) and AoI(t) of the chosen schedule into this .png, .pdf or .svg file.
    plot_epochs : int, optional
        Epochs drawn by `plot`, 1 to 100.
    workers : int, optional
        Reduce a Parquet `data` set on a local Dask cluster of this many worker processes.
    scheduler : str, optional
        The same on an existing Dask cluster (its address).

    Raises
    ------
    InvalidInputError
        A value of the wrong type or out of its range (naming the keyword and showing the value); more than one of
        `data`, `chain`, `matrix`; both `max_penalty` and `max_rmse`.
    """

    COMMAND = "schedule"
    RULES = {
        **MODEL_RULES, "max_penalty": ("float", 0.0, 1e300, True), "max_rmse": ("float", 1e-150, 1e150, False),
        "min_row_transitions": ("int", 1, None), "credible": ("level",), "robust": ("level",),
        "draws": ("int", 2, MAX_DRAWS), "seed": ("int", 0, None), "slot_length": ("text",), "backtest": ("level",),
        "plot": ("text",), "plot_epochs": ("int", 1, MAX_PLOT_EPOCHS), "workers": ("int", 1, MAX_LOCAL_WORKERS),
        "scheduler": ("text",),
    }

    max_penalty: float | None = None
    max_rmse: float | None = None
    min_row_transitions: int | None = None
    credible: float | None = None
    robust: float | None = None
    draws: int | None = None
    seed: int | None = None
    slot_length: str | None = None
    backtest: float | None = None
    plot: str | os.PathLike | None = None
    plot_epochs: int | None = None
    workers: int | None = None
    scheduler: str | None = None

    def __post_init__(self):
        super().__post_init__()
        given = [n for n in ("data", "chain", "matrix") if getattr(self, n) is not None]
        if len(given) > 1:
            raise InvalidInputError(f"give one model source, not {' and '.join(f'`{n}`' for n in given)}")
        if self.max_penalty is not None and self.max_rmse is not None:
            raise InvalidInputError(f"give `max_penalty` ({fmt(self.max_penalty)}) or `max_rmse` ({fmt(self.max_rmse)}), "
                                    "not both")
        if self.method is None:
            raise InvalidInputError("`method` must be one of " + ", ".join(METHOD_CHOICES) + ", got None")
        if not isinstance(self.relax, bool):
            raise InvalidInputError(f"`relax` must be True or False, got {fmt(self.relax)}")

