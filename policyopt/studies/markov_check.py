"""Check a Markov model of the readings on held-out time, and choose the simplest one the data do not refute.

Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, prove Theorem 3
(hence ε* of eq. (30), ε(t) and the horizon design) "if the process {X_t} is Markovian".  A model here is a Markov
chain on a state Z_t that carries what the readings remember (:mod:`policyopt.models.markov_model`: the first-order
chain, a phase chain, an order-k chain, a hidden-regime model); its privacy numbers are stated only if the data do
not refute it.  The check:

1. **Split in time.**  Each user's series (quantile states on the slot grid, −1 at missing slots) is cut at a fraction
   of its span: the model is fitted on the first part and checked on the rest (held-out time, data it was not fitted
   to), so the fitted model is fixed when it meets the test data and the Monte Carlo tests below are exact given it.
2. **Parametric bootstrap.**  R data sets are simulated from the fitted model over the held-out part (same users, same
   lengths, same missing slots, each user from its own random stream keyed by its name, simulation only).
3. **Markov test** (:func:`policyopt.models.markov_test.markov_test`): G²(ℓ) of "the next state is independent of the
   state ℓ slots back given the model's observable context", ℓ = 1..L with L at least a week of slots (T. W. Anderson,
   L. A. Goodman, Ann. Math. Statist. 28(1), 1957; P. Billingsley, Ann. Math. Statist. 32(1), 1961), against the same
   statistic on the simulated sets, family-wise over the lags by the max-T / min-p method (P. H. Westfall, S. S. Young,
   "Resampling-Based Multiple Testing", Wiley, 1993).
4. **Δ(t) check**: the direct estimate Δ̂(t) of eq. (12) on the held-out readings (max over users of the largest TV
   between two rows of the reversed t-step kernel with ≥ `min_pairs` pairs, :mod:`policyopt.models.empirical`) against
   the same statistic on the simulated sets, lags 1..L', family-wise by max-T on the lag-wise standardised statistic.

The model **passes** when neither test refutes it at the level; each test alone refutes a true model in a share
≈ 1 − level of data sets, both together in at most 2(1 − level) (Bonferroni).  ``auto`` checks the candidates from the
simplest (fewest free parameters) and takes the first that passes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from policyopt import progress
from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.formatting import fmt_count, fmt_value, lag_ranges
from policyopt.io.result_cache import cached

__all__ = ["CheckData", "MarkovModelCheck", "ModelSelection", "split_states", "check_markov_model", "select_markov_model",
           "auto_candidates", "design_check", "fit_for_design", "check_summary", "model_check_line", "periods_from_slot",
           "selection_line", "design_lags", "schedule_lags", "max_tv_check_result", "simulated_critical", "DEFAULT_HOLDOUT",
           "CHECK_DRAWS", "DEFAULT_LEVEL"]

#: Fraction of each user's span held out for the check.
#: Seconds in a day and a week: the periods a known slot length gives (phase chains, lags, w-event windows).
DAY_SECONDS = 86_400
WEEK_SECONDS = 7 * DAY_SECONDS
DEFAULT_HOLDOUT = 0.5
#: Data sets simulated from a model for its check: with 39 the Monte Carlo p-values move in steps of 0.025, so a verdict
#: at level 0.95 (refuted when the held-out data are among the 2 most extreme of 40) rests on more than the single most
#: extreme draw, and borderline verdicts depend less on the simulation's seed than with 19.
CHECK_DRAWS = 39
#: Level of the checks.
DEFAULT_LEVEL = 0.95
#: Dirichlet pseudo-count of the model checked (Jeffreys' prior of a multinomial row): its posterior predictive gives
#: a transition unseen in the fitting part the chance the held-out part may show it.  The design's own fit keeps its
#: small smoothing (a large one would lower Δ(t)).
CHECK_PRIOR = 0.5


@dataclass(frozen=True)
class CheckData:
    """Quantile states of the readings, each user's series cut in time into a fitting part and a held-out part.

    Attributes
    ----------
    train, test : numpy.ndarray of int64, shape (U, T1) and (U, T2)
        States (−1 missing) of the first and the held-out part; column 0 of a row is the user's first slot of that part.
    train_starts, test_starts : numpy.ndarray of int64, shape (U,)
        Absolute slot of column 0 of each row (the public clock of a phase model).
    users : tuple of str
    n_states : int
        K.
    holdout : float
        Fraction of each user's span held out.
    """

    train: np.ndarray
    test: np.ndarray
    train_starts: np.ndarray
    test_starts: np.ndarray
    users: tuple
    n_states: int
    holdout: float


def split_states(readings, quantizer, users, *, value_range=None, holdout: float = DEFAULT_HOLDOUT) -> CheckData:
    """Put `readings` on the quantizer's states and cut each user's span: the first 1 − `holdout` fits, the rest tests.

    Parameters
    ----------
    readings : pandas.DataFrame
        user, time (integer slots), value.
    quantizer : policyopt.models.estimation.Quantizer
        The design's quantile states.
    users : sequence of str
        Users to keep (in this order); a user without readings on both sides of its cut is left out.
    value_range : (float, float), optional
        Public range the readings are clipped into first (as the design's fit does).
    holdout : float
        Fraction in (0, 1) of each user's span held out.

    Returns
    -------
    CheckData

    Raises
    ------
    InvalidInputError
        Bad `holdout`; no user with readings on both sides of its cut.
    """
    from policyopt.models.estimation import readings_states_starts, validate_readings

    if isinstance(holdout, bool) or not isinstance(holdout, (int, float, np.floating)) or not 0.0 < float(holdout) < 1.0:
        raise InvalidInputError(f"`holdout` must be a fraction strictly between 0 and 1, got {fmt(holdout)}")
    df = validate_readings(readings, source="`readings`")
    if value_range is not None:
        df["value"] = np.clip(df["value"].to_numpy(), *value_range)
    t0 = df.groupby("user")["time"].transform("min")
    span = df.groupby("user")["time"].transform("max") - t0 + 1
    cut = t0 + np.ceil((1.0 - float(holdout)) * span).astype(np.int64)
    train, test = df[df["time"] < cut], df[df["time"] >= cut]
    both = set(train["user"].unique()) & set(test["user"].unique())
    kept = [u for u in users if u in both]
    if not kept:
        raise InvalidInputError("no user has readings on both sides of its held-out cut: give longer series")
    tr, tr0 = readings_states_starts(train, quantizer, kept)
    te, te0 = readings_states_starts(test, quantizer, kept)
    return CheckData(train=tr, test=te, train_starts=tr0, test_starts=te0, users=tuple(kept),
                     n_states=int(quantizer.n_states), holdout=float(holdout))


@dataclass(frozen=True)
class MarkovModelCheck:
    """One model's check on held-out time (JSON ``model_check.models[i]``; the chosen one is ``model_check``).

    Attributes
    ----------
    model : str
        Canonical name (``chain``, ``phase:24``, ``order:2``, ``hmm:2``).
    description : str
        What the augmented state Z is.
    n_parameters : int
        Free parameters of the fit (the order of ``auto``).
    markov_test : dict
        :meth:`policyopt.models.markov_test.MarkovTestResult.to_dict` (``method``, ``level``, ``lags``, ``statistic``,
        ``p_value``, ``worst_lag``, ``refuted``, …).
    max_tv_check : dict
        ``method``, ``level``, ``max_lag``, ``p_value`` (family-wise), ``worst_lag``, ``estimate`` and ``critical`` at
        the worst lag (Δ̂ on the held-out data vs the level quantile of the simulated Δ̂ there), ``refuted``.
    passed : bool
        Neither test refutes the model at the level.
    info : dict
        ``holdout``, ``fit_slots``, ``test_slots``, ``users``, ``draws``, ``seed``, ``wall_time_s``.
    fitted : object
        The model fitted on the first part (not in JSON).
    """

    model: str
    description: str
    n_parameters: int
    markov_test: dict
    max_tv_check: dict
    passed: bool
    info: dict
    fitted: object = field(default=None, repr=False, compare=False)

    @property
    def verdict(self) -> str:
        """``passed`` or ``refuted``."""
        return "passed" if self.passed else "refuted"

    def why(self) -> str:
        """The two p-values and the level in a few words."""
        mt, mv = self.markov_test, self.max_tv_check
        return (f"held-out Markov test p = {fmt_value(mt['p_value'], 3)}"
                + (f" (worst lag {mt['worst_lag']})" if mt.get("refuted") else "")
                + f", Δ(t) check p = {fmt_value(mv['p_value'], 3)}"
                + (f" (worst lag {mv['worst_lag']})" if mv.get("refuted") else "")
                + f", level {mt['level']:g}")

    def to_dict(self) -> dict:
        """The JSON object (without the fitted model)."""
        return {"model": self.model, "description": self.description, "n_parameters": int(self.n_parameters),
                "verdict": self.verdict, "passed": bool(self.passed), "markov_test": self.markov_test,
                "max_tv_check": self.max_tv_check, **self.info}

    def text(self) -> str:
        """One line: the model, its verdict and why."""
        return f"{self.model} ({self.description}): {self.verdict.upper() if not self.passed else 'passed'} — {self.why()}"


def _markov_context(fitted) -> dict:
    """The Markov test's observable context for a fitted model: its order and its public phase period."""
    name = str(fitted.name)
    kind, _, param = name.partition(":")
    if kind == "order":
        return {"context_order": int(param), "period": None}
    if kind == "phase":
        return {"context_order": 1, "period": int(param)}
    return {"context_order": 1, "period": None}


def _lengths_initial(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: slots up to the last observed one, and the first observed state (0 for an empty row)."""
    obs = x >= 0
    lengths = np.where(obs.any(axis=1), x.shape[1] - np.argmax(obs[:, ::-1], axis=1), 1)
    first = np.array([int(r[r >= 0][0]) if (r >= 0).any() else 0 for r in x], dtype=np.int64)
    return lengths.astype(np.int64), first


#: Bytes of simulated int64 states held at once (users are simulated in groups below it).
_SIM_BYTES = 256 * 2**20


def simulated_critical(sim_tv, level: float) -> np.ndarray:
    """Per lag, the `level` quantile of the statistic on the simulated data sets (``method="higher"``: one of the
    simulated values), the critical value the Δ(t) checks print.

    Parameters
    ----------
    sim_tv : numpy.ndarray, shape (R, L)
        The statistic on R simulated data sets at L lags.
    level : float
        In (0, 1).

    Returns
    -------
    numpy.ndarray, shape (L,)
    """
    return np.quantile(sim_tv, float(level), axis=0, method="higher")


def max_tv_check_result(obs_tv, sim_tv, *, level: float, min_pairs: int, model_name: str,
                        readings: str = "the held-out readings", reference: str | None = None,
                        lags=None) -> dict:
    """The Δ(t) check's ``max_tv_check`` object from its statistics (the reduce step, serial and on Dask alike).

    Parameters
    ----------
    obs_tv : numpy.ndarray, shape (L,)
        Δ̂(t) of Zhang et al. (2024), eq. (12), on the held-out readings at lags 1..L (max over users).
    sim_tv : numpy.ndarray, shape (R, L)
        The same statistic on R data sets simulated from the fitted model.
    level : float
        Family-wise level in (0, 1).
    min_pairs : int
        Pairs a row needed to be claimed (for the method text).
    model_name : str
        The fitted model's name (for the method text).
    readings, reference : str, optional
        For the method text: which readings `obs_tv` is of, and what the R data sets are (default "data sets
        simulated from the fitted `model_name`").
    lags : sequence of int, optional
        The lags (slots) of the L columns, when they are not 1..L (e.g. a schedule's A and S̄): ``worst_lag`` and
        ``max_lag`` are then among them and the method text names them.

    Returns
    -------
    dict
        ``method``, ``level``, ``max_lag``, ``p_value`` (max-T on the lag-wise standardised statistic, Westfall &
        Young 1993), ``worst_lag``, ``estimate``, ``critical`` (the level quantile of the simulated sets there),
        ``refuted`` and ``pointwise_p_values``.
    """
    from policyopt.models.markov_test import family_wise_p

    R, L = np.shape(sim_tv)
    fw = family_wise_p(obs_tv, sim_tv, transform="z")
    crit = simulated_critical(sim_tv, level)
    worst = int(fw.worst) if fw.worst is not None else int(np.argmax(obs_tv - crit))
    labels = list(range(1, L + 1)) if lags is None else [int(t) for t in lags]
    if len(labels) != L:
        raise InvalidInputError(f"`lags` names {len(labels)} lags for {L} columns")
    return {
        "method": (f"Δ̂(t) of eq. (12) on {readings} (max over users, rows with ≥ {min_pairs} pairs) against "
                   f"the same statistic on {R} {reference or f'data sets simulated from the fitted {model_name}'}; "
                   "family-wise over lags "
                   f"{f'1..{L}' if lags is None else lag_ranges(labels)} by max-T on the lag-wise standardised "
                   "statistic (Westfall & Young 1993)"),
        "level": float(level), "max_lag": max(labels), "p_value": float(fw.p_value), "worst_lag": labels[worst],
        "estimate": float(obs_tv[worst]), "critical": float(crit[worst]),
        "refuted": bool(fw.p_value <= 1.0 - float(level) + 1e-12),
        "pointwise_p_values": [float(v) for v in fw.pointwise],
    }


@cached("markov-check")
def check_markov_model(spec, data: CheckData, *, markov_lags: int, max_tv_lags: int, level: float = DEFAULT_LEVEL,
                       draws: int = CHECK_DRAWS, seed: int = 0, smoothing: float = 0.01, min_pairs: int | None = None,
                       default_period: int | None = None) -> MarkovModelCheck:
    """Fit `spec` on the first part of each series and check it on the held-out part (see the module docstring).

    Parameters
    ----------
    spec : str or policyopt.models.markov_model.MarkovModelSpec
        ``chain``, ``phase[:P]``, ``order:K`` or ``hmm:R`` (not ``auto``: see :func:`select_markov_model`).
    data : CheckData
        From :func:`split_states`.
    markov_lags, max_tv_lags : int
        L of the Markov test and of the Δ(t) check (slots); each is capped below the held-out length.
    level : float
        Level of both tests, in (0, 1).
    draws : int
        Data sets R ≥ 1 simulated from the model.
    seed : int
        Seed of the simulation (never released noise).
    smoothing : float
        Pseudo-count of the count-based fits.
    min_pairs : int, optional
        Pairs a row needs for Δ̂ (default :data:`policyopt.models.empirical.DEFAULT_MIN_PAIRS`).
    default_period : int, optional
        P of a bare ``phase`` (a day of slots).

    Returns
    -------
    MarkovModelCheck

    Raises
    ------
    InvalidInputError
        A bad spec or argument; a held-out part too short for one lag.
    """
    from policyopt.models.empirical import DEFAULT_MIN_PAIRS, max_tv_statistic, user_streams
    from policyopt.models.markov_model import MarkovModelSpec, fit_markov_model
    from policyopt.models.markov_test import g2_profile, markov_test_from_parts

    start = time.perf_counter()
    if not 0.0 < float(level) < 1.0:
        raise InvalidInputError(f"`level` must be strictly between 0 and 1, got {fmt(level)}")
    check_int(draws, "draws", 1)
    mp = DEFAULT_MIN_PAIRS if min_pairs is None else int(min_pairs)
    sp = spec if isinstance(spec, MarkovModelSpec) else MarkovModelSpec.parse(str(spec), default_period=default_period)
    K, U = data.n_states, len(data.users)
    fitted = fit_markov_model(sp, data.train, K, users=data.users, starts=data.train_starts, smoothing=smoothing,
                              seed=seed, default_period=default_period)
    # the Markov test's reference: the same model under Jeffreys' prior (an EM fit is reused: its rows are not sparse)
    g2_model = fitted if sp.kind == "hmm" or smoothing >= CHECK_PRIOR else fit_markov_model(
        sp, data.train, K, users=data.users, starts=data.train_starts, smoothing=CHECK_PRIOR, seed=seed,
        default_period=default_period)
    ctx = _markov_context(fitted)
    T2 = data.test.shape[1]
    Lm = int(min(markov_lags, max(ctx["context_order"], T2 - 2)))
    Ld = int(min(max_tv_lags, T2 - 1))
    if Lm < ctx["context_order"] or Ld < 1:
        raise InvalidInputError(f"the held-out part has {T2} slots: too short to check {fitted.name} (give longer series)")
    lags_m = np.arange(ctx["context_order"], Lm + 1)
    lengths, first = _lengths_initial(data.test)
    streams = user_streams(data.users, int(seed), stream=3)
    draw_streams = user_streams(data.users, int(seed), stream=4)
    R = int(draws)
    sim_prof = [None] * R
    sim_tv = np.zeros((R, Ld))

    ctx_args = {"context_order": ctx["context_order"], "period": ctx["period"],
                "starts": data.test_starts if ctx["period"] else None}
    obs = data.test
    obs_prof = g2_profile(obs, K, lags_m, **ctx_args)
    obs_tv = max_tv_statistic(obs, K, Ld, min_pairs=mp).max(axis=0)
    steps = progress.bar(R, f"checking {fitted.name}", unit="set")
    for r in range(R):  # posterior predictive: set r simulated from a model drawn from the fit's posterior
        steps.update(1)
        sim = g2_model.posterior_draw(draw_streams).simulate(lengths, 1, streams, starts=data.test_starts,
                                                              initial=first)[0]
        sim_prof[r] = g2_profile(sim, K, lags_m, observed=obs, **ctx_args)  # the observed missing slots applied
        sim = fitted.posterior_draw(draw_streams).simulate(lengths, 1, streams, starts=data.test_starts,
                                                            initial=first)[0]
        sim[obs[:, : sim.shape[1]] < 0] = -1  # the observed missing slots (beyond each length they are −1 already)
        sim_tv[r] = max_tv_statistic(sim, K, Ld, min_pairs=mp).max(axis=0)
    steps.close()
    mtd = markov_test_from_parts(obs_prof, sim_prof, level=level).to_dict()
    mv = max_tv_check_result(obs_tv, sim_tv, level=level, min_pairs=mp, model_name=fitted.name)
    info = {"holdout": data.holdout, "fit_slots": int(data.train.shape[1]), "test_slots": int(T2), "users": U,
            "draws": R, "seed": int(seed), "wall_time_s": time.perf_counter() - start}
    return MarkovModelCheck(model=str(fitted.name), description=str(fitted.description),
                            n_parameters=int(fitted.n_parameters), markov_test=mtd, max_tv_check=mv,
                            passed=not (mtd["refuted"] or mv["refuted"]), info=info, fitted=fitted)


def auto_candidates(day: int | None, week: int | None) -> tuple[str, ...]:
    """The models ``auto`` tries, simplest first: the chain, order 2, the daily phase chain, two regimes, order 3, three
    regimes, the weekly phase chain (each phase kind only when its period is known and > 1)."""
    out = ["chain", "order:2"]
    if day and day > 1:
        out.append(f"phase:{day}")
    out += ["hmm:2", "order:3", "hmm:3"]
    if week and week > 1:
        out.append(f"phase:{week}")
    return tuple(out)


@dataclass(frozen=True)
class ModelSelection:
    """The outcome of checking one model or ``auto``: the chosen check (``None`` when none passed) and every check made.

    Attributes
    ----------
    requested : str
        What the user asked for (``auto`` or one model).
    chosen : MarkovModelCheck or None
        The model that passed (for one requested model: its check whatever the verdict).
    checks : tuple of MarkovModelCheck
        Every model checked, in order.
    """

    requested: str
    chosen: MarkovModelCheck | None
    checks: tuple

    @property
    def passed(self) -> bool:
        """A model passed its checks."""
        return self.chosen is not None and self.chosen.passed

    def to_dict(self) -> dict:
        """``requested``, ``chosen`` (name or null), ``passed``, ``models`` (every check's JSON)."""
        return {"requested": self.requested, "chosen": None if self.chosen is None else self.chosen.model,
                "passed": self.passed, "models": [c.to_dict() for c in self.checks]}

    def text(self) -> str:
        """One line per check."""
        return "; ".join(c.text() for c in self.checks)


def select_markov_model(spec: str, data: CheckData, *, candidates=None, **options) -> ModelSelection:
    """Check one model, or (``auto``) the candidates from the simplest until one passes.

    Parameters
    ----------
    spec : str
        One model (``chain``, ``phase[:P]``, ``order:K``, ``hmm:R``) or ``auto``.
    data : CheckData
    candidates : sequence of str, optional
        ``auto``'s candidates, simplest first (default :func:`auto_candidates` of the day and week periods given in
        `options` as ``default_period`` and ``week_period``).
    **options
        Passed to :func:`check_markov_model` (``week_period`` is taken out here).

    Returns
    -------
    ModelSelection
    """
    week = options.pop("week_period", None)
    if str(spec) != "auto":
        c = check_markov_model(spec, data, **options)
        return ModelSelection(requested=str(spec), chosen=c, checks=(c,))
    cands = tuple(candidates) if candidates is not None else auto_candidates(options.get("default_period"), week)
    done = []
    for name in cands:
        c = check_markov_model(name, data, **options)
        done.append(c)
        if c.passed:
            return ModelSelection(requested="auto", chosen=c, checks=tuple(done))
    return ModelSelection(requested="auto", chosen=None, checks=tuple(done))


def selection_line(sel: ModelSelection) -> str:
    """The ``Markov model`` line of a report: which model, its verdict, and the others tried."""
    if sel.requested == "auto":
        head = (f"auto: {sel.chosen.model} is the simplest of {fmt_count(len(sel.checks), 'model')} tried that passed"
                if sel.passed else f"auto: none of the {fmt_count(len(sel.checks), 'model')} tried passed")
        return head + " — " + sel.text()
    return sel.text()


def periods_from_slot(slot_seconds: int | None) -> tuple[int | None, int | None]:
    """(day, week) in slots when the slot length is known and divides them into at least 2 slots; else ``None``."""
    if slot_seconds is None:
        return None, None
    day = DAY_SECONDS // slot_seconds if DAY_SECONDS % slot_seconds == 0 and DAY_SECONDS // slot_seconds >= 2 else None
    week = WEEK_SECONDS // slot_seconds if WEEK_SECONDS % slot_seconds == 0 and WEEK_SECONDS // slot_seconds >= 2 else None
    return day, week


def design_check(readings, quantizer, users, *, spec: str = "chain", value_range=None, box_last_age: int = 1,
                 slot_seconds: int | None = None, level: float = DEFAULT_LEVEL, draws: int = CHECK_DRAWS, seed: int = 0,
                 holdout: float = DEFAULT_HOLDOUT, smoothing: float = 0.01) -> ModelSelection:
    """The model check every design on data runs: `spec` (or ``auto``) fitted on the first part of each series and
    checked on the rest, lags up to a week of slots and at least the box's (:func:`check_markov_model`).

    Parameters
    ----------
    readings : pandas.DataFrame
        The design's readings (user, time, value).
    quantizer : policyopt.models.estimation.Quantizer
        The design's quantile states.
    users : sequence of str
        The design's users.
    spec : str
        ``chain``, ``phase[:P]``, ``order:K``, ``hmm:R`` or ``auto``.
    value_range : (float, float), optional
        Public range (readings are clipped first).
    box_last_age : int
        The largest age (slots) the design's search box looks Δ up at.
    slot_seconds : int, optional
        Slot length (seconds): a day and a week of slots (phase periods, lags); unknown → 168 lags, no phase default.
    level, draws, seed, holdout, smoothing
        As :func:`check_markov_model` / :func:`split_states`.

    Returns
    -------
    ModelSelection
    """
    from policyopt.models.markov_test import default_markov_lags

    day, week = periods_from_slot(slot_seconds)
    data = split_states(readings, quantizer, users, value_range=value_range, holdout=holdout)
    L = default_markov_lags(week, int(box_last_age), int(data.test.shape[1]))
    return select_markov_model(spec, data, markov_lags=L, max_tv_lags=L, level=level, draws=draws, seed=seed,
                               smoothing=smoothing, default_period=day, week_period=week)


def fit_for_design(spec: str, readings, quantizer, users, *, value_range=None, smoothing: float = 0.01, seed: int = 0,
                   default_period: int | None = None):
    """`spec` fitted on every design reading (after its check on held-out time): the Δ(t) source of the design.

    :func:`policyopt.models.markov_model.fit_readings_model`, which ``publish`` and ``ledger`` call too (through
    :meth:`policyopt.deploy.ModelSpec.load`) to account with the same model.

    Returns
    -------
    policyopt.models.markov_model.FittedMarkovModel
    """
    from policyopt.models.markov_model import fit_readings_model

    return fit_readings_model(spec, readings, quantizer, users, value_range=value_range, smoothing=smoothing, seed=seed,
                              default_period=default_period)


def check_summary(sel: ModelSelection, A=None, S_bar=None) -> dict:
    """The ``model_check`` JSON object of a design on data: the selection, the chosen (or only) model's two tests, and
    the lags the schedule's risk uses (``design_lags``: A..A + S̄ − 1 and S̄, Zhang et al. 2024, Theorem 3) with
    those where the Δ(t) check is pointwise beyond the level (``design_lags_refuted``, descriptive).
    """
    c = sel.chosen if sel.chosen is not None else (sel.checks[-1] if sel.checks else None)
    out = sel.to_dict()
    out["refuted"] = not sel.passed
    out["model"] = None if c is None else c.model
    out["markov_test"] = None if c is None else c.markov_test
    out["max_tv_check"] = None if c is None else c.max_tv_check
    lags = None
    bad = None
    if A is not None and S_bar is not None and float(A).is_integer() and float(S_bar).is_integer():
        lags = schedule_lags(A, S_bar)
        if c is not None:
            pv = c.max_tv_check.get("pointwise_p_values") or []
            lv = c.max_tv_check["level"]
            bad = [t for t in lags if t <= len(pv) and pv[t - 1] <= 1.0 - lv + 1e-12]
    out["design_lags"] = lags
    out["design_lags_refuted"] = bad
    return out


def model_check_line(mc: dict) -> str:
    """The ``model check`` line of a report, from :func:`check_summary`'s object."""
    models = mc.get("models") or []
    parts = []
    for m in models:
        mt, mv = m["markov_test"], m["max_tv_check"]
        parts.append(
            f"{m['model']} {'passed' if m['passed'] else 'REFUTED'} (held-out Markov test p = {fmt_value(mt['p_value'], 3)}"
            + (f", worst lag {mt['worst_lag']}" if mt.get("refuted") and mt.get("worst_lag") is not None else "")
            + f"; Δ(t) check p = {fmt_value(mv['p_value'], 3)}"
            + (f", worst lag {mv['worst_lag']}: Δ̂ = {fmt_value(mv['estimate'], 3)} vs ≤ {fmt_value(mv['critical'], 3)} "
               "under the model" if mv.get("refuted") else "") + ")")
    if not models:
        return "no model checked"
    m0 = models[0]
    head = (f"fitted on the first {fmt_value(100 * (1 - m0['holdout']), 3)}% of each series, checked on the rest "
            f"({fmt_count(m0['test_slots'], 'slot')}): G² Markov test at lags {m0['markov_test']['lags'][0]}.."
            f"{m0['markov_test']['lags'][-1]} and Δ(t) check at lags 1..{m0['max_tv_check']['max_lag']}, "
            f"{fmt_count(m0['draws'], 'simulated data set')} each, family-wise level {m0['markov_test']['level']:g}: ")
    if mc.get("requested") == "auto":
        head += (f"auto chose {mc['chosen']}, the simplest model that passed — " if mc.get("passed") else
                 "auto: no model passed — ")
    return head + "; ".join(parts)


def design_lags(check: dict, A, S_bar) -> dict:
    """The lags whose Δ the chosen schedule's ε* rests on, and which of them the model check refutes.

    Eq. (30) and Theorem 3's recursion (Zhang et al. 2024) evaluate Δ at the ages A..A + S̄ − 1 of an epoch's input
    and at the gap S̄ between inputs; lag 0 (Δ(0) = 1) needs no model.  ``design_lags`` lists them (``null`` when no
    schedule was found), ``design_lags_refuted`` those among them the check refutes.
    """
    if A is None or S_bar is None:
        return {"design_lags": None, "design_lags_refuted": None}
    lags = schedule_lags(A, S_bar)
    refuted = set(check.get("refuted_lags") or ())
    return {"design_lags": lags, "design_lags_refuted": [t for t in lags if t in refuted]}


def schedule_lags(A, S_bar) -> list[int]:
    """The lags t ≥ 1 whose Δ(t) the risk of the integer schedule (A, S̄) uses: the ages A..A + S̄ − 1 of an epoch's
    input and the gap S̄ between inputs (Zhang et al. 2024, eq. (30) and Theorem 3), ascending."""
    return sorted(({t for t in range(int(A), int(A) + int(S_bar))} | {int(S_bar)}) - {0})
