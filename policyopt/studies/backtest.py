"""Backtest of a schedule on held-out readings: the MSE it would have realised against the bound f̄ it promised.

The readings' time range is split at a fraction F: a schedule designed on the first part (or given) is
replayed on the rest.  Releases happen at S_n = split + n·S̄ (n ≥ 0) and carry the readings of S_n − A
(which may lie in the first part: they exist at release time), so at a held-out slot t the released
value is A + ((t − split) mod S̄) slots old.  For a deployment of I users drawn like the readings' users
the expected squared error at t is (:mod:`policyopt.utility.readings_penalty`, (R1)–(R2))

    e_t = cross_t(age_t) + (self_t(age_t) − cross_t(age_t)) / I + 2 (Δf / ε_C)²,   Δf = (HI − LO)/I,

with self_t and cross_t the per-slot self and cross terms of the held-out readings.  The realised MSE is
the mean of e_t over the held-out slots; its confidence interval is a circular block bootstrap of that
mean over slots (``arch.bootstrap.CircularBlockBootstrap``, block length by Politis & White (2004) with
the Patton, Politis & White (2009) correction on the series e_t, at least 2·(A + S̄ − 1) + 1 slots; percentile
interval).

Privacy.  The replay is k = ⌈H/S̄⌉ Laplace releases of ε_C over the held-out span of H slots, so whatever the
correlation of the readings the deployment is (ε, δ)-DP for each user's whole series over that span by the PLD
accountant, k·ε_C pure by basic composition (:func:`policyopt.studies.guarantee.schedule_model_free`; Dwork & Roth 2014,
Theorem 3.16).  That model-free guarantee is stated first unless the design's Markov model passed its checks on
held-out readings (:func:`design_verdict`; for a design made here, :func:`policyopt.studies.markov_check.design_check`
on the training part) or was given without data, as :func:`policyopt.studies.guarantee.choose_guarantee` decides.

Source: Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, problem (28)
(the schedule), eq. (27) (the penalty of an epoch), Proposition 1 (the Laplace noise of an ε_C-DP mean).
"""

from __future__ import annotations

import math
import time

import numpy as np

from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.formatting import check_text, fmt_band, fmt_count, fmt_epsilon_c, fmt_span, fmt_upper, fmt_value
from policyopt.io.result_cache import cached
from policyopt.utility.intervals import DEFAULT_CI_LEVEL, replay_coverage
from policyopt.utility.readings_penalty import (
    BOOTSTRAP_REPS,
    DEFAULT_LEVEL,
    ReadingsMSEPenalty,
    SlotTerms,
    block_length,
    readings_moments,
    slot_terms,
)

__all__ = ["backtest", "split_slot", "replay_errors", "format_backtest", "plot_backtest",
           "design_verdict", "verdict_text", "interval_text", "mse_text", "EMPIRICAL_PREMISE"]

#: The first-order chains as the accounting of ``publish``/``ledger`` names them, with the Δ(t) of an empirical design.
EMPIRICAL_PREMISE = "chain (the first-order Markov premise of Theorem 3; Δ(t) from the data's band)"


def split_slot(times: np.ndarray, train_fraction: float) -> int:
    """First held-out slot: t_0 + ⌊F · (t_last − t_0 + 1)⌋.

    Raises
    ------
    InvalidInputError
        If `train_fraction` is not strictly between 0 and 1, or leaves no slot on either side.
    """
    if isinstance(train_fraction, bool) or not isinstance(train_fraction, (int, float, np.floating)) or not (
        0.0 < float(train_fraction) < 1.0
    ):
        raise InvalidInputError(f"`train_fraction` must be strictly between 0 and 1, got {fmt(train_fraction)}")
    t0, t1 = int(np.min(times)), int(np.max(times))
    split = t0 + int(math.floor(float(train_fraction) * (t1 - t0 + 1)))
    if not t0 < split <= t1:
        raise InvalidInputError(f"`train_fraction` = {train_fraction!r} leaves no slot to train on or to hold out "
                                f"(slots {t0}..{t1})")
    return split


def _check_why(m: dict) -> str:
    """The p-values and level of one model's check (an entry of ``model_check.models``) in a few words."""
    mt = m.get("markov_test") if isinstance(m.get("markov_test"), dict) else {}
    mv = m.get("max_tv_check") if isinstance(m.get("max_tv_check"), dict) else {}
    parts = []
    if isinstance(mt.get("p_value"), (int, float)):
        parts.append(f"held-out Markov test p = {fmt_value(mt['p_value'], 3)}"
                     + (f" (worst lag {mt['worst_lag']})" if mt.get("refuted") and mt.get("worst_lag") is not None else ""))
    if isinstance(mv.get("p_value"), (int, float)):
        parts.append(f"Δ(t) check p = {fmt_value(mv['p_value'], 3)}"
                     + (f" (worst lag {mv['worst_lag']})" if mv.get("refuted") and mv.get("worst_lag") is not None else ""))
    level = mt.get("level", mv.get("level"))
    if isinstance(level, (int, float)):
        parts.append(f"level {level:g}")
    return ", ".join(parts) or "no test recorded"


def _verdict(model: str, verdict: str, why: str, source: str) -> dict:
    return {"model": model, "verdict": verdict, "why": why, "source": source}


def design_verdict(obj: dict, *, accounting: str = "design", source: str = "the schedule file") -> dict:
    """What a ``policyopt schedule --json`` object says about the Markov model its model-based risk rests on.

    The rule of issue 32 (:func:`policyopt.studies.guarantee.choose_guarantee`): a model-based risk is a bound only
    under a model that passed its checks on held-out readings (``passed``) or that the designer gave without data
    (``assumed``: ``--chain``/``--matrix``); else the verdict is ``refuted`` or ``unchecked``.  The object's
    ``model_check`` (:func:`policyopt.studies.markov_check.check_summary`, recorded at design time) gives the verdict; a
    file without ``guarantee`` was written before models were checked: ``unchecked``.

    Parameters
    ----------
    obj : dict
        The schedule's JSON object.
    accounting : str
        Whose verdict: ``design`` — the model the design's ε* rests on (its chosen model, e.g. ``phase:24``); a model
        name (``chain``, ``order:2``, ``phase:24``, ``hmm:2``) — the model ``publish`` and ``ledger`` account with
        (Zhang et al. 2024, Theorem 3 with Δ(t) of eq. (12) of that model's chain): ``unchecked`` when the design did
        not check it.  For an empirical design
        (``deployment.model.max_tv_source`` ``empirical:LEVEL``) both are the first-order Markov premise of Theorem 3
        (the held-out Markov test; Δ(t) is the data's band).
    source : str
        Where the object came from, for the ``source`` field.

    Returns
    -------
    dict
        ``{"model", "verdict", "why", "source"}``; ``verdict`` one of ``passed``, ``refuted``, ``assumed``,
        ``unchecked``.

    Raises
    ------
    InvalidInputError
        If `obj` is not a dict or `accounting` is not ``design`` or a model name.
    """
    if accounting != "design":
        from policyopt.models.markov_model import MarkovModelSpec

        try:
            ok = isinstance(accounting, str) and MarkovModelSpec.parse(accounting).kind != "auto"
        except InvalidInputError:
            ok = False
        if not ok:
            raise InvalidInputError(f"`accounting` must be 'design' or a model name such as 'chain' or 'order:2', got "
                                    f"{fmt(accounting)}")
    if not isinstance(obj, dict):
        raise InvalidInputError(f"`obj` must be the JSON object of `policyopt schedule --json`, got {fmt(obj)}")
    dep = obj.get("deployment") if isinstance(obj.get("deployment"), dict) else {}
    spec = dep.get("model") if isinstance(dep.get("model"), dict) else {}
    tv = str(spec.get("max_tv_source") or "chain")
    kind = str(spec.get("spec") or "").partition(":")[0]
    given = kind in ("two-state", "matrix") and dep.get("data") is None
    g = obj.get("guarantee") if isinstance(obj.get("guarantee"), dict) else {}
    name = ((g.get("model") or ("the given matrix" if kind == "matrix" else "the given chain")) if given else
            EMPIRICAL_PREMISE if tv.startswith("empirical") else accounting if accounting != "design" else "chain")
    if "guarantee" not in obj:
        return _verdict(name, "unchecked", "the schedule has no `guarantee`: written before policyopt checked Markov models "
                        "on held-out readings, so its model never was; treated as unchecked", f"{source} (old format)")
    mc = obj.get("model_check")
    if isinstance(mc, dict) and isinstance(mc.get("models"), list) and "passed" in mc:
        models = [m for m in mc["models"] if isinstance(m, dict)]
        chain = next((m for m in models if m.get("model") == "chain"), None)
        if tv.startswith("empirical"):  # Theorem 3 on the data's Δ̃(t) table rests on the Markov premise only
            mt = (chain or {}).get("markov_test") or mc.get("markov_test") or {}
            ok = isinstance(mt, dict) and mt.get("refuted") is False
            why = (f"held-out Markov test p = {fmt_value(mt['p_value'], 3)}, level {mt.get('level', 0.95):g}"
                   if isinstance(mt, dict) and isinstance(mt.get("p_value"), (int, float)) else "no Markov test recorded")
            return _verdict(name, "passed" if ok else "refuted", why, source)
        if accounting != "design":
            mine = next((m for m in models if m.get("model") == accounting), None)
            if mine is None:
                tried = ", ".join(f"{m.get('model')} ({m.get('verdict', 'passed' if m.get('passed') else 'refuted')})"
                                  for m in models) or "no model"
                what = "the first-order chains" if accounting == "chain" else f"the model {accounting}"
                return _verdict(name, "unchecked", f"the design checked {tried}, not {what} publish and the ledger "
                                "account with", source)
            return _verdict(name, "passed" if mine.get("passed") else "refuted", _check_why(mine), source)
        chosen = mc.get("chosen") or mc.get("model")
        pick = next((m for m in models if m.get("model") == chosen), None)
        if mc.get("passed") and pick is not None:
            return _verdict(str(chosen), "passed", _check_why(pick), source)
        if mc.get("requested") == "auto" or pick is None:
            names = "/".join(str(m.get("model")) for m in models) or "no model"
            return _verdict(names, "refuted", "; ".join(f"{m.get('model')}: {_check_why(m)}" for m in models)
                            or "no model passed", source)
        return _verdict(str(chosen), "refuted", _check_why(pick), source)
    if given:
        return _verdict(name, "assumed", "a model the designer gave without data: nobody checked it against readings", source)
    return _verdict(name, "unchecked", "the design's model check did not test the Markov property on held-out readings "
                    "(e.g. a design on Dask)", source)


def verdict_text(v: dict) -> str:
    """One line on a :func:`design_verdict` result: the model, its verdict in capitals unless passed, why, and whence."""
    word = v["verdict"] if v["verdict"] in ("passed", "assumed") else v["verdict"].upper()
    return f"{v['model']} {word} — {v['why']} ({v['source']})"


#: Bootstrap replicates of the held-out Δ(t) band of :func:`backtest` (the check at two or three lags needs few).
MAX_TV_BOOT = 100

#: Held-out-shaped data sets simulated from the training chains for the Monte Carlo test of :func:`max_tv_comparison`
#: (39: the smallest Monte Carlo p-value is 0.025, enough for a verdict at level 0.95).
MAX_TV_DRAWS = 39


@cached("backtest-max-tv")
def max_tv_comparison(train, held, fitted, design: dict, lags: list, *, level: float, seed: int,
                      n_boot: int = MAX_TV_BOOT, draws: int = MAX_TV_DRAWS) -> dict:
    """Δ(t) the design used against Δ(t) of the held-out readings, at the lags of eq. (30).

    The held-out readings are put on the design's quantile states (the chains `fitted` on the training part);
    :func:`policyopt.models.empirical.estimate_max_tv` gives the direct estimate Δ̂(t) (eq. (12), max over users) and
    its simultaneous block-bootstrap band at `level`, both reported.  Whether a lag *exceeds* (with confidence
    `level` the held-out data depend on the past more than the design assumed there, so its ε* is not a bound for
    them) is decided by one of two rules, by where the design's Δ came from:

    * **a chains' Δ** (the chains fitted on the training readings, or the design's chains as the schedule file
      records them): a Monte Carlo test of "the held-out readings follow the training chains".  The held-out Δ̂(t)
      at `lags` is compared with the same statistic on `draws` data sets of the held-out shape (its users, lengths
      and missing slots) simulated from each user's training chain
      (:func:`policyopt.models.chain_simulation.chain_statistic_draws`), family-wise over the lags by max-T
      (Westfall & Young 1993).  A lag exceeds when the test refutes at `level`, its Δ̂ is above the simulated
      sets' `level` quantile there and above the design's Δ.  The simulated statistic carries the plug-in TV's
      upward bias and the max over users at the held-out size; the band's lower end does not, which is why it is not
      the rule here: on 17 users × 2,000 slots of 3-state first-order chains, the same chains in both halves, the
      band's lower end lay above the training chains' Δ(1) in 29 of 200 data sets (14.5 %) at level 0.95, this test
      exceeded in 14 of 200 (7.0 %, 95 % Clopper–Pearson 3.9–11.5 %; ``tests/benchmarks/bench_backtest_max_tv.py``).
      The training chains are taken as the truth; a two-sample version (the chains refitted on a simulated first
      half in each replicate) exceeded in 6.5 % with a third less power (28.5 % against 39 % of data sets whose
      held-out chains are 30 % stickier), so it is not used.
    * **the data's upper band** Δ̃(t) (``--max-tv empirical``): a lag exceeds when the held-out band's lower end lies
      above Δ̃(t) — an upper band against a lower one (0 of the same 20 data sets exceeded).

    Parameters
    ----------
    train, held : pandas.DataFrame
        Training and held-out readings (columns user, time, value).
    fitted : FittedModel
        Chains fitted on `train` (their quantizer defines the states).
    design : dict
        ``{"source": str or None, "values": {lag: Δ}}`` from the schedule; lags it lacks take the chains'.
    lags : list of int
        Lags ≥ 1 (slots), e.g. A and S̄.
    level : float
        Level of the band and of the test.
    seed : int
        Seed of the bootstrap and of the simulation (simulation only, never released noise).
    n_boot : int
        Bootstrap replicates.
    draws : int
        Simulated data sets of the Monte Carlo test (≥ 1).

    Returns
    -------
    dict
        ``lags``, ``design_max_tv``, ``design_source``, ``held_out_max_tv``, ``held_out_lower``, ``held_out_upper``,
        ``level``, ``rule`` (``"monte-carlo"`` or ``"band"``), ``p_value`` and ``critical`` (the family-wise
        Monte Carlo p-value and, per lag, the simulated sets' `level` quantile; null under the band rule), ``draws``,
        ``exceeds`` (list of bool), ``holds`` (no lag exceeds), ``method`` (the rule and the band, in words).
    """
    from policyopt.io.schedule_design import BAND_SOURCE
    from policyopt.models.chain_simulation import chain_statistic_draws, user_streams
    from policyopt.models.empirical import estimate_max_tv
    from policyopt.models.row_tv import DEFAULT_MIN_PAIRS
    from policyopt.studies.check_model import data_states
    from policyopt.studies.markov_check import max_tv_check_result, simulated_critical

    states, users = data_states(held, fitted)
    K, L = fitted.quantizer.n_states, max(lags)
    est = estimate_max_tv(states, K, L, level=level, n_boot=n_boot, seed=seed)
    values, source = [], design.get("source")
    for t in lags:
        v = design.get("values", {}).get(t)
        if v is None:
            v = float(fitted.population.max_tv(t))
            source = source or "the chains fitted on the training readings"
        values.append(float(v))
    idx = [t - 1 for t in lags]
    lower = [float(est.lower[i]) for i in idx]
    estimate = [float(est.estimate[i]) for i in idx]
    out = {"lags": list(lags), "design_max_tv": values, "design_source": source, "held_out_max_tv": estimate,
           "held_out_lower": lower, "held_out_upper": [float(est.upper[i]) for i in idx], "level": float(est.level)}
    if source == BAND_SOURCE:
        exceeds = [lo > v for lo, v in zip(lower, values)]
        out.update(rule="band", p_value=None, critical=None, draws=None, exceeds=exceeds, holds=not any(exceeds),
                   method=f"a lag exceeds when the held-out band's lower end lies above the design's upper band; "
                          f"band: {est.method}")
        return out
    R = check_int(draws, "draws", 1)
    chain_of = dict(zip(fitted.users, fitted.population.chains))
    obs = est.estimate[idx]  # eq. (12)'s Δ̂(t), max over users: the statistic the simulated sets get
    sims = chain_statistic_draws([chain_of[u].P for u in users], states, K, L, min_pairs=DEFAULT_MIN_PAIRS, draws=R,
                                 rng=user_streams(users, int(seed), stream=7))[:, idx]
    test = max_tv_check_result(obs, sims, level=level, min_pairs=DEFAULT_MIN_PAIRS, model_name="chain",
                               reference="data sets of their shape simulated from each user's training chain",
                               lags=lags)
    critical = simulated_critical(sims, level)
    exceeds = [bool(test["refuted"] and o > c and o > v) for o, c, v in zip(obs, critical, values)]
    out.update(rule="monte-carlo", p_value=test["p_value"], critical=[float(c) for c in critical], draws=R,
               exceeds=exceeds, holds=not any(exceeds),
               method=(f"{test['method']}; a lag exceeds when the test refutes and its Δ̂ is above the simulated sets' "
                       f"level quantile and the design's Δ; band: {est.method}"))
    return out


def replay_errors(terms, A: int, S_bar: int, users: int, split: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per held-out slot: the slot, the age of the released value and the staleness of an I-user mean.

    Parameters
    ----------
    terms : SlotTerms
        Per-slot sums of the whole time range with ``max_age`` ≥ A + S̄ − 1.
    A, S_bar : int
        The schedule (slots).
    users : int
        I.
    split : int
        First held-out slot.

    Returns
    -------
    (times, ages, staleness) : ndarray (T_test,) each
        Slots where both terms are defined (≥ 2 users with readings at t − age and t).
    """
    sel = terms.times >= split
    idx = np.flatnonzero(sel)
    ages = int(A) + (terms.times[idx] - int(split)) % int(S_bar)
    self_t = terms.self_slot()[ages, idx]
    cross_t = terms.cross_slot()[ages, idx]
    st = cross_t + (self_t - cross_t) / users  # (R1) per slot
    ok = np.isfinite(st)
    return terms.times[idx][ok], ages[ok], st[ok]


def _given_schedule(schedule, users, unit: str, *, max_penalty, horizon, max_tv: str) -> tuple:
    """A schedule given to :func:`backtest`: (schedule fields, what is replayed, the JSON as given, its Δ(t) source,
    its design verdict, I, unit); refuses the options that only a design made here takes."""
    given = [f"`{k}` = {v!r}" for k, v in (("max_penalty", max_penalty), ("horizon", horizon)) if v is not None]
    if max_tv != "model":
        given.append(f"`max_tv` = {max_tv!r}")
    if given:
        raise InvalidInputError(f"{', '.join(given)} applies to a design made here; a given schedule carries its own")
    from policyopt.io.schedule_design import ScheduleDesign

    tv_source = ((schedule.get("deployment") or {}).get("model") or {}).get("max_tv_source") \
        if isinstance(schedule, dict) else None
    raw = schedule
    design = ScheduleDesign.from_json(schedule)  # the schedule file, read once
    sched, replayed = design.replay_fields(), design.replayed
    verdict = design_verdict(raw)
    I = users if users is not None else sched["users"]
    if I is None:
        raise InvalidInputError("the schedule records no deployment size (model.users); give `users`")
    return sched, replayed, raw, tv_source, verdict, I, unit or sched["unit"]


def _held_out_profile(terms, split: int, peak: int, phase_period, users: int, unit: str) -> tuple[dict, int]:
    """The held-out readings' staleness at the peak AoI, pooled and at the worst phase (as the design measures it),
    and the phase period used."""
    sel = terms.times >= split
    held = SlotTerms(terms.times[sel], terms.n[:, sel], terms.sum_sq[:, sel], terms.sum_d[:, sel], terms.n_users,
                     terms.value_range, terms.value_range_declared, terms.clipped)
    hm = readings_moments(None, held.max_age, phase_period=phase_period, terms=held)
    return ReadingsMSEPenalty(hm, users=users, unit=unit).phase_profile(peak), hm.phase_period


def _coverage_warning(coverage: dict, level: float) -> str:
    """The warning when the band of the current-mean interval's held-out coverage lies below its level."""
    worst = min(coverage["ci_coverage_parts"], key=lambda p: p["coverage"])
    return (f"the current-mean interval covered {100 * coverage['ci_coverage']:.1f} % of the held-out releases "
            f"({100 * level:g} % band up to {100 * coverage['ci_coverage_upper']:.1f} %), below its "
            f"{100 * coverage['ci_level']:g} % (worst {100 * worst['coverage']:.1f} % in slots {worst['first_slot']}.."
            f"{worst['last_slot']}): the held-out time changes more over A slots than the design's did (a season); "
            "design on readings that span the seasons, or publish with a higher --ci-level")


def _staleness_interval(st: np.ndarray, peak: int, *, level: float, reps: int, seed: int) -> tuple[tuple, dict]:
    """Two-sided percentile interval of the mean held-out staleness by the circular block bootstrap (``arch``), and
    the ``bootstrap`` record of the report; blocks of at least 2·peak AoI + 1 slots (an a-step change shares a reading
    with the change a slots away; :func:`~policyopt.models.arch_bootstrap.mean_interval`: a series without spread
    has its mean at both ends)."""
    from policyopt.models.arch_bootstrap import mean_interval

    block = max(block_length(st[:, None], st.size), min(2 * peak + 1, max(1, st.size // 2)))
    ci = mean_interval(st, block, reps=reps, level=level, seed=seed)
    info = {"method": "circular block bootstrap over held-out slots (arch.bootstrap.CircularBlockBootstrap)",
            "block_rule": "Politis-White (2004) / Patton-Politis-White (2009), arch.bootstrap.optimal_block_length "
                          "on the per-slot errors, and at least 2·peak AoI + 1 slots", "block_slots": int(block),
            "reps": int(reps), "level": float(level), "interval": "two-sided percentile", "seed": int(seed)}
    return ci, info


def backtest(data, schedule: dict | None = None, *, train_fraction: float = 0.5, users: int | None = None,
             value_range=None, phase_period: int | None = None, max_penalty: float | None = None, states: int = 3,
             smoothing: float = 0.01, A_max: int = 168, S_max: int = 168, level: float = DEFAULT_LEVEL,
             reps: int = BOOTSTRAP_REPS, seed: int = 0, unit: str = "", max_tv: str = "model",
             horizon: int | None = None, delta: float | None = None, slot_seconds: int | None = None,
             ci_level: float | None = None) -> dict:
    """Replay a schedule on the held-out part of the readings and report the realised MSE against f̄.

    Parameters
    ----------
    data : pandas.DataFrame
        Readings (columns user, time, value).
    schedule : dict, optional
        The JSON object of ``policyopt schedule --json``.  ``None``: design one on the first part
        (readings penalty at the worst of `phase_period` phases, chains with `states` quantile states for Δ(t)).
    train_fraction : float
        F in (0, 1): the first F of the time range trains, the rest is held out.
    users : int, optional
        Deployment size I (default: the schedule's, else the readings' users).
    value_range : (float, float), optional
        Public range (default: the schedule's declared range, else the readings' own, not private).
    phase_period : int, optional
        Phase period of the penalty designed here (slots; default none).
    max_penalty : float, optional
        f̄ of a design made here (default: the geometric midpoint of its trade-off range).
    states, smoothing, A_max, S_max
        Of a design made here.
    level : float
        Two-sided level of the interval.
    reps : int
        Bootstrap replicates.
    seed : int
        Seed of the bootstrap resampling (simulation only).
    unit : str
        Unit of the MSE for a design made here.
    max_tv : str
        Δ(t) of a design made here: ``"model"`` (the chains fitted on the first part) or ``"empirical[:LEVEL]"``, the
        upper edge of the LEVEL band of Δ(t) estimated from the first part's readings
        (:func:`policyopt.studies.empirical_design.empirical_design`, as ``schedule --max-tv empirical``); where no
        schedule has a finite ε* there, its horizon design (Theorem 3 over `horizon` slots, default the first part's
        length) is replayed.
    horizon : int, optional
        H of that horizon design (slots); only with ``max_tv`` empirical.
    delta : float, optional
        δ of the model-free guarantee of the replay (default: the schedule's ``guarantee_settings.delta``, else
        :func:`policyopt.privacy.model_free.default_delta` of the deployment's I).
    slot_seconds : int, optional
        Slot length (seconds): the w-event windows are a day and a week of slots (default: the schedule's
        ``deployment.slot_length``; unknown → 24 and 168 slots) and a design here checks lags up to a week; a day of
        slots is the phase period of the releases' current-mean interval.
    ci_level : float, optional
        Level of the releases' error bars whose coverage is measured on the held-out time
        (:func:`policyopt.utility.intervals.replay_coverage`; default
        :data:`~policyopt.utility.intervals.DEFAULT_CI_LEVEL`).

    Returns
    -------
    dict
        ``realized_mse``, ``realized_mse_lower``, ``realized_mse_upper``, ``realized_rmse``, ``max_penalty``,
        ``promised_mse`` (the schedule's penalty), ``holds`` (realised ≤ f̄), ``holds_upper`` (the interval's upper
        end ≤ f̄), ``train_fraction``, ``users``, ``split_slot``, ``held_out_slots``, ``schedule`` (A, S_bar,
        epsilon_c, peak_aoi, designed_here, max_tv_source: ``chain`` or ``empirical:LEVEL`` for a design made here,
        the file's ``deployment.model.max_tv_source`` else, replayed: ``schedule`` or ``horizon_design``),
        ``staleness`` and ``noise`` (the two parts of the realised MSE),
        ``at_peak_aoi`` (held-out staleness at the peak AoI: pooled and worst phase), ``bootstrap``, ``series``
        (slots and e_t, for the plot), ``value_range``, ``sensitivity``, ``unit``; the privacy of the replay:
        ``model_free`` (the model-free guarantee of its ⌈H/S̄⌉ releases over the held-out span of H slots),
        ``model_verdict`` (:func:`design_verdict` of the design's Markov model, with ``bound``: whether a model-based risk
        may be stated), ``guarantee`` (what is stated first, :func:`policyopt.studies.guarantee.choose_guarantee`),
        ``guarantee_settings`` (``delta``, ``dp_delta_source``, ``horizon``, ``windows``, ``slot_seconds``) and
        ``warnings``; the coverage of the releases' current-mean interval on the held-out time
        (:func:`policyopt.utility.intervals.replay_coverage`: ``ci_level``, ``ci_coverage``, ``ci_coverage_lower``,
        ``ci_coverage_upper``, ``ci_releases``, ``ci_coverage_parts``, ``ci_pooled``, ``ci_block``, ``ci_why``), a
        warning when its band lies below the level.

    Raises
    ------
    InvalidInputError
        Bad readings, fraction, schedule, `delta` or options; `max_penalty`, `max_tv` or `horizon` with a given
        schedule; a design here that has no schedule (infeasible or unbounded); too few held-out slots.
    """
    from policyopt.models.estimation import validate_readings

    start = time.perf_counter()
    df = validate_readings(data)
    times_all = df["time"].to_numpy()
    split = split_slot(times_all, train_fraction)
    designed_here = schedule is None
    replayed = "schedule"  # or "horizon_design" (ScheduleDesign.replayed)
    if designed_here:
        from policyopt.models.estimation import fit_population
        from policyopt.io.schedule_design import ScheduleDesign
        from policyopt.studies.empirical_design import empirical_design, parse_max_tv_source
        from policyopt.studies.schedule import design_schedule

        kind, tv_level = parse_max_tv_source(max_tv)
        if kind == "model" and horizon is not None:
            raise InvalidInputError(f"`horizon` = {horizon!r} applies to a design against Δ(t) from the data "
                                    "(`max_tv` empirical) only")
        train = df[df["time"] < split]
        fitted = fit_population(train, states, smoothing=smoothing, value_range=value_range, source="training readings")
        I = fitted.population.n_users if users is None else users
        pen = ReadingsMSEPenalty.from_readings(train, A_max + S_max + 1, users=I, value_range=value_range,
                                               phase_period=phase_period, unit=unit, design="auto")
        emp = (None if kind == "model" else
               empirical_design(fitted, train, A_max, S_max, tv_level, horizon=horizon, seed=seed))
        report = design_schedule(fitted.population if emp is None else emp.source, max_penalty=max_penalty, A_max=A_max,
                                 S_max=S_max, penalty=pen, empirical=emp)
        sched = report.to_dict()
        raw = sched
        design = ScheduleDesign.from_json(sched, "the schedule designed on the training readings")
        sched, replayed = design.to_dict(), design.replayed
        if sched["A"] is None or (sched["status"] not in ("optimal", "feasible") and replayed == "schedule"):
            raise InvalidInputError(f"the design on the first {train_fraction:g} of the readings has no schedule to replay "
                                    f"(status {sched['status']}): {sched['message']}")
        tv_source = "chain" if emp is None else emp.spec
        verdict = _design_here_verdict(train, fitted, value_range, A_max, S_max, slot_seconds, seed, smoothing, emp)
        sched = design.replay_fields()
        sched["value_range"] = value_range
        if emp is None:
            sched["design_max_tv"] = {"source": "the chains fitted on the training readings",
                                      "values": {t: float(fitted.population.max_tv(t)) for t in (sched["A"], sched["S_bar"])}}
    else:
        sched, replayed, raw, tv_source, verdict, I, unit = _given_schedule(schedule, users, unit, max_penalty=max_penalty,
                                                                            horizon=horizon, max_tv=max_tv)
        fitted = None
    vr = value_range if value_range is not None else sched["value_range"]
    A, S, eps = sched["A"], sched["S_bar"], sched["epsilon_c"]
    peak = A + S - 1
    terms = slot_terms(df, max(peak, 1), value_range=vr)
    lo, hi = terms.value_range
    sensitivity = (hi - lo) / I
    noise = 2.0 * (sensitivity / eps) ** 2  # Laplace(Δf/ε_C) has variance 2(Δf/ε_C)²
    t_held, ages, st = replay_errors(terms, A, S, I, split)
    if st.size < 8:
        raise InvalidInputError(f"only {st.size} held-out slots have readings of ≥ 2 users at both ends of the age; "
                                "lower `train_fraction` or give longer readings")
    ci, boot = _staleness_interval(st, peak, level=level, reps=reps, seed=seed)
    mean_st = float(np.mean(st))
    realized = mean_st + noise
    lower, upper = ci[0] + noise, ci[1] + noise
    # the held-out staleness at the peak AoI, pooled and at the worst hour (as the design measures it)
    prof, held_period = _held_out_profile(terms, split, peak, phase_period, I, unit)
    f_bar = sched["max_penalty"]
    lags = sorted({A, S} - {0})
    comparison = None
    train_df, held_df = df[df["time"] < split], df[df["time"] >= split]
    left_out = _left_out_users(df, train_df, held_df, split)
    if lags:
        if fitted is None:
            from policyopt.models.estimation import fit_population

            fitted = fit_population(train_df, sched["states"] or 3, smoothing=sched["smoothing"] or 0.01, value_range=vr,
                                    source="training readings")
        comparison = max_tv_comparison(train_df, held_df, fitted, sched["design_max_tv"], lags, level=level, seed=seed)
    privacy = _replay_guarantee(raw, replayed, verdict, eps, S, held_span=int(np.max(times_all)) - int(split) + 1,
                                users=int(I), delta=delta, slot_seconds=slot_seconds)
    coverage = replay_coverage(df, A=A, S_bar=S, split=split, epsilon_c=eps, value_range=(lo, hi),
                               level=DEFAULT_CI_LEVEL if ci_level is None else ci_level,
                               slot_seconds=privacy["guarantee_settings"]["slot_seconds"], band_level=level, reps=reps,
                               seed=seed)
    if coverage["ci_coverage_upper"] is not None and coverage["ci_coverage_upper"] < coverage["ci_level"]:
        privacy["warnings"].append(_coverage_warning(coverage, level))
    return {
        "realized_mse": realized,
        "realized_mse_lower": lower,
        "realized_mse_upper": upper,
        "realized_rmse": math.sqrt(realized),
        "max_penalty": f_bar,
        "promised_mse": sched["promised"],
        "holds": bool(realized <= f_bar),
        "holds_upper": bool(upper <= f_bar),
        "train_fraction": float(train_fraction),
        "users": int(I),
        "split_slot": int(split),
        "held_out_slots": int(st.size),
        "schedule": {"A": A, "S_bar": S, "epsilon_c": eps, "peak_aoi": peak, "designed_here": designed_here,
                     "penalty": sched["penalty"], "max_tv_source": tv_source, "replayed": replayed},
        "staleness": mean_st,
        "noise": noise,
        "at_peak_aoi": {"age": peak, "pooled": prof["pooled"] + noise, "worst_phase": prof["worst"] + noise,
                        "worst_phase_index": prof["worst_phase"], "phase_period": held_period},
        "bootstrap": boot,
        "series": {"time": t_held.tolist(), "age": ages.tolist(), "mse": (st + noise).tolist()},
        "value_range": [lo, hi],
        "value_range_declared": terms.value_range_declared,
        "sensitivity": sensitivity,
        "unit": unit,
        "replay": "releases at S_n = split + n·S̄ of the readings of S_n − A; the value read at t is A + ((t − split) mod S̄) "
                  "slots old; error against the current mean of I users drawn like the readings' users",
        "max_tv_comparison": comparison,
        "left_out_users": left_out,
        **coverage,
        **privacy,
        "wall_time_s": time.perf_counter() - start,
    }


def _design_here_verdict(train, fitted, value_range, A_max: int, S_max: int, slot_seconds, seed: int, smoothing: float,
                         emp) -> dict:
    """The design-time check of a design made on the training part (what ``schedule`` runs): the first-order chains
    tested on held-out time of the training readings (:func:`policyopt.studies.markov_check.design_check`); for an
    empirical design only the Markov premise (the G² test) counts, as in ``schedule``."""
    from policyopt.studies.empirical_design import box_last_age
    from policyopt.studies.markov_check import design_check

    sel = design_check(train, fitted.quantizer, fitted.users, spec="chain", value_range=value_range,
                       box_last_age=box_last_age(A_max, S_max), slot_seconds=slot_seconds, seed=seed, smoothing=smoothing)
    c = sel.chosen if sel.chosen is not None else (sel.checks[-1] if sel.checks else None)
    where = "design-time check on the training part"
    if c is None:
        return _verdict("chain", "unchecked", "too few training readings for a held-out check", where)
    if emp is not None:
        mt = c.markov_test
        return _verdict(EMPIRICAL_PREMISE, "refuted" if mt["refuted"] else "passed",
                        f"held-out Markov test p = {fmt_value(mt['p_value'], 3)}, level {mt['level']:g}", where)
    return _verdict(c.model, "passed" if sel.passed else "refuted", c.why(), where)


def _replay_guarantee(obj: dict, replayed: str, verdict: dict, epsilon_c: float, S_bar: int, *, held_span: int,
                      users: int, delta, slot_seconds) -> dict:
    """``model_free``, ``model_verdict``, ``guarantee``, ``guarantee_settings`` and ``warnings`` of a replay.

    The model-free guarantee covers the ⌈H/S̄⌉ releases over the held-out span of H slots; the model-based risk is
    the design's ε* (eq. (30)) or, for a replayed horizon design accounted by Theorem 3, its largest risk over its
    horizon; :func:`policyopt.studies.guarantee.choose_guarantee` decides which is stated first.
    """
    from policyopt.io import parse_duration
    from policyopt.privacy.model_free import check_delta, default_delta
    from policyopt.studies.guarantee import choose_guarantee, default_windows, schedule_model_free

    gs = obj.get("guarantee_settings") if isinstance(obj.get("guarantee_settings"), dict) else {}
    if delta is not None:
        d, d_src = check_delta(delta), "given"
    elif isinstance(gs.get("delta"), (int, float)) and not isinstance(gs.get("delta"), bool) and 0 < gs["delta"] < 1:
        d, d_src = float(gs["delta"]), "the schedule's guarantee_settings.delta"
    else:
        d, d_src = default_delta(users), f"default min(1e-6, 1/(10·I)) with I = {users}"
    if slot_seconds is None:
        length = (obj.get("deployment") or {}).get("slot_length") if isinstance(obj.get("deployment"), dict) else None
        if isinstance(length, str):
            slot_seconds = parse_duration(length, "the schedule's deployment.slot_length")
    windows = default_windows(slot_seconds)
    mf = schedule_model_free(epsilon_c, S_bar, horizon=held_span, delta=d, windows=windows)
    model_eps, model_h = obj.get("peak_risk"), None
    hd = obj.get("horizon_design")
    if replayed == "horizon_design" and isinstance(hd, dict):
        model_eps = hd.get("horizon_risk") if hd.get("accounting", "theorem-3") == "theorem-3" else None
        model_h = hd.get("horizon") if model_eps is not None else None
    if not (isinstance(model_eps, (int, float)) and not isinstance(model_eps, bool) and math.isfinite(model_eps)):
        model_eps, model_h = None, None
    g, stated, warns = choose_guarantee(model=verdict["model"], verdict=verdict["verdict"], why=verdict["why"],
                                        model_free=mf, model_epsilon=model_eps, model_horizon=model_h)
    return {
        "model_free": mf,
        "model_verdict": {**verdict, "bound": verdict["verdict"] in ("passed", "assumed")},
        "guarantee": None if g is None else g.to_dict(),
        "guarantee_settings": {"delta": d, "dp_delta_source": d_src, "horizon": int(held_span),
                               "horizon_source": "the held-out span (slots from the split to the last reading)",
                               "windows": list(windows), "slot_seconds": slot_seconds},
        "warnings": warns,
    }


def _left_out_users(df, train, held, split: int) -> list:
    """Users of `df` with no reading on one side of the split: ``[{"user", "why"}]``, in the data's order.

    Such a meter adds nothing to the held-out error (or to the training fit) and is not in the held-out Δ(t)
    comparison; the report lists it instead of failing.
    """
    have_train, have_held = set(train["user"].unique()), set(held["user"].unique())
    out = []
    for u in dict.fromkeys(df["user"].tolist()):
        if u not in have_held:
            out.append({"user": u, "why": f"no held-out readings: its readings end before slot {split}"})
        elif u not in have_train:
            out.append({"user": u, "why": f"no training readings: its readings start at or after slot {split}"})
    return out


def backtest_verdict(r: dict) -> str:
    """Whether the realised MSE of :func:`backtest`'s result `r` met f̄, in words (point estimate and interval)."""
    if r["realized_mse_lower"] == r["realized_mse_upper"]:  # no spread (interval_text says why)
        return "holds: the MSE is at or below f̄" if r["holds"] else "FAILS: the realised MSE exceeds f̄"
    return ("holds: the whole interval is at or below f̄" if r["holds_upper"] else
            "holds at the point estimate; the interval reaches above f̄" if r["holds"] else
            "FAILS: the realised MSE exceeds f̄")


def max_tv_comparison_text(c: dict) -> str:
    """Δ at the design's lags against the held-out direct estimate and its band (``max_tv_comparison`` of
    :func:`backtest`), and what that means for the design's ε*, in one line.

    The design's Δ is printed rounded up (it is the bound the design used), the held-out numbers to nearest; under
    the Monte Carlo rule each lag also shows the `level` quantile of the data sets simulated from the training
    chains, and the verdict the family-wise p-value.  Three verdicts: some lag exceeds (its ε* is no bound there);
    the design's Δ is at or above the whole band at every lag (the held-out data are covered); otherwise not
    refuted, not confirmed.
    """
    mc = c.get("rule") == "monte-carlo"
    pct = f"{100 * c['level']:g}%"
    parts = []
    for k, (t, d, e, lo, hi) in enumerate(zip(c["lags"], c["design_max_tv"], c["held_out_max_tv"], c["held_out_lower"],
                                                c["held_out_upper"])):
        sim = f"; {pct} of data from the training chains ≤ {fmt_value(c['critical'][k], 3)}" if mc else ""
        parts.append(f"lag {t}: design {fmt_upper(d, 3)}, held-out {fmt_value(e, 3)} ({pct} band "
                     f"{fmt_band(lo, hi, digits=3)}{sim})")
    p = f" (Monte Carlo p = {fmt_value(c['p_value'], 3)})" if mc else ""
    if not c["holds"]:
        verdict = (f"the held-out data depend on the past more than the design assumed{p}: its ε* is no bound for "
                   "them")
    elif all(d >= hi for d, hi in zip(c["design_max_tv"], c["held_out_upper"])):
        verdict = f"the design's Δ is above the whole held-out band at these lags: the held-out data are covered{p}"
    else:
        verdict = (f"not refuted{p}, not confirmed" if mc else
                   "the design's Δ lies inside the held-out band at these lags: not refuted, not confirmed")
    return "; ".join(parts) + " — " + verdict


def mse_text(r: dict, key: str = "realized_mse") -> str:
    """A backtest's MSE `key` (``realized_mse``, ``realized_mse_lower``, …) printed to 4 significant digits, or more
    where 4 would put it on the other side of f̄ as printed (6 digits): 0.00424396 against f̄ = 0.00424396 holds,
    where 0.004244 would read as above it."""
    x, bound = float(r[key]), float(r["max_penalty"])
    shown_bound = float(fmt_value(bound))
    d = 4
    while d < 17 and (float(fmt_value(x, d)) <= shown_bound) != (x <= bound):
        d += 1
    return fmt_value(x, d)


def interval_text(r: dict, what: str, *, unit: str = "") -> str:
    """The bootstrap interval of a backtest's realised MSE (`what` ``"mse"``) or its band of the releases'
    current-mean coverage (``"coverage"``, in percent), as text: ``"95% interval LO–HI kWh^2"``, or why it has no
    width.  A replay with no staleness (A = 0, S̄ = 1) has an error that is the noise alone, whose variance and
    coverage are known exactly: every replicate gives the same value, and the text says so rather than print a
    range whose ends are equal (the "0.0364–0.0364" of issue 33).

    Parameters
    ----------
    r : dict
        The dict of :func:`backtest`.
    what : {"mse", "coverage"}
    unit : str
        Printed after the range (``" kWh^2"``).
    """
    level = f"{100 * r['bootstrap']['level']:g}%"
    if what == "mse":
        span = fmt_span(r["realized_mse_lower"], r["realized_mse_upper"], digits=4)
        kind, value = "interval", "the MSE"
    else:
        span = fmt_span(r["ci_coverage_lower"], r["ci_coverage_upper"], digits=3, scale=100.0)
        unit, kind, value = " %", "band", "the coverage"
    if span is not None:
        return f"{level} {kind} {span}{unit}"
    s = r["schedule"]
    if r["staleness"] == 0:
        return (f"exact: A = {s['A']} and S̄ = {s['S_bar']} leave no staleness, so {value} is the noise's alone, which "
                "is known exactly")
    return f"exact: all {r['bootstrap']['reps']} bootstrap replicates give the same value"


def _schedule_origin(s: dict) -> str:
    """Where the replayed schedule came from, in words (the ``schedule`` object of :func:`backtest`)."""
    what = "the horizon design, no finite ε*; " if s.get("replayed") == "horizon_design" else ""
    where = "designed on the training part" if s["designed_here"] else "from --schedule"
    tv = s.get("max_tv_source")
    against = ("" if tv is None else " against the chains' Δ(t)" if tv == "chain" else
               f" against the data's Δ(t), {tv}" if str(tv).startswith("empirical") else f" against Δ(t) {tv}")
    return f"{what}{where}{against}"


def format_backtest(r: dict) -> str:
    """The text ``policyopt backtest`` prints, from the dict of :func:`backtest` (without ``series``)."""
    u = f" {r['unit']}" if r.get("unit") else ""
    s = r["schedule"]
    b = r["bootstrap"]
    verdict = backtest_verdict(r)
    from policyopt.studies.guarantee import guarantee_lines

    lines = ["policyopt backtest: the schedule replayed on held-out readings (Zhang et al. 2024, problem (28))",
             *guarantee_lines(r)]
    lines += [
        f"split       : train on slots before {r['split_slot']} (fraction {r['train_fraction']:g}), replay on "
        f"{fmt_count(r['held_out_slots'], 'held-out slot')}",
        f"schedule    : A = {fmt_count(s['A'], 'slot')}, S̄ = {fmt_count(s['S_bar'], 'slot')}, ε_C = {fmt_epsilon_c(s['epsilon_c'])} nats "
        f"({_schedule_origin(s)}); peak AoI {s['peak_aoi']}",
        f"deployment  : I = {fmt_count(r['users'], 'user')} drawn like the readings' users; Δf = (HI − LO)/I = {fmt_value(r['sensitivity'])}",
        f"realised MSE: {mse_text(r)}{u} (RMSE {fmt_value(r['realized_rmse'], 4)}), "
        f"{interval_text(r, 'mse', unit=u)} (staleness {fmt_value(r['staleness'], 4)} + noise {fmt_value(r['noise'], 4)})",
        f"bound       : f̄ = {fmt_value(r['max_penalty'])}{u}; "
        + (f"the design promised {fmt_value(r['promised_mse'], 4)}{u}" if r.get("promised_mse") is not None
           else "the schedule file records no promised MSE"),
        f"peak AoI    : held-out MSE at age {r['at_peak_aoi']['age']}: {fmt_value(r['at_peak_aoi']['pooled'], 4)}{u} over all "
        f"slots, {fmt_value(r['at_peak_aoi']['worst_phase'], 4)}{u} at the worst of "
        f"{fmt_count(r['at_peak_aoi']['phase_period'], 'phase')}",
        f"verdict     : {verdict}",
        f"bootstrap   : {b['method']}, blocks of {fmt_count(b['block_slots'], 'slot')}, {b['reps']} replicates, seed {b['seed']}",
    ]
    c = r.get("max_tv_comparison")
    if c:
        lines.append(f"Δ(t)        : {max_tv_comparison_text(c)}")
    if r.get("model_verdict"):
        lines.append(f"model check : {verdict_text(r['model_verdict'])}")
    if r.get("ci_coverage") is not None:
        band = interval_text(r, "coverage")
        how = ("" if r["ci_coverage_lower"] == r["ci_coverage_upper"] else  # no width: no resampling to describe
               f"; circular block bootstrap, blocks of {fmt_count(r['ci_block'], 'release')}; exact in the noise")
        lines.append(f"error bars  : the {100 * r['ci_level']:g} % current-mean interval of the releases covered the held-out "
                     f"current mean in {100 * r['ci_coverage']:.1f} % of {fmt_count(r['ci_releases'], 'replayed release')} "
                     f"({band}{how}); by "
                     "part of the held-out time " + ", ".join(f"{100 * p['coverage']:.1f} %" for p in r["ci_coverage_parts"]))
    elif r.get("ci_why"):
        lines.append(f"error bars  : no current-mean interval to check: {r['ci_why']}")
    for u in r.get("left_out_users") or []:
        lines.append(f"left out    : {u['user']} ({u['why']})")
    for w in r.get("warnings") or []:
        lines.append(f"warning     : {w}")
    if r.get("plot"):
        lines.append(f"plot        : {r['plot']} (realised error over the held-out time)")
    lines.append(f"wall time   : {r['wall_time_s']:.3f} s")
    return check_text("\n".join(lines))


def plot_backtest(r: dict, path, *, phase_period: int = 24) -> None:
    """Draw the realised error over the held-out time (per-slot and its mean per `phase_period` slots) against f̄.

    Raises
    ------
    BackendUnavailableError
        Without matplotlib.
    """
    from policyopt.studies.plots import require_matplotlib

    require_matplotlib("--plot")
    from matplotlib.figure import Figure

    t = np.asarray(r["series"]["time"], dtype=float)
    e = np.asarray(r["series"]["mse"], dtype=float)
    P = max(1, int(phase_period))
    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(t, e, color="0.75", lw=0.4, label="per-slot estimate at the slot's AoI (pair products: may dip below 0)")
    if t.size >= P:
        k = t.size // P
        ax.plot(t[: k * P].reshape(k, P).mean(axis=1), e[: k * P].reshape(k, P).mean(axis=1), color="0.1", lw=1.2,
                label=f"mean over {P} slots")
    ax.axhline(r["max_penalty"], color="0.0", ls="--", lw=1.2, label="bound f̄")
    ax.axhspan(r["realized_mse_lower"], r["realized_mse_upper"], color="0.5", alpha=0.3,
               label=f"realised MSE, {100 * r['bootstrap']['level']:g}% interval")
    top = max(float(np.quantile(e, 0.995)), 1.5 * r["max_penalty"], r["realized_mse_upper"] * 1.2)
    ax.set_ylim(min(0.0, float(np.quantile(e, 0.005))), top)  # linear: per-slot cross terms can be negative
    u = f" ({r['unit']})" if r.get("unit") else ""
    ax.set_xlabel("held-out slot")
    ax.set_ylabel(f"MSE of the released value{u}")
    s = r["schedule"]
    ax.set_title(f"Backtest: A = {s['A']}, S̄ = {s['S_bar']}, I = {r['users']}; realised {r['realized_mse']:.3g} vs f̄ "
                 f"{r['max_penalty']:.3g}")
    ax.legend(loc="upper right", fontsize=8)
    fig.savefig(str(path), dpi=120)
