"""The accounting of the releases a ledger records: their age-dependent risk, the guarantee that needs no model,
and what a schedule's own numbers are under the accounting model.

The risk of the releases actually made (:func:`risk_of_rows`) is Theorem 3 of Zhang, Wei, Berry, Huang,
"Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (25), evaluated by
:func:`policyopt.privacy.age_dependent.compose` with each release's own publishing time S_n, aging
A_n = S_n − (input time) and budget (OpenDP's privacy map of the measurement actually used,
which is ≥ the nominal ε_C).  Skipped releases are not releases: they change the trajectory
only by their absence.  Where the paper writes ε(S_n − A_n) for the leakage about the n-th
input, the code uses the leakage of queries 1..n−1 about X_{S_n − A_n} (the previous epoch's
formula at S_n − A_n), which is what the proof (Appendix E, (63b)) bounds and which differs
from the trajectory value at time S_n − A_n when A_n exceeds the inter-publish time.  The
designed peak (:func:`designed_risks`) is Proposition 3, eq. (30), under condition (31).

Theorem 3 assumes the readings are a Markov chain with the model's Δ(t).  The guarantee that needs no
model is :func:`model_free_of_rows`: each release is a Laplace mechanism of its ``epsilon_spent`` on the
readings of its input slot, so the releases made compose for each user's whole series — pure Σ ε by basic
composition (C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", Found. Trends Theor. Comput.
Sci., 2014, Theorem 3.16), (ε, δ) by ``dp_accounting``'s PLD accountant
(:func:`policyopt.privacy.model_free.model_free_of_releases`), w-event over windows of input slots.

A schedule file records its own ε* and horizon risk; :func:`schedule_discrepancies` recomputes them from its A, S̄
and ε_C under the accounting model and reports where they differ (relative tolerance :data:`DESIGN_REL_TOL`).

The functions take a ledger's schedule (:class:`~policyopt.deploy.schedule_spec.ScheduleSpec`) and rows
(:class:`~policyopt.deploy.ledger_row.LedgerRow`); :meth:`policyopt.deploy.ledger.Ledger.risk` and
:meth:`policyopt.deploy.ledger.Ledger.model_free` apply them to an open ledger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from policyopt.deploy.model import int_param
from policyopt.deploy.schedule_spec import ScheduleSpec
from policyopt.errors import InvalidInputError

__all__ = ["LedgerRisk", "risk_of_rows", "model_free_of_rows", "designed_risks", "schedule_discrepancies",
           "recorded_discrepancies", "DESIGN_REL_TOL", "MAX_TRAJECTORY"]

#: Most slots of an audited trajectory (``ledger --at``): ε(t) and AoI(t) are held per slot.
MAX_TRAJECTORY = 10**7


@dataclass(frozen=True)
class LedgerRisk:
    """Age-dependent risk of the releases in a ledger (Theorem 3) beside the design (30).

    Attributes
    ----------
    times : numpy.ndarray of int, shape (T+1,)
        Absolute slots origin .. at.
    risk : numpy.ndarray, shape (T+1,)
        ε(t) of eq. (25), nats (0 before the first release).
    aoi : numpy.ndarray, shape (T+1,)
        AoI(t) of eq. (24), slots (NaN before the first release).
    release_slots : numpy.ndarray of int, shape (N,)
        S_n of the releases made up to `at` (skipped ones excluded).
    epoch_peaks : numpy.ndarray, shape (N,)
        ε(S_n), nats.
    peak_risk : float
        max_n ε(S_n) over the releases made so far (0 without release), nats.
    designed_peak_risk : float or None
        ε* of eq. (30) for the schedule's (A, S̄, ε_C); ``None`` when (31) fails.
    designed_status : str
        ``"finite"`` or ``"divergent"`` (condition (31)).
    at : int
        Last slot of the trajectory.
    released, skipped : int
        Rows of each status up to `at`.
    designed_horizon_risk : float or None
        For a schedule designed over a horizon H (``ScheduleSpec.horizon``): the largest risk over the
        H slots of the schedule as designed (every release made, ε_C as budget), Theorem 3 (eq. (25))
        with the ledger's Δ(t), rounded outward; for a model-free horizon design
        (``ScheduleSpec.horizon_accounting``) the pure ε of its ⌈H/S̄⌉ releases (basic composition, rounded
        up); ``None`` without a horizon.
    """

    times: np.ndarray
    risk: np.ndarray
    aoi: np.ndarray
    release_slots: np.ndarray
    epoch_peaks: np.ndarray
    peak_risk: float
    designed_peak_risk: float | None
    designed_status: str
    at: int
    released: int
    skipped: int
    designed_horizon_risk: float | None = None


def risk_of_rows(sch, rows, population, at: int | None = None) -> LedgerRisk:
    """ε(t) of Theorem 3 (eq. 25) for the releases a ledger records, the AoI (24) and the design (30).

    Parameters
    ----------
    sch : policyopt.deploy.schedule_spec.ScheduleSpec
        The ledger's schedule, its first input slot ``origin`` fixed.
    rows : sequence of policyopt.deploy.ledger_row.LedgerRow
        The ledger's rows in release order (:meth:`policyopt.deploy.ledger.Ledger.rows`).
    population : policyopt.models.markov.Population or MarkovChain
        The model of Δ(t) (eq. 12).
    at : int, optional
        Last slot of the trajectory (absolute); releases after it are left out.  Default: the slot of the last row
        (the first input slot without rows).

    Returns
    -------
    LedgerRisk
        The trajectory over slots ``sch.origin`` .. `at` (T + 1 slots), risks in nats.

    Raises
    ------
    InvalidInputError
        If `at` is before the schedule's first input slot, or the trajectory is longer than
        :data:`MAX_TRAJECTORY` slots.

    Notes
    -----
    Each release enters with its own publishing time, aging and the OpenDP-mapped budget
    ``epsilon_spent``; skipped rows are left out.  All in log space via
    :func:`policyopt.privacy.age_dependent.compose`; the risks returned are its outward-rounded
    ``risk_upper`` / ``epoch_peaks_upper`` and the designed peak is rounded up by
    :func:`policyopt.privacy.age_dependent.peak_risk_upper`.
    """
    from policyopt.privacy.age_dependent import compose

    last = rows[-1].slot if rows else sch.origin
    T = last if at is None else int_param(at, "at", sch.origin)  # `at` ≥ the first input slot
    if T - sch.origin + 1 > MAX_TRAJECTORY:
        raise InvalidInputError(
            f"`at` = {T} asks for a trajectory of {T - sch.origin + 1} slots from the first input slot {sch.origin}; "
            f"at most {MAX_TRAJECTORY} slots are audited at once (ε(t) is held per slot)"
        )
    made = [r for r in rows if r.status == "released" and r.slot <= T]
    skipped = sum(1 for r in rows if r.status == "skipped" and r.slot <= T)
    times = np.arange(sch.origin, T + 1)
    if made:
        S = np.array([r.slot for r in made]) - sch.origin
        ages = np.array([r.slot - r.input_time for r in made])
        # compose evaluates Δ only up to the largest lag Theorem 3 looks up, not up to the horizon
        comp = compose(S, ages, np.array([r.epsilon_spent for r in made]), population, horizon=T - sch.origin)
        # outward-rounded trajectory: every reported risk is ≥ its exact value (issue 26)
        risk, aoi, peaks = comp.risk_upper, comp.aoi, comp.epoch_peaks_upper
    else:
        risk, aoi, peaks = np.zeros(times.size), np.full(times.size, np.nan), np.empty(0)
    designed_up, designed_status, horizon_risk = designed_risks(sch, population)
    return LedgerRisk(
        times=times, risk=np.asarray(risk), aoi=np.asarray(aoi),
        release_slots=np.array([r.slot for r in made], dtype=np.int64), epoch_peaks=np.asarray(peaks),
        peak_risk=float(np.max(peaks)) if len(peaks) else 0.0,
        designed_peak_risk=designed_up, designed_status=designed_status,
        at=int(T), released=len(made), skipped=skipped, designed_horizon_risk=horizon_risk,
    )


def model_free_of_rows(rows, *, delta: float, windows=(), at: int | None = None):
    """The model-free guarantee of the releases a ledger records
    (:func:`policyopt.privacy.model_free.model_free_of_releases`).

    Every released row is a Laplace mechanism on the readings of its input slot (``input_time`` = S_n − A_n), whose
    privacy loss for one user's whole series is its ``epsilon_spent`` (OpenDP's privacy map of the measurement
    actually used, ≥ the nominal ε_C); whatever the correlation between a user's readings, the releases made compose:
    pure Σ ε by basic composition (Dwork & Roth 2014, Theorem 3.16; Zhang et al. 2024, Proposition 2), (ε, δ) by
    ``dp_accounting``'s PLD accountant, and w-event privacy (Kellaris et al., PVLDB 2014) over the releases whose input
    slots lie in any w consecutive slots.  Skipped rows spend nothing and are left out.

    Parameters
    ----------
    rows : sequence of LedgerRow
        The ledger's rows (any order; e.g. :meth:`policyopt.deploy.ledger.Ledger.rows`).
    delta : float
        0 ≤ δ < 1 of (ε, δ)-DP.
    windows : sequence of int
        w-event windows w ≥ 1 (slots), e.g. a day and a week of slots.
    at : int, optional
        Only releases published at slots ≤ `at` (default: all).

    Returns
    -------
    policyopt.privacy.model_free.ModelFreeGuarantee or None
        ``None`` when no release has been made (nothing was spent: ε = 0).  ``horizon`` is the span of the input
        slots (slots), ``epsilon_c`` the largest per-release budget (nats).

    Raises
    ------
    InvalidInputError
        If `delta` is not in [0, 1) or a window is not an integer ≥ 1.
    """
    from policyopt.privacy.model_free import check_delta, check_windows, model_free_of_releases

    delta, windows = check_delta(delta), check_windows(windows)
    made = [r for r in rows if r.status == "released" and (at is None or r.slot <= at)]
    if not made:
        return None
    spent = np.array([float(r.epsilon_spent) for r in made], dtype=float)
    inputs = np.array([int(r.input_time) for r in made], dtype=np.int64)
    return model_free_of_releases(spent, inputs, delta=delta, windows=windows)


def designed_risks(sch: ScheduleSpec, population) -> tuple:
    """What a schedule's own numbers are under the accounting model: (ε* upper bound or None, its status, the largest
    risk over the design's horizon or None).

    ε* is eq. (30) of Zhang et al. 2024 with Δ(A), Δ(S̄) of `population`, rounded outward
    (:func:`policyopt.privacy.age_dependent.peak_risk_upper`); the horizon risk (a schedule whose ``status`` was
    ``infeasible`` and that runs its ``horizon_design``) is Theorem 3 over the design's planned releases S_n = A +
    (n − 1)·S̄ ≤ H (eq. (25), outward-rounded), or for a model-free horizon design the pure ε of those ⌈H/S̄⌉ releases
    by basic composition (Dwork & Roth 2014, Theorem 3.16).

    Returns
    -------
    (float or None, str, float or None)
    """
    from policyopt.privacy.age_dependent import compose, peak_risk, peak_risk_upper

    la, ls = float(population.log_max_tv(sch.A)), float(population.log_max_tv(sch.S_bar))
    designed = peak_risk(float(population.max_tv(sch.A)), float(population.max_tv(sch.S_bar)), sch.epsilon_c)
    designed_up = peak_risk_upper(designed.value, la, ls, sch.epsilon_c, sch.A, sch.S_bar)
    horizon_risk = None
    if sch.horizon is not None and sch.horizon_accounting == "model-free":
        from policyopt.privacy.model_free import model_free_guarantee

        # the design's ⌈H/S̄⌉ releases of ε_C: pure ε by basic composition (Dwork & Roth 2014, Thm 3.16), any model
        horizon_risk = model_free_guarantee(sch.epsilon_c, horizon=sch.horizon, delta=0.0, S_bar=sch.S_bar).epsilon_pure
    elif sch.horizon is not None and sch.A <= sch.horizon:
        # the design's releases S_n = A + (n − 1)S̄ ≤ H, each with ε_C; ε(S_n) grows with n when (31) fails
        planned = sch.A + sch.S_bar * np.arange((sch.horizon - sch.A) // sch.S_bar + 1)
        plan = compose(planned, sch.A, sch.epsilon_c, population, horizon=sch.horizon)
        horizon_risk = float(np.max(plan.risk_upper))
    return designed_up, designed.status, horizon_risk


#: Relative difference above which a schedule file's own ε* or horizon risk is taken not to be what its A, S̄, ε_C
#: give under its model (both sides are outward-rounded float64 evaluations of the same formula: they agree to ~1e-15).
DESIGN_REL_TOL = 1e-9


def schedule_discrepancies(sch: ScheduleSpec, population) -> list:
    """Where a schedule file's recorded ε* (``peak_risk``) or horizon risk (``horizon_design.horizon_risk``) is not what
    its A, S̄ and ε_C give under `population` (:func:`designed_risks`): a list of sentences, empty when it reproduces
    (relative tolerance :data:`DESIGN_REL_TOL`).  A file edited after its design (ε_C, A, S̄ or the Δ(t) it records)
    fails here.
    """
    up, _, horizon = designed_risks(sch, population)
    return recorded_discrepancies(sch, up, horizon)


def recorded_discrepancies(sch: ScheduleSpec, peak_risk, horizon_risk) -> list:
    """:func:`schedule_discrepancies` given the recomputed ε* upper bound `peak_risk` and horizon risk `horizon_risk`
    (``None``: none), e.g. a :class:`LedgerRisk`'s ``designed_peak_risk`` and ``designed_horizon_risk``."""
    up, horizon = peak_risk, horizon_risk
    out = []

    def differs(recorded, now) -> bool:
        """Whether a recomputed value `now` (nats; ``None``: none) is not the `recorded` one to
        :data:`DESIGN_REL_TOL`."""
        if now is None or not math.isfinite(now):
            return True
        return abs(recorded - now) > DESIGN_REL_TOL * max(abs(recorded), abs(now), 1e-300)

    if sch.designed_peak_risk is not None and differs(sch.designed_peak_risk, up):
        out.append(f"its ε* {sch.designed_peak_risk!r} nats is not what A = {sch.A}, S̄ = {sch.S_bar}, ε_C = "
                   f"{sch.epsilon_c!r} give under its model ({'no finite ε*' if up is None else repr(up)})")
    if sch.designed_horizon_risk is not None and differs(sch.designed_horizon_risk, horizon):
        out.append(f"its horizon risk {sch.designed_horizon_risk!r} nats over {sch.horizon} slots is not what A = "
                   f"{sch.A}, S̄ = {sch.S_bar}, ε_C = {sch.epsilon_c!r} give ({horizon!r})")
    return out
