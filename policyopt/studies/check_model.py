"""Check a Markov model of the readings against the data: ``policyopt check-model`` and :func:`check_model`.

Every age-dependent risk policyopt prints rests on Δ(t), eq. (12) of M. Zhang, E. Wei, R. Berry, J. Huang,
"Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, and on its Theorem 3, which composes the
releases with Δ(t) only "if the process {X_t} is Markovian".  For data the model is one first-order chain per user
over quantile states (:func:`~policyopt.models.estimation.fit_population`), or with ``markov_model`` another Markov
model whose state Z_t carries what the readings remember (:mod:`policyopt.models.markov_model`: ``phase[:P]``,
``order:K``, ``hmm:R``; ``auto`` tries them from the simplest).  This study makes two tests of the model and puts
three curves side by side, lag by lag:

* the model's Δ(t) (for the chains matrix powers, :meth:`~policyopt.models.markov.Population.max_tv`; for an
  augmented model Δ_Z of its Z chain, :meth:`~policyopt.models.markov_model.FittedMarkovModel.max_tv`);
* Δ̂(t) estimated directly from the readings with its simultaneous confidence band
  (:func:`~policyopt.models.empirical.estimate_max_tv`: lagged-pair counts, non-overlapping block bootstrap);
* the distribution of the *same statistic* Δ̂(t) on data sets simulated from the fitted model (same users, same
  lengths, same missing slots, same `min_pairs` rule; :func:`~policyopt.models.empirical.chain_statistic_draws` for
  the chains, :func:`model_statistic_draws` for the others).

**Δ(t) check.**  Per lag, a Monte Carlo p-value (A. C. Davison, D. V. Hinkley, "Bootstrap Methods and their
Application", Cambridge, 1997, Sec. 4.2.5): p(t) = (1 + #{draws with Δ̂_sim(t) ≥ Δ̂(t)}) / (R + 1).  These per-lag
p-values and verdicts are *pointwise* and descriptive: on data that do follow the model about a share 1 − level of
the lags is beyond the level by chance, so "some lag refuted" would refute a true model almost always.  The verdict
is family-wise over the lags: single-step max-T on the lag-wise standardised statistic (P. H. Westfall, S. S. Young,
"Resampling-Based Multiple Testing", Wiley, 1993; :func:`policyopt.models.markov_test.family_wise_p` with
``transform="z"``), refuted when its p ≤ 1 − level.  The plug-in bias of Δ̂ near 0 is in the simulated statistic
too, so it cannot produce a refutation by itself.

**Markov test.**  As every design on data checks its model (:mod:`policyopt.studies.markov_check`): the model is
fitted on the first part of each series and the G² statistic of "the next state is independent of the state ℓ slots
back given the model's context" (T. W. Anderson, L. A. Goodman, Ann. Math. Statist. 28(1), 1957) is computed on the
rest at lags ℓ = 1..L, against the same statistic on data sets simulated from the model's posterior predictive,
family-wise over the lags by max-T / min-p (:func:`policyopt.models.markov_test.markov_test_from_parts`).  L is at
least a week of slots by default (:func:`policyopt.models.markov_test.default_markov_lags`); the held-out fraction is
``holdout`` when given, else the design check's :data:`policyopt.studies.markov_check.DEFAULT_HOLDOUT`.

**Verdict.**  The model is refuted when either family-wise test refutes it at the level; each refutes a true model
in a share ≈ 1 − level of data sets, both together in at most 2(1 − level) (Bonferroni).  With ``holdout=F`` the
model (and the quantile edges) is fitted on the first 1 − F of each user's span and the Δ(t) check is computed on the
rest; without it the Δ(t) check uses the slots the model was fitted to (the Markov test is always held out).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.formatting import json_clean, lag_ranges
from policyopt.models.estimation import readings_states, readings_states_starts  # re-exported: home is the models layer
from policyopt.models.empirical import (
    DEFAULT_MIN_PAIRS,
    DEFAULT_N_BOOT,
    EmpiricalMaxTV,
    chain_statistic_draws,
    default_max_lag,
    estimate_max_tv,
    user_streams,
)
from policyopt.studies.check_model_text import format_check

__all__ = ["ModelCheckReport", "check_model", "check_fitted", "quick_check", "check_from_maxima", "check_from_part",
           "with_markov_test", "model_statistic_draws", "quick_max_lag", "data_states", "plot_check", "readings_states",
           "DEFAULT_DRAWS", "BUNDLED_STATES",
           "BUNDLED_VALUE_RANGE", "BUNDLED_SLOT_SECONDS"]

#: Data sets simulated from the fitted chains for the test (p-values in steps of 1/(R + 1) = 0.01).
DEFAULT_DRAWS = 99
#: States and public value range of the bundled pilot (as ``policyopt schedule`` uses them).
BUNDLED_STATES = 3
BUNDLED_VALUE_RANGE = (0.0, 48.0)
#: Slot length of the bundled pilot (hourly readings), seconds: a day is 24 slots, a week 168.
BUNDLED_SLOT_SECONDS = 3600


@dataclass(frozen=True)
class ModelCheckReport:
    """What ``policyopt check-model`` prints: the model's Δ(t) vs the direct estimate lag by lag, the family-wise
    Δ(t) check, the held-out Markov test and the verdict of both.

    Attributes
    ----------
    empirical : EmpiricalMaxTV
        Direct estimate and band (on the held-out part with `holdout`).
    model_max_tv : numpy.ndarray, shape (L,)
        Δ(t) of the fitted model (max over users), t = 1..L: the chains' Δ(t), or Δ_Z of an augmented model.
    draws : numpy.ndarray, shape (R, L)
        The statistic on R data sets simulated from the fitted model.
    p_values : numpy.ndarray, shape (L,)
        Pointwise Monte Carlo p-values (1 + #{draws ≥ Δ̂}) / (R + 1) (descriptive: each lag on its own).
    info : dict
        ``source``, ``states``, ``users``, ``slots``, ``holdout``, ``fit_slots``, ``excluded_users``,
        ``value_range``, ``smoothing``, ``seed``.
    wall_time_s : float
        Seconds from readings to report.
    markov : dict or None
        The held-out Markov test (:meth:`policyopt.models.markov_test.MarkovTestResult.to_dict` plus ``holdout``,
        ``fit_slots``, ``test_slots``, ``users``); ``None`` when it was not run (the cheap checks of
        :func:`quick_check`), and then the verdict is the Δ(t) check's alone.
    model : str
        Canonical name of the model checked (``chain``, ``phase:24``, ``order:2``, ``hmm:2``).
    model_description : str or None
        What its state Z is (``None``: the first-order chains).
    n_parameters : int or None
        Free parameters of one user's model.
    requested : str
        What was asked for: a model or ``auto``.
    models : tuple of dict
        With ``auto``, every model tried in order (:meth:`entry` of each); empty otherwise.
    """

    empirical: EmpiricalMaxTV
    model_max_tv: np.ndarray
    draws: np.ndarray
    p_values: np.ndarray
    info: dict = field(default_factory=dict)
    wall_time_s: float = 0.0
    markov: dict | None = None
    model: str = "chain"
    model_description: str | None = None
    n_parameters: int | None = None
    requested: str = "chain"
    models: tuple = ()

    @property
    def level(self) -> float:
        """Level of the band and of both tests."""
        return self.empirical.level

    @property
    def refuted(self) -> np.ndarray:
        """Boolean (L,): the lag's pointwise p(t) ≤ 1 − level (descriptive; the verdict is :attr:`model_refuted`)."""
        return self.p_values <= 1.0 - self.level + 1e-12

    @property
    def refuted_lags(self) -> list:
        """Lags (slots) where the model is pointwise refuted (descriptive)."""
        return [int(t) for t in self.empirical.lags[self.refuted]]

    @property
    def model_critical(self) -> np.ndarray:
        """Per lag, the ⌈level·R⌉-th smallest simulated statistic: Δ̂ above it is unlikely under the model."""
        R = self.draws.shape[0]
        return np.sort(self.draws, axis=0)[max(0, math.ceil(self.level * R) - 1)]

    @cached_property
    def max_tv_family(self):
        """:class:`~policyopt.models.markov_test.FamilyWiseP` of the Δ(t) check: single-step max-T over the lags on
        the lag-wise standardised statistic (Westfall & Young 1993), the data against the R simulated sets."""
        from policyopt.models.markov_test import family_wise_p

        return family_wise_p(self.empirical.estimate, self.draws, transform="z")

    @property
    def max_tv_check(self) -> dict:
        """The family-wise Δ(t) check (JSON ``max_tv_check``): ``method``, ``level``, ``max_lag``, ``p_value``,
        ``worst_lag`` (the lag of the largest standardised excess), ``estimate`` and ``critical`` there (Δ̂ on the
        data vs the ⌈level·R⌉-th smallest simulated Δ̂), ``refuted``, ``transform``."""
        fw = self.max_tv_family
        e = self.empirical
        crit = self.model_critical
        worst = int(fw.worst) if fw.worst is not None else int(np.argmax(e.estimate - crit))
        R = int(self.draws.shape[0])
        where = ("on the held-out part" if self.info.get("holdout") else
                 "on the slots the model was fitted to")
        return {
            "method": (f"Δ̂(t) of eq. (12) {where} (max over users, rows with ≥ {e.min_pairs} pairs) against the same "
                       f"statistic on {R} data sets simulated from the fitted {_fitted_noun(self.model)}; family-wise over lags "
                       f"1..{e.max_lag} by single-step max-T on the lag-wise standardised statistic (Westfall & Young "
                       f"1993): Monte Carlo p-value (1 + #sets with max ≥ observed)/({R} + 1)"),
            "level": float(self.level),
            "max_lag": int(e.max_lag),
            "p_value": float(fw.p_value),
            "worst_lag": worst + 1,
            "estimate": float(e.estimate[worst]),
            "critical": float(crit[worst]),
            "refuted": bool(fw.p_value <= 1.0 - self.level + 1e-12),
            "transform": "z",
        }

    @property
    def model_refuted(self) -> bool:
        """The verdict: the family-wise Δ(t) check or the held-out Markov test refutes the model at the level."""
        return bool(self.max_tv_check["refuted"] or (self.markov is not None and self.markov["refuted"]))

    @property
    def passed(self) -> bool:
        """Neither family-wise test refutes the model (``not model_refuted``)."""
        return not self.model_refuted

    def entry(self) -> dict:
        """This model's check as one item of ``models`` (the shape of
        :func:`policyopt.studies.markov_check.model_check_line`'s items): ``model``, ``description``,
        ``n_parameters``, ``verdict``, ``passed``, ``markov_test``, ``max_tv_check`` and the Markov test's
        ``holdout``, ``fit_slots``, ``test_slots``, ``users``, ``draws``, ``seed``."""
        mk = self.markov or {}
        return {
            "model": self.model, "description": self.description, "n_parameters": self.n_parameters,
            "verdict": "passed" if self.passed else "refuted", "passed": self.passed,
            "markov_test": self.markov, "max_tv_check": self.max_tv_check,
            "holdout": mk.get("holdout"), "fit_slots": mk.get("fit_slots"), "test_slots": mk.get("test_slots"),
            "users": mk.get("users", self.info.get("users")), "draws": mk.get("draws"), "seed": self.info.get("seed"),
        }

    @property
    def description(self) -> str:
        """What the model's state Z is."""
        if self.model_description:
            return self.model_description
        return f"Z_t = X_t: first-order chain on the {self.info.get('states')} quantile states"

    def summary(self) -> dict:
        """The compact pointwise check other reports embed (``model_check`` of ``publish``, ``tpl``, ``sweep``): lags
        pointwise beyond the level, the worst excess (``refuted`` here is "some lag pointwise refuted")."""
        ref = self.refuted
        excess = np.where(ref, self.empirical.estimate - self.model_critical, -np.inf)
        worst = int(np.argmax(excess)) if ref.any() else None
        return {
            "refuted": bool(ref.any()),
            "level": self.level,
            "states": self.info.get("states"),
            "max_lag": self.empirical.max_lag,
            "refuted_lags": self.refuted_lags,
            "refuted_lag_ranges": lag_ranges(self.refuted_lags),
            "refuted_count": int(ref.sum()),
            "draws": int(self.draws.shape[0]),
            "worst_lag": None if worst is None else worst + 1,
            "worst_empirical_max_tv": None if worst is None else float(self.empirical.estimate[worst]),
            "worst_model_max_tv": None if worst is None else float(self.model_max_tv[worst]),
            "worst_model_critical": None if worst is None else float(self.model_critical[worst]),
        }

    def to_dict(self) -> dict:
        """The JSON object of ``policyopt check-model --json`` (field names are a public interface)."""
        e = self.empirical
        crit = self.model_critical
        ref = self.refuted
        lags = [
            {
                "lag": int(t),
                "model_max_tv": float(self.model_max_tv[i]),
                "empirical_max_tv": float(e.estimate[i]),
                "empirical_lower": float(e.lower[i]),
                "empirical_upper": float(e.upper[i]),
                "model_critical": float(crit[i]),
                "p_value": float(self.p_values[i]),
                "users_without_claim": int(e.users_without_claim[i]),
                "refuted": bool(ref[i]),
            }
            for i, t in enumerate(e.lags)
        ]
        mv = self.max_tv_check
        models = [dict(m) for m in self.models] if self.models else [self.entry()]
        if self.requested == "auto":
            chosen = next((m["model"] for m in models if m["passed"]), None)
        else:
            chosen = self.model
        out = {
            "level": self.level,
            "markov_model": self.requested,
            "model": self.model,
            "model_description": self.description,
            "states": self.info.get("states"),
            "users": self.info.get("users"),
            "max_lag": e.max_lag,
            "min_pairs": e.min_pairs,
            "draws": int(self.draws.shape[0]),
            "holdout": self.info.get("holdout"),
            "source": self.info.get("source"),
            "slots": self.info.get("slots"),
            "fit_slots": self.info.get("fit_slots"),
            "value_range": self.info.get("value_range"),
            "smoothing": self.info.get("smoothing"),
            "seed": self.info.get("seed"),
            "slot_seconds": self.info.get("slot_seconds"),
            "excluded_users": self.info.get("excluded_users", {}),
            "estimate_method": e.method,
            "test_method": (
                f"parametric bootstrap: {self.draws.shape[0]} data sets simulated from the fitted {_fitted_noun(self.model)} (same "
                "users, lengths, missing slots), the same statistic; the verdict is family-wise over the lags "
                "(max_tv_check); per lag, the Monte Carlo p-value (1 + #draws ≥ estimate)/(draws + 1) and whether it is "
                f"≤ {1 - self.level:.4g} are pointwise and descriptive (each lag on its own)"
            ),
            "refuted": self.model_refuted,
            "passed": self.passed,
            "markov_test": self.markov,
            "max_tv_check": mv,
            "chosen": chosen,
            "models": models,
            "refuted_lags": self.refuted_lags,
            "summary": self.summary(),
            "lags": lags,
            "wall_time_s": self.wall_time_s,
        }
        return json_clean(out)

    def __str__(self) -> str:
        """The text ``policyopt check-model`` prints (:func:`~policyopt.studies.check_model_text.format_check`)."""
        return format_check(self.to_dict())


def _fitted_noun(model: str) -> str:
    """``first-order chains`` or ``order:2 model``: what the simulated data sets come from."""
    return "first-order chains" if model == "chain" else f"{model} model"


def _check_fraction(holdout):
    if holdout is None:
        return None
    if isinstance(holdout, bool) or not isinstance(holdout, (int, float, np.floating)) or not (0.0 < float(holdout) < 1.0):
        raise InvalidInputError(f"`holdout` must be a fraction strictly between 0 and 1, got {fmt(holdout)}")
    return float(holdout)


def check_markov_spec(markov_model, default_period: int | None) -> str:
    """``auto`` or the canonical name of one model (``phase`` resolved to ``phase:P`` with the day of slots).

    Raises
    ------
    InvalidInputError
        An unknown model or bad parameter (the message of
        :meth:`~policyopt.models.markov_model.MarkovModelSpec.parse`); ``phase`` without P when the slot length is
        unknown.
    """
    from policyopt.models.markov_model import MarkovModelSpec

    sp = MarkovModelSpec.parse(markov_model, default_period=default_period)
    return str(sp)


def _context_order(name: str) -> int:
    """k of an ``order:k`` model (lags below it are inside the Markov test's context), else 1."""
    kind, _, param = name.partition(":")
    return int(param) if kind == "order" else 1


def model_statistic_draws(model, observed_states, n_states: int, max_lag: int, *, starts=None,
                          min_pairs: int = DEFAULT_MIN_PAIRS, draws: int = DEFAULT_DRAWS, rng) -> np.ndarray:
    """The statistic Δ̂(t) = max_u Δ̂_u(t) on series simulated from a fitted Markov model (parametric bootstrap).

    :func:`~policyopt.models.empirical.chain_statistic_draws` for any
    :class:`~policyopt.models.markov_model.FittedMarkovModel`: each user's model is started in the user's first
    observed state (the hidden part of Z from its stationary law given it) and run for the user's span with its
    :meth:`~policyopt.models.markov_model.FittedMarkovModel.simulate`; the slots missing in the observed series are
    masked in the simulated one, so the statistic sees the same pattern of pairs.

    Parameters
    ----------
    model : policyopt.models.markov_model.FittedMarkovModel
        One model per row of `observed_states`, in that order.
    observed_states : array_like, shape (U, T)
        States 0..K−1, −1 missing (:func:`~policyopt.models.empirical.states_matrix`).
    n_states : int
        K.
    max_lag : int
        L < T (slots).
    starts : array_like of int, shape (U,), optional
        Absolute slot of column 0 per row (the phase of a phase model).
    min_pairs : int
        Pairs a row needs to be claimed.
    draws : int
        Simulated data sets R ≥ 1.
    rng : numpy.random.Generator or sequence of U numpy.random.Generator
        Simulation randomness (seeded, e.g. :func:`~policyopt.models.empirical.user_streams`), never released noise.

    Returns
    -------
    numpy.ndarray, shape (R, L)

    Raises
    ------
    InvalidInputError
        Bad states, `max_lag`, `draws`, `min_pairs`; a model of another number of users.
    """
    from policyopt.models.empirical import max_tv_statistic, states_matrix

    x = states_matrix(observed_states, n_states)
    U, T = x.shape
    K = int(n_states)
    check_int(draws, "draws", 1)
    if model.n_users != U:
        raise InvalidInputError(f"`model` has {model.n_users} users; `observed_states` has {U} rows")
    R = int(draws)
    present = x >= 0
    first = np.array([int(r[r >= 0][0]) if np.any(r >= 0) else 0 for r in x], dtype=np.int64)
    lengths = np.array([int(np.flatnonzero(r >= 0)[-1]) + 1 if np.any(r >= 0) else 1 for r in x], dtype=np.int64)
    L = int(max_lag)
    out = np.zeros((R, L))
    per_draw = U * T * 8 * 3 + U * L * (K + 1) * 8  # batches of draws below 256 MiB, as chain_statistic_draws
    rb = max(1, int((256 * 2**20) // max(1, per_draw)))
    for r0 in range(0, R, rb):
        nb = min(rb, R - r0)
        sim = model.simulate(lengths, nb, rng, starts=starts, initial=first)
        sim[:, ~present[:, : sim.shape[2]]] = -1  # the observed missing slots
        if sim.shape[2] < T:
            sim = np.concatenate([sim, np.full((nb, U, T - sim.shape[2]), -1, dtype=sim.dtype)], axis=2)
        per_user = max_tv_statistic(sim.reshape(nb * U, -1), K, L, min_pairs=min_pairs)
        out[r0 : r0 + nb] = per_user.reshape(nb, U, L).max(axis=1)
    return out


def with_markov_test(report: ModelCheckReport, check, *, requested: str | None = None) -> ModelCheckReport:
    """`report` with the held-out Markov test of `check` attached (the report's verdict then needs both tests).

    Parameters
    ----------
    report : ModelCheckReport
        The Δ(t) table of the same model.
    check : policyopt.studies.markov_check.MarkovModelCheck
        The held-out check of that model (:func:`~policyopt.studies.markov_check.check_markov_model`, or its
        map-reduce :func:`~policyopt.studies.distributed_heldout.held_out_check_partitions`); only its Markov test is
        used.
    requested : str, optional
        What was asked for (default the model's name).

    Returns
    -------
    ModelCheckReport

    Raises
    ------
    InvalidInputError
        If `check` is of another model than `report`.
    """
    if check.model != report.model:
        raise InvalidInputError(f"`check` is of the model {check.model!r}; `report` of {report.model!r}")
    mt = dict(check.markov_test)
    mt.update({"holdout": check.info.get("holdout"), "fit_slots": check.info.get("fit_slots"),
               "test_slots": check.info.get("test_slots"), "users": check.info.get("users")})
    return replace(report, markov=mt, model_description=check.description, n_parameters=int(check.n_parameters),
                   requested=requested or report.requested)


def check_model(
    data=None,
    *,
    n_states: int | None = None,
    value_range=None,
    max_lag: int | None = None,
    level: float = 0.95,
    holdout: float | None = None,
    min_pairs: int = DEFAULT_MIN_PAIRS,
    draws: int = DEFAULT_DRAWS,
    n_boot: int = DEFAULT_N_BOOT,
    smoothing: float = 0.01,
    seed: int = 0,
    source: str | None = None,
    markov_model: str = "chain",
    markov_lags: int | None = None,
    slot_seconds: int | None = None,
) -> ModelCheckReport:
    """Check a Markov model of the readings: Δ(t) lag by lag (family-wise) and a held-out Markov test.

    See the module docstring for the two tests and the verdict.

    Parameters
    ----------
    data : pandas.DataFrame, optional
        Long table with columns user, time (integer slots), value.  Default: the bundled CityLearn pilot
        (17 homes, hourly kWh), with 3 states and the public range 0:48 kWh unless given.
    n_states : int, optional
        Quantile states K (default 3 for the bundled pilot, 12 otherwise).
    value_range : (float, float), optional
        Public range (LO, HI): readings are clipped into it before anything is estimated.
    max_lag : int, optional
        L (slots) of the Δ(t) table.  Default :func:`~policyopt.models.empirical.default_max_lag` of the estimation
        series.  When given it is also the Markov test's last lag (unless `markov_lags` is given).
    level : float
        Level in (0, 1) of the band and of both tests.
    holdout : float, optional
        Fraction F in (0, 1): fit on the first 1 − F of each user's span, estimate and test on the rest.  The Markov
        test is held out in any case: on F, else on :data:`~policyopt.studies.markov_check.DEFAULT_HOLDOUT`.
    min_pairs : int
        Pairs a row needs to be claimed (:func:`~policyopt.models.empirical.estimate_max_tv`).
    draws : int
        Data sets R ≥ 1 simulated from the model for each test.
    n_boot : int
        Block-bootstrap replicates of the band (≥ 20).
    smoothing : float
        Pseudo-count of the model's estimate (:func:`~policyopt.models.estimation.fit_population`,
        :func:`~policyopt.models.markov_model.fit_markov_model`).
    seed : int
        Seed of the resampling and the simulation (never released noise).
    source : str, optional
        How to name the data in the report.
    markov_model : str
        ``chain`` (the first-order chains, default), ``phase[:P]``, ``order:K``, ``hmm:R`` or ``auto`` (the models of
        :func:`~policyopt.studies.markov_check.auto_candidates` from the simplest, until one passes both tests; the
        report shows that one, or the last tried, and lists every model tried).
    markov_lags : int, optional
        L of the Markov test (slots).  Default `max_lag` when given, else
        :func:`~policyopt.models.markov_test.default_markov_lags`: a week of slots (168 when the slot length is
        unknown), at most the held-out length − 2; at least the order of an ``order:K`` model.
    slot_seconds : int, optional
        Slot length (seconds; 3600 for the bundled pilot): the day (``phase`` without P) and the week (lags, ``auto``'s
        weekly phase chain) in slots.

    Returns
    -------
    ModelCheckReport

    Raises
    ------
    InvalidInputError
        Bad readings or any bad argument (named, with its value); a holdout part too short for L; an unknown
        `markov_model`, or ``phase`` without P when the slot length is unknown.

    See Also
    --------
    policyopt.studies.distributed_checks.check_model_partitions : the same check of a partitioned Parquet data set
        on Dask (``policyopt check-model --workers N``), with the same numbers.

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (12) and
    Theorem 3; Anderson & Goodman (1957); Westfall & Young (1993); Davison & Hinkley (1997), Sec. 4.2.5.
    """
    from policyopt.errors import check_value_range
    from policyopt.models.estimation import fit_population, validate_readings
    from policyopt.models.markov_test import default_markov_lags
    from policyopt.studies.markov_check import DEFAULT_HOLDOUT, auto_candidates, periods_from_slot, split_states

    start = time.perf_counter()
    bundled = data is None
    if bundled:
        from policyopt.data import load_citylearn

        data = load_citylearn()
        source = source or "bundled CityLearn 2022 pilot, 17 homes, hourly kWh"
        n_states = BUNDLED_STATES if n_states is None else n_states
        value_range = BUNDLED_VALUE_RANGE if value_range is None else value_range
        slot_seconds = BUNDLED_SLOT_SECONDS if slot_seconds is None else slot_seconds
    source = source or "readings given in Python"
    n_states = 12 if n_states is None else n_states
    frac = _check_fraction(holdout)
    if slot_seconds is not None and (isinstance(slot_seconds, bool) or not isinstance(slot_seconds, (int, np.integer))
                                     or slot_seconds < 1):
        raise InvalidInputError(f"`slot_seconds` must be an integer ≥ 1 (seconds), got {fmt(slot_seconds)}")
    if markov_lags is not None and (isinstance(markov_lags, bool) or not isinstance(markov_lags, (int, np.integer))
                                    or markov_lags < 1):
        raise InvalidInputError(f"`markov_lags` must be an integer ≥ 1 (slots), got {fmt(markov_lags)}")
    day, week = periods_from_slot(slot_seconds)
    spec = check_markov_spec(markov_model, day)
    df = validate_readings(data, source="`data`")
    if value_range is not None:
        lo, hi = check_value_range(value_range)
        df["value"] = np.clip(df["value"].to_numpy(), lo, hi)
        value_range = (lo, hi)
    if frac is not None:
        t0 = df.groupby("user")["time"].transform("min")
        span = df.groupby("user")["time"].transform("max") - t0 + 1
        cut = t0 + np.ceil((1.0 - frac) * span).astype(np.int64)
        train, test = df[df["time"] < cut], df[df["time"] >= cut]
        if test.empty:
            raise InvalidInputError(f"`holdout`={frac} leaves no readings to test on")
    else:
        train = test = df
    fitted = fit_population(train, n_states, smoothing=smoothing, source="`data`", value_range=value_range)
    present = set(test["user"].unique())  # once: the set of every reading's user per kept user cost O(users × readings)
    users = [u for u in fitted.users if u in present]
    if not users:
        raise InvalidInputError("no user kept by the fit has readings in the held-out part")
    states = readings_states(test, fitted.quantizer, users)
    info = {
        "source": source,
        "holdout": frac,
        "fit_slots": int(readings_states(train, fitted.quantizer, users).shape[1]) if frac is not None else int(states.shape[1]),
        "value_range": None if value_range is None else list(value_range),
        "smoothing": float(smoothing),
        "slot_seconds": None if slot_seconds is None else int(slot_seconds),
    }
    chains = check_fitted(fitted, states, users, max_lag=max_lag, level=level, min_pairs=min_pairs, draws=draws,
                          n_boot=n_boot, seed=seed, info=info, start=start)
    # the Markov test, as every design on data checks its model: fitted on the first part of each series, tested on
    # the rest (the held-out fraction of the Δ(t) table when there is one: the same cut, the same two parts)
    mdata = split_states(df, fitted.quantizer, users, holdout=DEFAULT_HOLDOUT if frac is None else frac)
    if markov_lags is None:
        markov_lags = int(max_lag) if max_lag is not None else default_markov_lags(week, 0, int(mdata.test.shape[1]))
    names = auto_candidates(day, week) if spec == "auto" else (spec,)
    tried = []
    for name in names:
        rep = chains if name == "chain" else _model_table(name, chains, train, test, fitted, users, smoothing=smoothing,
                                                          seed=seed, default_period=day)
        rep = with_markov_test(rep, _markov_check(name, mdata, markov_lags, level=level, draws=draws, seed=seed,
                                                  smoothing=smoothing, min_pairs=min_pairs, default_period=day),
                               requested=spec)
        tried.append(rep)
        if rep.passed:
            break
    out = next((r for r in tried if r.passed), tried[-1])
    if spec == "auto":
        out = replace(out, models=tuple(r.entry() for r in tried))
    return replace(out, wall_time_s=time.perf_counter() - start)


def _markov_check(name: str, mdata, markov_lags: int, **options):
    """The held-out check of one model (:func:`~policyopt.studies.markov_check.check_markov_model`) for its Markov
    test: lags 1..`markov_lags` (at least the model's order), its own Δ(t) part at lag 1 only (unused here)."""
    from policyopt.studies.markov_check import check_markov_model

    return check_markov_model(name, mdata, markov_lags=max(int(markov_lags), _context_order(name)), max_tv_lags=1,
                              **options)


def _model_table(name: str, chains: ModelCheckReport, train, test, fitted, users, *, smoothing: float, seed: int,
                 default_period: int | None) -> ModelCheckReport:
    """The Δ(t) table of an augmented model: `name` fitted on `train` (the chains' fitting part), its Δ_Z, and Δ̂ on
    data sets simulated from it over `test`; the direct estimate and its band are the chains' report's (`chains`)."""
    from policyopt.models.markov_model import fit_markov_model

    K = fitted.quantizer.n_states
    tr, tr0 = readings_states_starts(train, fitted.quantizer, users)
    te, te0 = readings_states_starts(test, fitted.quantizer, users)
    model = fit_markov_model(name, tr, K, users=tuple(users), starts=tr0, smoothing=smoothing, seed=seed,
                             default_period=default_period)
    emp = chains.empirical
    sims = model_statistic_draws(model, te, K, emp.max_lag, starts=te0, min_pairs=emp.min_pairs,
                                 draws=int(chains.draws.shape[0]), rng=user_streams(users, int(seed)))
    return replace(chains, model_max_tv=np.asarray(model.max_tv(emp.lags), dtype=float), draws=sims,
                   p_values=_p_values(sims, emp.estimate), model=model.name, model_description=model.description,
                   n_parameters=int(model.n_parameters))


def data_states(readings, fitted) -> tuple[np.ndarray, list]:
    """States of the fitted users' readings (clipped to the fit's value range), for :func:`check_fitted`.

    Returns
    -------
    (states, users) : numpy.ndarray of int64 (U, T) and list of str
        The fit's kept users that have readings in `readings`, in the fit's order (a user whose readings all lie
        elsewhere, e.g. a meter that stops before a held-out part, is left out; callers say so).

    Raises
    ------
    InvalidInputError
        No kept user of the fit has a reading in `readings`.
    """
    from policyopt.models.estimation import validate_readings

    df = validate_readings(readings, source="`readings`")
    if fitted.value_range is not None:
        df["value"] = np.clip(df["value"].to_numpy(), *fitted.value_range)
    present = set(df["user"].unique())
    users = [u for u in fitted.users if u in present]
    if not users:
        raise InvalidInputError("no user kept by the fit has readings here: the readings and the fit share no user")
    return readings_states(df, fitted.quantizer, users), users


#: Simulated data sets of the model check every data run of ``schedule`` / ``sweep`` prints: with 19 the smallest Monte
#: Carlo p-value is 0.05, enough for a verdict at level 0.95; the verdict needs no band, so none is computed
#: (``policyopt check-model`` runs the full check).
QUICK_DRAWS = 19


def quick_check(fitted, readings, A_max: int, S_max: int, *, seed: int = 0) -> dict:
    """The cheap model check of a design run on data: :meth:`ModelCheckReport.summary` at lags 1..A_max + S_max − 1.

    Parameters
    ----------
    fitted : policyopt.models.estimation.FittedModel
        The chains the design uses.
    readings : pandas.DataFrame
        The readings they were fitted to.
    A_max, S_max : int
        The search box (slots): Theorem 3 uses Δ at ages up to A_max + S_max − 1.
    seed : int
        Seed of the simulation.

    Returns
    -------
    dict
        The summary (``refuted``, ``refuted_lags``, ``worst_lag``, …), :data:`QUICK_DRAWS` simulated data sets, no band.
    """
    states, users = data_states(readings, fitted)
    check = check_fitted(fitted, states, users, max_lag=quick_max_lag(A_max, S_max, states.shape[1]), draws=QUICK_DRAWS,
                         n_boot=0, seed=seed)
    return check.summary()


def _p_values(sims: np.ndarray, estimate: np.ndarray) -> np.ndarray:
    """Monte Carlo p-values (1 + #{draws ≥ Δ̂}) / (R + 1) per lag (Davison & Hinkley 1997, Sec. 4.2.5)."""
    return (1.0 + np.sum(sims >= estimate[None, :] - 1e-12, axis=0)) / (sims.shape[0] + 1.0)


def quick_max_lag(A_max: int, S_max: int, slots: int) -> int:
    """Lags of :func:`quick_check`: A_max + S_max − 1 (at least 1), below the longest series of `slots` slots."""
    return min(max(int(A_max) + int(S_max) - 1, 1), int(slots) - 1)


def check_from_maxima(estimate, model_max_tv, draws, *, users_without_claim=None, level: float = 0.95,
                      min_pairs: int = DEFAULT_MIN_PAIRS, info: dict | None = None, start: float | None = None) -> ModelCheckReport:
    """The point-estimate check (no band) from statistics already reduced over users, e.g. per partition on Dask.

    Every input is a maximum over users (Δ̂(t), the chains' Δ(t) of eq. (12), and each simulated data set's
    Δ̂(t) when each user is simulated from its own stream, :func:`~policyopt.models.empirical.user_streams`),
    so maxima over groups of users combine by a maximum; the test is then that of :func:`check_fitted`.

    Parameters
    ----------
    estimate, model_max_tv : array_like, shape (L,)
        Δ̂(t) and the chains' Δ(t), t = 1..L.
    draws : array_like, shape (R, L)
        The statistic on R simulated data sets.
    users_without_claim : array_like of int, shape (L,), optional
        Users with an unclaimed row per lag (summed over groups).
    level, min_pairs
        As :func:`check_model`.
    info : dict, optional
        Report facts (``states``, ``users``, ``slots``, ``seed``, ...).
    start : float, optional
        ``time.perf_counter()`` at the start of the caller's work.

    Returns
    -------
    ModelCheckReport
        Its ``empirical`` has the point estimate and the no-claim band [0, 1] (no per-user arrays).
    """
    start = time.perf_counter() if start is None else start
    est = np.asarray(estimate, dtype=float)
    L = est.size
    sims = np.asarray(draws, dtype=float).reshape(-1, L)
    no_claim = np.zeros(L, dtype=np.int64) if users_without_claim is None else np.asarray(users_without_claim, dtype=np.int64)
    emp = EmpiricalMaxTV(
        lags=np.arange(1, L + 1, dtype=np.int64), estimate=est, lower=np.zeros(L), upper=np.ones(L),
        per_user=np.zeros((0, L)), level=float(level),
        method=f"point estimate only (no bootstrap band: the band is [0, 1], no claim); rows with < {min_pairs} pairs "
        "make no claim", min_pairs=int(min_pairs), users_without_claim=no_claim,
    )
    p = _p_values(sims, est)
    return ModelCheckReport(empirical=emp, model_max_tv=np.asarray(model_max_tv, dtype=float), draws=sims, p_values=p,
                            info=dict(info or {}), wall_time_s=time.perf_counter() - start)


def check_from_part(part, model_max_tv, draws, *, level: float = 0.95, info: dict | None = None,
                    start: float | None = None) -> ModelCheckReport:
    """The full check (with the band when `part` has replicates) from statistics reduced over groups of users.

    Parameters
    ----------
    part : policyopt.models.empirical.MaxTVPart
        The map step of the direct estimate merged over all groups (:meth:`~policyopt.models.empirical.MaxTVPart.merge`).
    model_max_tv : array_like, shape (L,)
        The chains' Δ(t) (eq. (12)), max over users.
    draws : array_like, shape (R, L)
        The statistic on R data sets simulated from the chains, each user from its own stream (max over users).
    level : float
        Level of the band and of each lag's test.
    info : dict, optional
        Report facts (``source``, ``states``, ``users``, ``slots``, ``seed``, ...).
    start : float, optional
        ``time.perf_counter()`` at the start of the caller's work.

    Returns
    -------
    ModelCheckReport
        Its ``empirical`` is :func:`~policyopt.models.empirical.max_tv_band` of `part` (no per-user arrays when the
        part was merged).

    Raises
    ------
    InvalidInputError
        Bad `level`; no user with a series longer than L (with a band).
    """
    from policyopt.models.empirical import max_tv_band

    start = time.perf_counter() if start is None else start
    emp = max_tv_band(part, level)
    sims = np.asarray(draws, dtype=float).reshape(-1, emp.lags.size)
    p = _p_values(sims, emp.estimate)
    return ModelCheckReport(empirical=emp, model_max_tv=np.asarray(model_max_tv, dtype=float), draws=sims, p_values=p,
                            info=dict(info or {}), wall_time_s=time.perf_counter() - start)


def check_fitted(fitted, states, users, *, max_lag: int | None = None, level: float = 0.95,
                 min_pairs: int = DEFAULT_MIN_PAIRS, draws: int = DEFAULT_DRAWS, n_boot: int = DEFAULT_N_BOOT,
                 seed: int = 0, info: dict | None = None, start: float | None = None) -> ModelCheckReport:
    """The check of :func:`check_model` for chains already fitted, on given state series.

    Parameters
    ----------
    fitted : policyopt.models.estimation.FittedModel
    states : numpy.ndarray of int, shape (U, T)
        State series of `users` (−1 missing), e.g. from :func:`data_states`.
    users : sequence of str
        Users of the rows of `states`, each kept by `fitted`.
    max_lag, level, min_pairs, draws, n_boot, seed
        As :func:`check_model`.
    info : dict, optional
        Extra report facts (source, holdout, …).
    start : float, optional
        ``time.perf_counter()`` at the start of the caller's work (for ``wall_time_s``).

    Returns
    -------
    ModelCheckReport
    """
    from policyopt.models.markov import Population

    start = time.perf_counter() if start is None else start
    check_int(seed, "seed", 0)
    check_int(draws, "draws", 1)
    keep = [fitted.users.index(u) for u in users]
    K = fitted.quantizer.n_states
    T = states.shape[1]
    L = default_max_lag(T) if max_lag is None else max_lag
    # one resampling stream per user (keyed by name), like the simulation: the Dask path resamples each partition's
    # users alone and gets the same replicates, so the same band
    emp = estimate_max_tv(states, K, L, level=level, min_pairs=min_pairs, n_boot=n_boot, seed=int(seed),
                          rng=user_streams(users, int(seed), stream=2))
    chains = [fitted.population.chains[i] for i in keep]
    model = np.asarray(Population(chains).max_tv(emp.lags), dtype=float)
    # one stream per user (keyed by name): the Dask path simulates each partition's users alone and gets the same draws
    sims = chain_statistic_draws([c.P for c in chains], states, K, emp.max_lag, min_pairs=emp.min_pairs, draws=int(draws),
                                 rng=user_streams(users, int(seed)))
    p = _p_values(sims, emp.estimate)
    full = {"source": "readings given in Python", "holdout": None, "fit_slots": int(T),
            "value_range": None if fitted.value_range is None else list(fitted.value_range),
            "smoothing": float(fitted.smoothing)}
    full.update(info or {})
    full.update({"states": K, "users": len(users), "slots": int(T), "seed": int(seed),
                 "excluded_users": dict(fitted.excluded)})
    return ModelCheckReport(empirical=emp, model_max_tv=model, draws=sims, p_values=p, info=full,
                            wall_time_s=time.perf_counter() - start)


def plot_check(report: ModelCheckReport, path, *, title: str | None = None) -> None:
    """Draw the model's Δ(t), the direct estimate, its band and the pointwise refuted lags on a log lag axis into `path`.

    Raises
    ------
    BackendUnavailableError
        If matplotlib is missing.
    """
    from policyopt.studies.plots import require_matplotlib

    require_matplotlib("--plot")
    from matplotlib.figure import Figure

    e = report.empirical
    them = "the chains" if report.model == "chain" else f"the {report.model} model"
    fig = Figure(figsize=(7.5, 5.0), layout="constrained")
    ax = fig.subplots()
    lags = e.lags
    ax.fill_between(lags, e.lower, e.upper, color="0.85", label=f"direct estimate, {100 * e.level:g}% simultaneous band")
    ax.plot(lags, e.estimate, color="0.0", lw=1.2, label="direct estimate Δ̂(t) (max over users)")
    ax.plot(lags, report.model_critical, color="0.45", lw=1.0, ls="--",
            label=f"Δ̂(t) under {them} ({100 * e.level:g}% of simulated data sets below)")
    ax.plot(lags, report.model_max_tv, color="0.25", lw=1.6, ls=":", label="fitted chains' Δ(t) (eq. (12))" if report.model == "chain" else
            f"fitted {report.model} model's Δ_Z(t) (eq. (12) on Z)")
    ref = report.refuted
    if ref.any():
        ax.scatter(lags[ref], e.estimate[ref], s=9, color="tab:red", zorder=3, label="pointwise refuted lags")
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("lag t (slots, log scale)")
    ax.set_ylabel("Δ(t): largest row TV of the reversed t-step kernel")
    ax.set_title(title or f"{'Chain' if report.model == 'chain' else report.model} model check, "
                          f"{report.info.get('states')} states")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=7, frameon=False)
    fig.savefig(path, dpi=110)
