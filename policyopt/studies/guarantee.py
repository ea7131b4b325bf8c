"""Which privacy guarantee a report states first, and why.

Every age-dependent risk of M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans.
Inf. Theory 70(2), 2024 (Theorem 3, eq. (25); Proposition 3, eq. (30)) is proven "if the process {X_t} is Markovian".
A model of the readings is an assumption; policyopt states a model-based number only under a model the data did not
refute, and always next to the guarantee that needs no model:

* **model-based** — ε* (eq. (30)) or the largest risk over a horizon (Theorem 3), for a Markov model of the readings
  (the first-order chain or an augmented chain, :mod:`policyopt.models.markov_model`) that passed its checks on held-out
  time (:mod:`policyopt.studies.markov_check`), or for a model the user gave without data (``--chain``/``--matrix``:
  then the number holds for that model, an assumption nobody checked);
* **model-free** — the releases that use one user's readings over a horizon of H slots are k Laplace mechanisms of
  ε_C each on that user's series: (ε, δ)-DP for the user's whole series over H by the PLD accountant, pure k·ε_C by
  basic composition (:mod:`policyopt.privacy.model_free`), whatever the correlation.

:func:`choose_guarantee` is the one place that decides which of the two a report states first: the model-based number
when the model passed (or was given without data), the model-free one otherwise; a refuted model's ε* is stated only on
request (``accept_refuted``, a reason that is recorded).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.formatting import fmt_count, fmt_epsilon_c, fmt_upper, fmt_value
from policyopt.studies.markov_check import DAY_SECONDS, WEEK_SECONDS

__all__ = ["Guarantee", "choose_guarantee", "apply_guarantee", "model_free_horizon_design", "theorem3_horizon_design",
           "default_horizon",
           "default_windows", "schedule_model_free", "GuaranteeSettings", "model_free_sentence", "guarantee_lines",
           "DAY_SECONDS", "WEEK_SECONDS", "YEAR_SECONDS", "UNKNOWN_SLOT_HORIZON"]

#: A year of 365 days.
YEAR_SECONDS = 365 * DAY_SECONDS
#: The horizon (slots) when neither the slot length nor data give one: a year of hourly slots.
UNKNOWN_SLOT_HORIZON = 8760

#: Verdicts a model can have: it passed its checks on held-out readings, the readings refuted it, it was given without
#: data (an assumption), or no check could be made (too little data).
VERDICTS = ("passed", "refuted", "assumed", "unchecked")


def default_horizon(slot_seconds: int | None, data_slots: int | None = None) -> tuple[int, str]:
    """The model-free guarantee's default horizon H (slots) and how it was chosen.

    A year of slots when the slot length is known; otherwise the data's length (slots spanned); otherwise 8760 slots
    (a year of hourly slots).

    Parameters
    ----------
    slot_seconds : int or None
        Length of one slot, seconds (``None``: not known).
    data_slots : int or None
        Slots the readings span (``None``: no data).

    Returns
    -------
    (int, str)
        H ≥ 1 and a few words on its origin, e.g. ``"a year of 1h slots"``.

    Raises
    ------
    InvalidInputError
        A slot length that is not a positive integer number of seconds.
    """
    if slot_seconds is not None:
        if isinstance(slot_seconds, bool) or not isinstance(slot_seconds, int) or slot_seconds < 1:
            raise InvalidInputError(f"`slot_seconds` must be a positive integer, got {fmt(slot_seconds)}")
        from policyopt.io import format_duration

        return max(1, YEAR_SECONDS // slot_seconds), f"a year of {format_duration(slot_seconds)} slots"
    if data_slots is not None and data_slots >= 1:
        return int(data_slots), "the data's length"
    return UNKNOWN_SLOT_HORIZON, "8760 slots (a year of hourly slots; the slot length is not known)"


def default_windows(slot_seconds: int | None) -> tuple[int, ...]:
    """The w-event windows (slots): a day and a week of slots, or 24 and 168 slots when the slot length is unknown."""
    if slot_seconds is None:
        return (24, 168)
    return tuple(sorted({max(1, DAY_SECONDS // slot_seconds), max(1, WEEK_SECONDS // slot_seconds)}))


def schedule_model_free(epsilon_c, S_bar, *, horizon: int, delta: float, windows=()) -> dict | None:
    """The model-free guarantee of a periodic schedule over `horizon` slots, as its JSON object (``None`` without a
    schedule): ⌈H/S̄⌉ releases of ε_C each (:func:`policyopt.privacy.model_free.model_free_guarantee`)."""
    if epsilon_c is None or S_bar is None:
        return None
    if not float(S_bar).is_integer():  # a relaxation's fractional S̄: releases are counted at the integer below
        S_bar = max(1, math.floor(float(S_bar)))
    from policyopt.privacy.model_free import model_free_guarantee

    return model_free_guarantee(float(epsilon_c), horizon=int(horizon), delta=float(delta), S_bar=int(S_bar),
                                windows=tuple(int(w) for w in windows)).to_dict()


@dataclass(frozen=True)
class Guarantee:
    """The guarantee a report states first (JSON ``guarantee``).

    Attributes
    ----------
    kind : {"model-based", "model-free"}
    epsilon : float or None
        Nats: ε* (model-based, every time), the largest risk over the horizon (model-based horizon design), or the ε of
        (ε, δ)-DP of each user's series over the horizon (model-free); rounded up.  ``None`` without a schedule.
    delta : float
        δ (0 for a model-based ε*: a pure bound).
    horizon : int or None
        Slots the statement covers (``None``: every time, the infinite-horizon ε*).
    model : str or None
        The Markov model a model-based number rests on (``chain``, ``phase:24``, …) with its verdict; ``None`` for
        model-free.
    statement : str
        One sentence: the number, what it protects, under what, and why this one.
    """

    kind: str
    epsilon: float | None
    delta: float
    horizon: int | None
    model: str | None
    statement: str

    def to_dict(self) -> dict:
        """``{"kind", "epsilon", "delta", "horizon", "model", "statement"}``."""
        return {"kind": self.kind, "epsilon": self.epsilon, "delta": self.delta, "horizon": self.horizon,
                "model": self.model, "statement": self.statement}


def model_free_sentence(mf: dict) -> str:
    """The model-free guarantee of :func:`schedule_model_free` in one sentence (privacy numbers rounded up)."""
    ws = "; ".join(f"{fmt_upper(w['epsilon'], 3)} nats over any {fmt_count(w['w'], 'slot')}" for w in mf.get("w_event") or [])
    # The PLD's ε is used only when below the pure Σ k·ε_C (it can be no smaller, or overflow for absurd budgets).
    how = ("composed by the PLD accountant" if mf["epsilon"] < mf["epsilon_pure"]
           else "composed by basic composition: the PLD accountant gives no smaller ε")
    return (f"({fmt_upper(mf['epsilon'], 4)} nats, δ = {mf['delta']:.3g})-DP for each user's whole series over "
            f"{fmt_count(mf['horizon'], 'slot')}, whatever the correlation: {fmt_count(mf['releases'], 'release')} of "
            f"ε_C = {fmt_epsilon_c(mf['epsilon_c'])} nats {how} (pure ε = "
            f"{fmt_upper(mf['epsilon_pure'], 4)} nats by basic composition)" + (f"; w-event: {ws}" if ws else ""))


def guarantee_lines(report: dict) -> list[str]:
    """The opening lines of a report's text: ``guarantee`` (what is stated first, when anything is) and, when that is
    not the model-free guarantee, ``model free`` (:func:`model_free_sentence`) beside it.

    Parameters
    ----------
    report : dict
        A report's JSON object with ``guarantee`` (:class:`Guarantee` as a dict, or None) and ``model_free``.
    """
    g = report.get("guarantee")
    lines = [f"guarantee   : {g['statement']}"] if g else []
    if report.get("model_free") and (not g or g["kind"] != "model-free"):
        lines.append(f"model free  : {model_free_sentence(report['model_free'])}")
    return lines


def choose_guarantee(*, model: str | None, verdict: str, why: str, model_free: dict | None,
                     model_epsilon: float | None, model_horizon: int | None = None,
                     accept_refuted: str | None = None) -> tuple[Guarantee | None, bool, list]:
    """Decide the guarantee a report states first, whether its model-based risk may be printed, and the warnings.

    Parameters
    ----------
    model : str or None
        The Markov model the design's model-based risk rests on (``None`` when there is none).
    verdict : {"passed", "refuted", "assumed", "unchecked"}
        What the checks on held-out readings said (``assumed``: a model given without data).
    why : str
        The check in a few words (e.g. ``"Markov test p = 0.01, Δ(t) check p = 0.2, level 0.95"``).
    model_free : dict or None
        The schedule's model-free guarantee (:func:`schedule_model_free`; ``None`` without a schedule).
    model_epsilon : float or None
        The model-based risk (ε* of eq. (30), or the horizon risk of Theorem 3), rounded up; ``None`` when there is none.
    model_horizon : int or None
        Slots `model_epsilon` covers (``None``: ε*, every time).
    accept_refuted : str or None
        A reason to print a refuted (or unchecked) model's risk anyway (recorded; it never becomes the headline).

    Returns
    -------
    (Guarantee or None, bool, list of str)
        The guarantee (``None`` when there is no schedule at all), whether the model-based risk is stated (``peak_risk``
        in JSON; false makes it ``null``), and warnings (every refuted model; an accepted refuted model).

    Raises
    ------
    InvalidInputError
        An unknown `verdict`; an empty `accept_refuted`.
    """
    if verdict not in VERDICTS:
        raise InvalidInputError(f"`verdict` must be one of {list(VERDICTS)}, got {fmt(verdict)}")
    if accept_refuted is not None and not str(accept_refuted).strip():
        raise InvalidInputError("`accept_refuted` must give a reason (a non-empty text), got an empty one")
    warnings = []
    trusted = verdict in ("passed", "assumed")
    if verdict == "refuted" and model is None:
        warnings.append(f"no Markov model passed its checks on held-out readings ({why}): no age-dependent risk (Zhang "
                        "et al. 2024, Theorem 3) is a bound for these data; the guarantee stated is the model-free one")
    elif verdict == "refuted":
        warnings.append(f"the Markov model {model} is refuted by the readings ({why}): its age-dependent risk (Zhang et al. "
                        "2024, Theorem 3) is not a bound for these data; the guarantee stated is the model-free one")
    elif verdict == "unchecked":
        warnings.append(f"the Markov model {model} could not be checked against held-out readings ({why}); the guarantee "
                        "stated is the model-free one")
    if not trusted and accept_refuted is not None and model_epsilon is not None:
        warnings.append(f"the {verdict} model {model or 'chain'}'s risk {fmt_upper(model_epsilon)} nats is printed on "
                        f"request (--accept-refuted: {accept_refuted}); it is not a bound for these data")
    stated = trusted or accept_refuted is not None
    if trusted and model_epsilon is not None:
        what = "an assumption nobody checked against data" if verdict == "assumed" else f"it passed its checks on held-out readings ({why})"
        label = model if str(model).startswith("the ") else f"the Markov model {model}"
        if model_horizon is None:
            text = (f"ε* = {fmt_upper(model_epsilon)} nats: no user's age-dependent risk ever exceeds it (Zhang et al. 2024, "
                    f"Theorem 3, eq. (30)) if the readings follow {label} — {what}")
        else:
            text = (f"largest age-dependent risk ≤ {fmt_upper(model_epsilon)} nats over {fmt_count(model_horizon, 'slot')} "
                    f"(Zhang et al. 2024, Theorem 3) if the readings follow {label} — {what}")
        return (Guarantee("model-based", model_epsilon, 0.0, model_horizon, model, text), stated, warnings)
    if model_free is None:
        return None, stated, warnings
    reason = ("no Markov model passed its checks" if model is None else
              f"the Markov model {model} is {'refuted' if verdict == 'refuted' else 'not checked'} ({why})" if not trusted else
              f"the model {model} gives no finite risk for this schedule")
    text = f"{model_free_sentence(model_free)} — stated because {reason}"
    return (Guarantee("model-free", model_free["epsilon"], model_free["delta"], model_free["horizon"], None, text),
            stated, warnings)


def model_free_horizon_design(penalty, max_penalty: float, A_max: int, S_max: int, horizon: int, delta: float) -> dict:
    """The horizon design when no model passed: the model-free optimum over `horizon` slots
    (:class:`~policyopt.problems.model_free.ModelFreeProblem`) in the shape of ``horizon_design``.

    ``horizon_risk`` is the pure ε (basic composition of the releases over the horizon, a bound on the age-dependent
    risk at every slot of the horizon whatever the correlation), ``epsilon`` the (ε, δ) of the PLD accountant;
    ``accounting`` says ``model-free``.
    """
    from policyopt.problems.model_free import ModelFreeProblem

    sol = ModelFreeProblem(penalty, max_penalty, horizon=int(horizon), delta=float(delta), A_max=int(A_max),
                           S_max=int(S_max)).solve()
    d = sol.decision or {}
    v = sol.values
    return {"status": sol.status.value, "A": d.get("A"), "S_bar": d.get("S_bar"), "epsilon_c": d.get("epsilon_c"),
            "penalty": v.get("penalty"), "horizon_risk": v.get("epsilon_pure"), "epsilon": sol.objective,
            "delta": float(delta), "releases": v.get("releases"), "horizon": int(horizon), "accounting": "model-free",
            "proof": sol.message}


def apply_guarantee(r: dict, *, model: str | None, verdict: str, why: str, horizon: int, delta: float, windows=(),
                    accept_refuted: str | None = None) -> dict:
    """Put the guarantee a schedule report states first into its JSON object `r` (``policyopt schedule --json``).

    Sets ``model_free`` (the printed schedule's, :func:`schedule_model_free`; for a relaxation its deployable
    neighbour's; with no finite ε*, the horizon design's), ``guarantee`` (:func:`choose_guarantee`),
    ``accepted_refuted`` and appends to ``warnings``; when the model's risk may not be stated (refuted or unchecked,
    no `accept_refuted`), ``peak_risk`` and every other model-based ε* of the report (the no-aging benchmark, a
    relaxation's deployable neighbour) become ``null``.  Idempotent for the same arguments.

    Returns
    -------
    dict
        `r`, modified in place.
    """
    d = r.get("deployable") if r.get("relaxed") else None
    hd = r.get("horizon_design") if r.get("A") is None else None
    src = d if d else hd if isinstance(hd, dict) and hd.get("status") == "optimal" else r
    mf = schedule_model_free(src.get("epsilon_c"), src.get("S_bar"), horizon=horizon, delta=delta, windows=windows)
    model_eps = d.get("peak_risk") if d else r.get("peak_risk")
    model_h = None
    if src is hd and hd.get("accounting", "theorem-3") == "theorem-3":
        model_eps, model_h = hd.get("horizon_risk"), hd.get("horizon")
    g, stated, warns = choose_guarantee(model=model, verdict=verdict, why=why, model_free=mf, model_epsilon=model_eps,
                                        model_horizon=model_h, accept_refuted=accept_refuted)
    r["model_free"] = mf
    r["guarantee"] = None if g is None else g.to_dict()
    trusted = verdict in ("passed", "assumed")
    r["accepted_refuted"] = (None if trusted or accept_refuted is None else  # with no model passed, the chains designed
                             {"model": model or "chain", "reason": accept_refuted})
    if not stated:
        r["peak_risk"] = None
        r["peak_risk_margin"] = None
        na = (r.get("benchmarks") or {}).get("no_aging")
        if isinstance(na, dict):
            na["peak_risk"] = None
        if isinstance(r.get("deployable"), dict):
            r["deployable"]["peak_risk"] = None
    old = list(r.get("warnings") or [])
    r["warnings"] = old + [w for w in warns if w not in old]
    return r


@dataclass(frozen=True)
class GuaranteeSettings:
    """What a design or release states and under which model: the resolved ``--markov-model``, ``--privacy``,
    ``--delta``, ``--horizon`` and ``--accept-refuted`` (every default filled in and said where it came from).

    Attributes
    ----------
    markov_model : str
        ``chain``, ``phase[:P]``, ``order:K``, ``hmm:R`` or ``auto``.
    privacy : {"model-based", "model-free"}
        What the design minimises.
    delta : float
        δ of the model-free guarantee.
    dp_delta_source : str
        ``given`` or how the default was chosen.
    horizon : int
        H (slots) of the model-free guarantee.
    horizon_source : str
        ``given`` or how the default was chosen (:func:`default_horizon`).
    windows : tuple of int
        w-event windows (slots), :func:`default_windows`.
    slot_seconds : int or None
        Slot length (seconds) when known.
    accept_refuted : str or None
        The reason to print a refuted model's risk anyway.
    """

    markov_model: str = "chain"
    privacy: str = "model-based"
    delta: float = 1e-6
    dp_delta_source: str = "given"
    horizon: int = UNKNOWN_SLOT_HORIZON
    horizon_source: str = "given"
    windows: tuple = (24, 168)
    slot_seconds: int | None = None
    accept_refuted: str | None = None

    @classmethod
    def resolve(cls, *, users: int, slot_seconds: int | None = None, data_slots: int | None = None,
                markov_model: str | None = None, privacy: str | None = None, delta: float | None = None,
                horizon: int | None = None, accept_refuted: str | None = None) -> "GuaranteeSettings":
        """Fill in the defaults: δ = :func:`policyopt.privacy.model_free.default_delta` (I), H = :func:`default_horizon`.

        Raises
        ------
        InvalidInputError
            Bad `privacy`, `delta`, `horizon` or an empty `accept_refuted`.
        """
        from policyopt.privacy.model_free import check_delta, default_delta

        if privacy not in (None, "model-based", "model-free"):
            raise InvalidInputError(f"`privacy` must be 'model-based' or 'model-free', got {fmt(privacy)}")
        if accept_refuted is not None and not str(accept_refuted).strip():
            raise InvalidInputError("`accept_refuted` must give a reason (a non-empty text)")
        if horizon is not None and (isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1):
            raise InvalidInputError(f"`horizon` must be an integer ≥ 1 (slots), got {fmt(horizon)}")
        h, h_src = (int(horizon), "given") if horizon is not None else default_horizon(slot_seconds, data_slots)
        d, d_src = ((check_delta(delta), "given") if delta is not None else
                    (default_delta(int(users)), f"default min(1e-6, 1/(10·I)) with I = {int(users)}"))
        return cls(markov_model=markov_model or "chain", privacy=privacy or "model-based", delta=float(d),
                   dp_delta_source=d_src, horizon=h, horizon_source=h_src, windows=default_windows(slot_seconds),
                   slot_seconds=slot_seconds, accept_refuted=accept_refuted)

    def to_dict(self) -> dict:
        """The JSON object ``guarantee_settings``."""
        return {"markov_model": self.markov_model, "privacy": self.privacy, "delta": self.delta,
                "dp_delta_source": self.dp_delta_source, "horizon": self.horizon, "horizon_source": self.horizon_source,
                "windows": list(self.windows), "slot_seconds": self.slot_seconds, "accept_refuted": self.accept_refuted}


def theorem3_horizon_design(source, penalty, max_penalty: float, A_max: int, S_max: int, horizon: int) -> dict:
    """The horizon design under a model's Δ(t) (no schedule has a finite ε*: condition (31) fails everywhere it meets
    f̄): :func:`policyopt.studies.empirical_design.design_over_horizon` (Theorem 3 over `horizon` slots, exhaustive
    over the box) on Δ(t) of `source` tabulated over the ages the box uses; ``accounting`` says ``theorem-3``.

    A ``--robust`` band (a :class:`~policyopt.models.tabulated.TabulatedMaxTV` tabulated to max(A_MAX, S_MAX) + 1,
    shorter than the box's last age A_MAX + S_MAX − 1) is continued by
    :meth:`~policyopt.models.tabulated.TabulatedMaxTV.extended` (submultiplicativity, an upper bound on the band's
    own posterior event), as the plot of the schedule continues it.
    """
    from policyopt.models.tabulated import TabulatedMaxTV
    from policyopt.studies.empirical_design import box_last_age, design_over_horizon

    last = box_last_age(A_max, S_max)
    if isinstance(source, TabulatedMaxTV) and not source.beyond_one:
        source = source.extended(last)
    tab = TabulatedMaxTV(np.minimum.accumulate(np.asarray(source.log_max_tv(np.arange(last + 1)), dtype=float)),
                         int(source.n_users), 1.0)
    return design_over_horizon(tab, penalty, max_penalty, A_max, S_max, int(horizon))
