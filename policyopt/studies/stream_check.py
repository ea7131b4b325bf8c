"""Check the design's model on a production stream's own readings, as the stream grows.

A schedule designed on a pilot rests on a claim about users like the pilot's: their readings follow the design's
Markov model (Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024,
Theorem 3 holds "if the process {X_t} is Markovian"), with a Δ(t) (eq. (12)) no larger than the one the design
used.  ``publish`` receives the deployment's stream, which is other data, so the design's check on the pilot's
held-out time says nothing about it.  :func:`stream_model_check` tests both parts of the claim on the stream's
readings so far, on the design's quantile states:

1. **The Markov premise, on held-out time of the stream** (:func:`policyopt.studies.markov_check.design_check` with
   the design's model class): each stream user's series is cut at half its span, the model class is fitted on the
   first part and checked on the rest by the held-out G² Markov test (lags up to a week of slots) and, for a model
   whose Δ(t) is its own (the chains), the Δ(t) check against data sets simulated from the fit.
2. **The stream's Δ(t) against the pilot's chains** (first-order accounting only), a Monte Carlo test of "the
   stream's users are users like the pilot's": the direct estimate Δ̂(t) = max_u Δ̂_u(t) of eq. (12) on all the
   stream's readings so far, at lags 1..max(A + S̄ − 1, S̄) (every lag the schedule's risk uses,
   :func:`policyopt.studies.markov_check.schedule_lags`), against the same statistic on R data sets of the stream's
   shape (its users, lengths and missing slots) in which each stream user follows the chain of a pilot user drawn at
   random (:func:`policyopt.models.chain_simulation.chain_statistic_draws`); family-wise over the lags by max-T
   (Westfall & Young 1993).  The simulated statistic carries the plug-in TV's upward bias and the max over users at the
   stream's own size, which a bootstrap band of the max does not: at 20 users × 750 slots of a chain with
   Δ(2) = 0.64 the band's lower end was 0.69.  A stream user who depends on its past more than the pilot's users
   raises the max and refutes.

Verdict: ``refuted`` when a test refutes at the level; ``passed`` when none does and the stream's held-out part
reaches every lag the design's own check tests (a week of slots, 168 when the slot length is unknown, and the
schedule's ages A + S̄, plus the two slots of a triple): a check on fewer slots cannot refute a weekly routine, so
"not refuted" would say little; ``unchecked`` when the stream is too short for that, or (for a richer model: ``order:K``, ``phase:P``, ``hmm:R``) when part 1 passes, because the
design's Δ_Z(t) of the augmented chain is not compared with the stream's.  Each test alone refutes a true model in
about 1 − level of streams; all of them together in at most 3(1 − level) (Bonferroni), and a refutation only costs the
model-based headline (the model-free guarantee holds either way).  ``publish`` re-runs the check whenever the stream
has grown past the slot of the last check and records each verdict in the ledger; a model-based risk is stated only
while the latest verdict is ``passed``.
"""

from __future__ import annotations

import time

import numpy as np

from policyopt.errors import InvalidInputError, check_int
from policyopt.formatting import fmt_value

__all__ = ["stream_model_check", "pilot_comparison", "not_run_record", "stream_verdict", "stream_check_text"]


def _verdict_why(held: dict | None, comparison: dict | None, first_order_table: bool) -> tuple[list, list]:
    """(refuted parts, passed parts) of a stream check, each a phrase."""
    refuted, passed = [], []
    if held is not None:
        mt, mv = held["markov_test"], held["max_tv_check"]
        phrase = f"held-out Markov test p = {fmt_value(mt['p_value'], 3)}"
        (refuted if mt["refuted"] else passed).append(phrase + (f" (worst lag {mt['worst_lag']})" if mt["refuted"] else ""))
        if not first_order_table:
            phrase = f"Δ(t) check p = {fmt_value(mv['p_value'], 3)}"
            (refuted if mv["refuted"] else passed).append(phrase + (f" (worst lag {mv['worst_lag']})" if mv["refuted"]
                                                                   else ""))
    if comparison is not None:
        phrase = f"Δ̂(t) against the pilot's chains p = {fmt_value(comparison['p_value'], 3)}"
        if comparison["refuted"]:
            refuted.append(phrase + f" (worst lag {comparison['worst_lag']}: Δ̂ = "
                           f"{fmt_value(comparison['estimate'], 4)} above the {fmt_value(comparison['critical'], 4)} of "
                           "users like the pilot's)")
        else:
            passed.append(phrase)
    return refuted, passed


def stream_model_check(readings, quantizer, *, model: str, spec: str = "chain", first_order_table: bool = False,
                       pilot_chains=None, A: int, S_bar: int, through: int, value_range=None,
                       slot_seconds: int | None = None, level: float = 0.95, draws: int = 39, seed: int = 0,
                       smoothing: float = 0.01) -> dict:
    """The design's model checked on a stream's own readings through slot `through` (see the module docstring).

    Parameters
    ----------
    readings : pandas.DataFrame
        The stream: user, time (integer slots of the schedule's slot length), value; rows after `through` are left
        out.
    quantizer : policyopt.models.estimation.Quantizer
        The design's quantile states (its chains' fit on the pilot).
    model : str
        The accounting model as the guarantee names it (the verdict's ``model``).
    spec : str
        Its Markov model class: ``chain``, ``order:K``, ``phase:P`` or ``hmm:R``.
    first_order_table : bool
        The accounting's Δ(t) is a table of the design's data (``schedule --max-tv empirical``): of part 1 only the
        Markov test counts, as in the design's own check.
    pilot_chains : sequence of numpy.ndarray, shape (K, K), optional
        The design's fitted first-order chains P_u, one per pilot user (required for a first-order ``spec``).
    A, S_bar : int
        The schedule (slots; A ≥ 0, S̄ ≥ 1).
    through : int
        Last slot of the stream checked.
    value_range : (float, float), optional
        The schedule's public range (readings are clipped into it, as for the releases).
    slot_seconds : int, optional
        Slot length in seconds (a week of lags for the Markov test; unknown → 168 lags).
    level : float
        Level of each test, in (0, 1).
    draws : int
        Data sets R ≥ 1 simulated for each Monte Carlo test (39: p-values in steps of 0.025).
    seed : int
        Seed of the simulated data sets and of the bootstrap (simulation only, never released noise).
    smoothing : float
        Pseudo-count of the fits on the stream.

    Returns
    -------
    dict
        JSON-ready: ``model``, ``verdict`` (``passed``/``refuted``/``unchecked``), ``why``, ``source``, ``through``,
        ``users``, ``readings``, ``markov_model``, ``level``, ``held_out_check``
        (:meth:`policyopt.studies.markov_check.MarkovModelCheck.to_dict`, or null), ``max_tv_comparison``
        (:func:`pilot_comparison`, or null), ``method`` and ``wall_time_s``.

    Raises
    ------
    InvalidInputError
        A bad argument (a stream too short to test is a verdict ``unchecked``, not an error).
    """
    from policyopt.models.estimation import readings_states, validate_readings
    from policyopt.models.markov_test import default_markov_lags
    from policyopt.studies.markov_check import design_check, periods_from_slot, schedule_lags

    start = time.perf_counter()
    check_int(A, "A", 0)
    check_int(S_bar, "S_bar", 1)
    check_int(through, "through", 0)
    check_int(draws, "draws", 1)
    first_order = spec == "chain"
    if first_order and not pilot_chains:
        raise InvalidInputError("`pilot_chains` is required for a first-order model: the design's fitted chains")
    df = validate_readings(readings, source="the stream's readings")
    df = df[df["time"] <= int(through)]
    if value_range is not None:
        df = df.assign(value=np.clip(df["value"].to_numpy(), *value_range))
    users = sorted(df["user"].unique().tolist())
    record = {"model": model, "source": f"publish: the stream's own readings through slot {int(through)}",
              "through": int(through), "users": len(users), "readings": int(len(df)), "markov_model": spec,
              "level": float(level), "held_out_check": None, "max_tv_comparison": None}
    held = comparison = None
    why_unchecked = None
    try:
        if not users:
            raise InvalidInputError("no reading")
        sel = design_check(df, quantizer, users, spec=spec, value_range=value_range, box_last_age=int(A) + int(S_bar),
                           slot_seconds=slot_seconds, level=level, draws=draws, seed=seed, smoothing=smoothing)
        held = sel.checks[0].to_dict() if sel.checks else None
        if first_order:
            states = readings_states(df, quantizer, users)
            comparison = pilot_comparison(states, int(quantizer.n_states), pilot_chains, users,
                                          max(schedule_lags(A, S_bar)), level=level, draws=draws, seed=seed)
    except InvalidInputError as exc:
        why_unchecked = f"too few readings for a check: {exc}"
    record.update(held_out_check=held, max_tv_comparison=comparison)
    refuted, passed = _verdict_why(held, comparison, first_order_table)
    # every lag the design's own check tests (a week, the schedule's ages), uncapped by the series, plus a triple
    need = default_markov_lags(periods_from_slot(slot_seconds)[1], int(A) + int(S_bar), 2**62) + 2
    if held is not None and held["test_slots"] < need and why_unchecked is None:
        why_unchecked = (f"too few readings for a conclusive check: the stream's held-out part has {held['test_slots']} "
                         f"slots, fewer than the {need} the Markov test at lags 1..{need - 2} needs (a week of slots "
                         "and the schedule's ages)")
    if refuted:
        verdict, why = "refuted", "; ".join(refuted) + (f" (level {level:g})")
    elif why_unchecked is not None or held is None:
        verdict, why = "unchecked", why_unchecked or "no check ran on the stream's readings"
    elif not first_order:
        verdict, why = "unchecked", (f"{'; '.join(passed)}, but the design's Δ_Z(t) of {spec} is not compared with "
                                     "the stream's (only first-order accounting is): accounted model-free")
    else:
        verdict, why = "passed", "; ".join(passed) + f" (level {level:g} each)"
    record.update(verdict=verdict, why=why + f"; {len(users)} users, {int(len(df))} readings",
                  method=("the design's model class fitted on the first half of each stream user's series and checked "
                          "on the rest (held-out G² Markov test and Δ(t) check), and the stream's Δ̂(t) (eq. (12), max "
                          "over users) against data sets of its shape simulated from the pilot's chains"),
                  wall_time_s=time.perf_counter() - start)
    return record


def pilot_comparison(states, n_states: int, pilot_chains, users, max_lag: int, *, level: float, draws: int,
                     seed: int) -> dict:
    """Part 2 of the module docstring: the stream's Δ̂(t) against data sets of its shape from the pilot's chains.

    Parameters
    ----------
    states : numpy.ndarray of int64, shape (U, T)
        The stream on the design's quantile states (−1 missing).
    n_states : int
        K.
    pilot_chains : sequence of numpy.ndarray, shape (K, K)
        The pilot's fitted chains.
    users : sequence of str
        The stream's users (rows of `states`), whose names key their random streams.
    max_lag : int
        L ≥ 1, below T.
    level : float
        Family-wise level in (0, 1).
    draws : int
        R ≥ 1 simulated data sets.
    seed : int
        Seed of the simulation (never released noise).

    Returns
    -------
    dict
        :func:`policyopt.studies.markov_check.max_tv_check_result` (``p_value``, ``worst_lag``, ``estimate``,
        ``critical``, ``refuted``, …), its ``method`` naming the pilot's chains.
    """
    from policyopt.models.chain_simulation import chain_statistic_draws, user_streams
    from policyopt.models.row_tv import DEFAULT_MIN_PAIRS, max_tv_statistic
    from policyopt.studies.markov_check import max_tv_check_result

    K, L, R = int(n_states), int(max_lag), int(draws)
    if L >= states.shape[1]:
        raise InvalidInputError(f"the stream has {states.shape[1]} slots: too few for lags 1..{L}")
    obs = max_tv_statistic(states, K, L, min_pairs=DEFAULT_MIN_PAIRS).max(axis=0)
    streams = user_streams(users, int(seed), stream=6)
    pick = np.random.default_rng([int(seed), 6])  # which pilot user each stream user follows, draw by draw
    chains = [np.asarray(P, dtype=float) for P in pilot_chains]
    sims = np.zeros((R, L))
    for r in range(R):
        idx = pick.integers(0, len(chains), size=len(users))
        sims[r] = chain_statistic_draws([chains[i] for i in idx], states, K, L, min_pairs=DEFAULT_MIN_PAIRS, draws=1,
                                        rng=streams)[0]
    return max_tv_check_result(obs, sims, level=level, min_pairs=DEFAULT_MIN_PAIRS, model_name="chain",
                               readings="the stream's readings",
                               reference=("data sets of the stream's shape in which each user follows the chain of a "
                                          "pilot user drawn at random (the design's chains)"))


def stream_verdict(record: dict) -> dict:
    """The verdict (``model``, ``verdict``, ``why``, ``source``) a stream check `record` gives the guarantee."""
    return {k: str(record[k]) for k in ("model", "verdict", "why", "source")}


def not_run_record(model: str, spec: str, through: int, why: str) -> dict:
    """A stream check record (the keys of :func:`stream_model_check`'s) for a check that did not run: ``unchecked``."""
    return {"model": model, "verdict": "unchecked", "why": why, "source": "publish: the stream's own readings",
            "through": int(through), "users": None, "readings": None, "markov_model": spec, "level": None,
            "held_out_check": None, "max_tv_comparison": None, "method": None, "wall_time_s": 0.0, "recorded_at": None}


def stream_check_text(record: dict, *, reused: bool = False, runs: int | None = None) -> str:
    """The ``stream check`` line: the verdict as every verdict line prints it
    (:func:`policyopt.studies.backtest.verdict_text`), then whether it was reused (the stream has not grown since)
    and how many checks the ledger holds."""
    from policyopt.studies.backtest import verdict_text

    when = (" — recorded before: the stream has not grown since" if reused else "")
    n = "" if runs is None else f"; {runs} check{'s' if runs != 1 else ''} recorded"
    return f"{verdict_text(stream_verdict(record))}{when}{n}"
