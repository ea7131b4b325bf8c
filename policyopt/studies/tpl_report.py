r"""Temporal privacy leakage on data (``policyopt tpl`` / ``tpl-budget``): under a Markov model the data do not refute.

Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous Data Release under Temporal
Correlations", IEEE Trans. Knowl. Data Eng. 31(7), 2019 (*Cao et al.* below) bound what a release of ε_t-DP
mechanisms leaks about a user's current value to an adversary who knows the user's backward and forward transition
matrices P_B, P_F of a **homogeneous first-order chain** (BPL, FPL, TPL: eqs. (10)–(15); α-DP_T: Definition 8).  On
data the chain is an assumption, so this module, like every design on data (issue 32 of the project), checks a
Markov model of the readings on held-out time (:func:`policyopt.studies.markov_check.design_check`, lags up to a
week of slots) and states the leakage as a bound only under a model that passed; otherwise the report leads with the
guarantee that needs no model — the T releases composed over the user's whole series (pure Σ ε_t by basic composition,
and (ε, δ) by the PLD accountant, :func:`policyopt.privacy.model_free.model_free_of_releases`).

Models (``--markov-model``)
---------------------------
``chain`` (default)
    The first-order chain per user on the K quantile states, P_F its smoothed MLE and P_B the backward conditional of
    the empirical joint of consecutive states (:meth:`policyopt.models.estimation.FittedModel.temporal_matrices`),
    as before this module existed.
``order:k``, ``hmm:R``
    An augmented chain Z_t with X_t = g(Z_t) (:mod:`policyopt.models.markov_model`): Z_t = (X_t, …, X_{t−k+1}) or
    (X_t, R_t).  The leakage is computed on Z: P_F = Z's transition matrix (``z_matrices()``) and P_B its time
    reversal under Z's stationary law π_Z, P_B[z, z'] = π_Z(z') P_F[z', z] / π_Z(z) (eq. (1) of M. Zhang, E. Wei,
    R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024; as the chain's
    empirical joint does, it assumes the chain is in its stationary regime).
``auto``
    The simplest of ``chain``, ``order:2``, ``hmm:2``, ``order:3``, ``hmm:3`` that passes (those whose Z has at most
    :data:`MAX_TPL_Z_STATES` states; the phase chains of ``schedule``'s ``auto`` are not candidates).
``phase[:P]``
    Refused: a phase chain is time-inhomogeneous (one matrix per phase), and Cao et al.'s leakage is defined for one
    pair P_B, P_F.

Why the leakage computed on Z bounds the leakage about X_t
----------------------------------------------------------
1. *A release of X_t is a release of Z_t with the same ε_t.*  The mechanism M_t sees Z_t only through X_t = g(Z_t):
   two values z, z' give the output laws of g(z), g(z'), whose ratio is at most e^{ε_t} (and 1 when g(z) = g(z')).
2. *Cao et al.'s adversary who knows Z's chain is covered.*  Z is a homogeneous first-order chain with backward and
   forward matrices P_B, P_F, the exact setting of Cao et al.'s eqs. (10)–(15), so BPL_t, FPL_t and TPL_t computed
   from them bound sup_{z, z', r} ln Pr(r | Z_t = z) / Pr(r | Z_t = z') over the outputs r = (r_1, …, r_T).
3. *From Z_t back to X_t (the mixture argument).*  The outputs depend on X_t only through Z_t, so
   Pr(r | X_t = x) = Σ_{z ∈ g⁻¹(x)} Pr(r | Z_t = z) Pr(Z_t = z | X_t = x): a mixture.  A ratio of two mixtures lies
   within the range of the ratios of their terms (Zhang et al. 2024, Lemma 4), so
   Pr(r | X_t = x) / Pr(r | X_t = x') ≤ max_{z ∈ g⁻¹(x), z' ∈ g⁻¹(x')} Pr(r | Z_t = z) / Pr(r | Z_t = z') ≤ e^{TPL_t}:
   the leakage about X_t is at most that about Z_t, whatever the mixture weights are (the same argument as
   :mod:`policyopt.models.markov_model`'s module docstring for Theorem 3).

What it costs: Cao et al.'s bound is a worst case over *every* ε_t-DP mechanism of Z_t, including ones that reveal
the other coordinates of Z_t.  For ``order:k`` two values of Z_t that differ in X_{t−1} have P_B rows with disjoint
supports (and P_F rows too, for a difference in X_t), so L_B(α) = L_F(α) = α (Cao et al., eq. (24)) and max TPL = Σ ε_t,
the pure model-free bound: an order-k model never gives a smaller leakage than basic composition.  ``hmm:R`` does
(the regime is hidden, so rows overlap).

Size of Z
---------
The loss function L(α) of eq. (24) is built from pairs of rows of each user's P_B and P_F, and Theorem 11's supremum
solves a fixed point over them; both grow fast with the number n of Z states.  Measured for the 17 bundled homes
(``tests/benchmarks/bench_tpl_z.py``, CPU seconds on one core): n = 6 or 9 (``hmm:2`` / ``order:2`` on 3 states)
well under a second in all; n = 72 (``hmm:6`` on 12 states) 4 s for BPL/FPL/TPL, 2 s for the suprema, 2 s for
Algorithm 8; n = 81 (``order:4`` on 3 states) 2.5 s for the suprema; n = 144 (``order:2`` on 12 states) 14 s for the
suprema alone; n = 729 more than five minutes.  Time grows linearly in the users.  :data:`MAX_TPL_Z_STATES` caps n
at 81; the first-order chain (n = K) is not capped, as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.formatting import check_text, fmt_count, fmt_exact, fmt_lower, fmt_upper, fmt_value, json_clean, round_down

__all__ = [
    "TPLModel",
    "MAX_TPL_Z_STATES",
    "TPL_AUTO_CANDIDATES",
    "UNCERTIFIED",
    "tpl_model_spec",
    "z_state_count",
    "z_temporal_matrices",
    "tpl_model_from_matrices",
    "tpl_model_from_data",
    "tpl_model_free",
    "tpl_suprema",
    "tpl_report",
    "tpl_budget_report",
    "format_tpl_report",
    "format_tpl_budget_report",
    "model_free_statement",
    "public_json",
]

#: Most states of an augmented chain Z the leakage is computed on (see the module docstring's *Size of Z*).
MAX_TPL_Z_STATES = 81
#: ``auto``'s candidates for the leakage, simplest first (homogeneous models only; ``schedule``'s ``auto`` also tries
#: the phase chains).
TPL_AUTO_CANDIDATES = ("chain", "order:2", "hmm:2", "order:3", "hmm:3")
#: A supremum that is finite but too close to the divergence threshold for a finite rounding bound (JSON string).
UNCERTIFIED = "finite, no certified bound: ε is at the edge of divergence (the fixed point's slope is 1 within rounding)"
#: JSON fields of ``tpl-budget`` that are numbers of the model (nulled when the model's leakage is not stated).
_BUDGET_MODEL_FIELDS = ("max_tpl", "bpl", "fpl", "tpl", "sup_bpl", "sup_fpl", "sup_tpl", "rounding_margin",
                        "tpl_rounding_margin")


# --------------------------------------------------------------------------------------------- the model


def z_state_count(spec, n_states: int) -> int:
    """Number of states of the chain the leakage is computed on: K (``chain``), K^k (``order:k``), K·R (``hmm:R``).

    Parameters
    ----------
    spec : str or policyopt.models.markov_model.MarkovModelSpec
        ``chain``, ``order:k`` or ``hmm:R``.
    n_states : int
        K ≥ 2, quantile states.

    Returns
    -------
    int

    Raises
    ------
    InvalidInputError
        Another model (``phase``, ``auto``) or a bad spec.
    """
    from policyopt.models.markov_model import MarkovModelSpec

    sp = spec if isinstance(spec, MarkovModelSpec) else MarkovModelSpec.parse(str(spec))
    K = int(n_states)
    if sp.kind == "chain":
        return K
    if sp.kind == "order":
        return K ** int(sp.param)
    if sp.kind == "hmm":
        return K * int(sp.param)
    raise InvalidInputError(f"`spec` must be chain, order:k or hmm:R for the leakage, got {fmt(str(sp))}")


def tpl_model_spec(text, n_states: int) -> str:
    """Validate ``--markov-model`` for ``tpl`` / ``tpl-budget``: the canonical name (or ``auto``).

    Parameters
    ----------
    text : str
        ``chain``, ``order:k``, ``hmm:R`` or ``auto``.
    n_states : int
        K, the quantile states of the data (the size of Z depends on it).

    Returns
    -------
    str

    Raises
    ------
    InvalidInputError
        An unknown model or a bad parameter; ``phase[:P]`` (time-inhomogeneous: Cao et al.'s leakage is defined for a
        homogeneous chain); a model whose augmented chain Z has more than :data:`MAX_TPL_Z_STATES` states.  Each
        message names ``--markov-model`` and the value.
    """
    from policyopt.models.markov_model import MarkovModelSpec

    raw = str(text).strip().lower()
    if raw.partition(":")[0] == "phase":
        raise InvalidInputError(
            f"--markov-model {text}: a phase chain is time-inhomogeneous (one transition matrix per phase), and Cao et "
            "al.'s BPL/FPL/TPL are defined for a homogeneous chain (one P_B, one P_F); use chain, order:K, hmm:R or auto")
    try:
        sp = MarkovModelSpec.parse(raw)
    except InvalidInputError as exc:
        raise InvalidInputError(f"--markov-model {text!r}: {exc}") from None
    if sp.kind == "auto":
        return "auto"
    n = z_state_count(sp, n_states)
    if n > MAX_TPL_Z_STATES:
        if sp.kind == "order":
            fewer = int(math.floor(MAX_TPL_Z_STATES ** (1.0 / int(sp.param)) + 1e-9))
            fix = f"--states {fewer} or fewer, or a lower order"
        else:
            fix = f"--states {MAX_TPL_Z_STATES // int(sp.param)} or fewer, or fewer regimes"
        raise InvalidInputError(
            f"--markov-model {sp} with {fmt_count(int(n_states), 'state')} gives an augmented chain Z of {n} states; the "
            f"leakage on Z (Cao et al.'s loss function over pairs of Z's rows, Theorem 11's supremum) takes too long "
            f"beyond {MAX_TPL_Z_STATES} states: use {fix}")
    return str(sp)


def z_temporal_matrices(model) -> tuple[list, list]:
    """P_B and P_F of each user's augmented chain Z, for Cao et al.'s leakage (see the module docstring).

    P_F = Z's transition matrix; P_B[z, z'] = π_Z(z') P_F[z', z] / π_Z(z), its time reversal under Z's stationary law
    π_Z (Zhang et al. 2024, eq. (1); π_Z by GTH elimination, :meth:`policyopt.models.markov.Population.from_matrices`).

    Parameters
    ----------
    model : policyopt.models.order_chain.OrderChainModel or policyopt.models.hidden_regime.HiddenRegimeModel
        A fitted model with ``z_matrices()`` (shape (U, n, n)).

    Returns
    -------
    (P_B, P_F) : two lists of numpy.ndarray, shape (n, n) each, in the order of ``model.users``

    Raises
    ------
    InvalidInputError
        `model` has no augmented chain (no ``z_matrices``).
    InvalidModelError
        A user's Z chain is reducible (π_Z not unique).
    """
    from policyopt.models.markov import Population

    if not hasattr(model, "z_matrices"):
        raise InvalidInputError(f"`model` must be an order-k or hidden-regime model (with z_matrices()), got {fmt(model)}")
    PZ = np.asarray(model.z_matrices(), dtype=float)
    pop = Population.from_matrices(PZ)  # π_Z and the reversed matrix of eq. (1), by GTH elimination
    P_B = [np.array(c.reversed_matrix) for c in pop.chains]  # eq. (1): P̂(z, z') = π(z') P(z', z) / π(z)
    P_F = [np.array(p) for p in PZ]
    return P_B, P_F


@dataclass(frozen=True)
class TPLModel:
    """Where a leakage report's P_B and P_F come from, and whether the data support them.

    Attributes
    ----------
    P_B, P_F : list of numpy.ndarray, numpy.ndarray or None
        Per user (a list) or one matrix; ``None`` on one side: that correlation is unknown (L ≡ 0).
    source : str
        One phrase for the report's ``model`` line / JSON ``source``.
    verdict : {"passed", "refuted", "assumed"}
        ``assumed`` for matrices given without data.
    model : str or None
        The model a model-based statement names (``chain``, ``order:2``, ``the given matrices P_B, P_F``); ``None``
        when ``auto`` found none that passed.
    why : str
        The check in a few words (or ``no data``).
    used : str or None
        The model P_B, P_F are computed from (``chain`` when ``auto`` found none that passed); ``None`` for matrices.
    refuted : tuple of (str, str)
        (model, why) of every model checked that the readings refute (the report's warnings).
    users : int or None
        Users of the data (I of the default δ); ``None`` for matrices.
    slot_seconds : int or None
        Slot length, when known (the w-event windows).
    model_check : dict or None
        The JSON ``model_check`` (:func:`policyopt.studies.markov_check.check_summary`, plus ``skipped``).
    markov_model : dict or None
        The JSON ``markov_model``: ``requested``, ``used``, ``states`` (K), ``z_states``, ``description``.
    """

    P_B: object
    P_F: object
    source: str
    verdict: str
    model: str | None
    why: str
    used: str | None = None
    refuted: tuple = ()
    users: int | None = None
    slot_seconds: int | None = None
    model_check: dict | None = field(default=None, repr=False)
    markov_model: dict | None = field(default=None, repr=False)

    @property
    def trusted(self) -> bool:
        """The leakage is a bound under this model: it passed its checks, or the user gave it without data."""
        return self.verdict in ("passed", "assumed")


def tpl_model_from_matrices(P_B, P_F, source: str = "matrices") -> TPLModel:
    """A :class:`TPLModel` of matrices the user gave without data: verdict ``assumed`` (nothing to check them against).

    Parameters
    ----------
    P_B, P_F : numpy.ndarray (n, n) or None
        The backward / forward matrices (``None``: that correlation is unknown, L ≡ 0).
    source : str
        The report's ``source``.

    Returns
    -------
    TPLModel
    """
    return TPLModel(P_B=P_B, P_F=P_F, source=source, verdict="assumed", model="the given matrices P_B, P_F",
                    why="no data")


def _tpl_check(readings, quantizer, users, spec: str, *, value_range, slot_seconds, seed: int, smoothing: float,
               draws: int):
    """The held-out check of `spec` (``auto``: :data:`TPL_AUTO_CANDIDATES` that fit the size cap) and the candidates
    skipped; the lags are a week of slots (:func:`policyopt.models.markov_test.default_markov_lags`)."""
    from policyopt.models.markov_test import default_markov_lags
    from policyopt.studies.markov_check import periods_from_slot, select_markov_model, split_states

    K = int(quantizer.n_states)
    skipped = []
    if spec == "auto":
        cands = []
        for name in TPL_AUTO_CANDIDATES:
            n = z_state_count(name, K)
            if n > MAX_TPL_Z_STATES:
                skipped.append({"model": name, "why": f"{n} augmented states, more than {MAX_TPL_Z_STATES}"})
            else:
                cands.append(name)
    day, week = periods_from_slot(slot_seconds)
    data = split_states(readings, quantizer, users, value_range=value_range)
    L = default_markov_lags(week, 1, int(data.test.shape[1]))  # a week of slots (168 when the slot is unknown)
    sel = select_markov_model(spec, data, candidates=tuple(cands) if spec == "auto" else None, markov_lags=L,
                              max_tv_lags=L, draws=draws, seed=seed, smoothing=smoothing, default_period=day,
                              week_period=week)
    return sel, skipped


def tpl_model_from_data(readings, n_states: int, *, source: str, markov_model: str = "chain", value_range=None,
                        slot_seconds: int | None = None, smoothing: float | None = None, seed: int = 0,
                        draws: int | None = None) -> TPLModel:
    """P_B, P_F per user from readings, under a Markov model checked on held-out time.

    The first-order chains are fitted on every reading (:func:`policyopt.models.estimation.fit_population`, which
    sets the quantile states); `markov_model` is fitted on the first half of each user's span and checked on the rest
    (:func:`policyopt.studies.markov_check.select_markov_model`: G² Markov test and Δ(t) check, lags 1..a week of
    slots, family-wise level 0.95, posterior-predictive parametric bootstrap); the chosen model is then fitted on every
    reading (:func:`policyopt.studies.markov_check.fit_for_design`) and, for ``order:k`` / ``hmm:R``, its augmented
    chain Z gives P_B, P_F (:func:`z_temporal_matrices`).

    Parameters
    ----------
    readings : pandas.DataFrame
        user, time (integer slots), value.
    n_states : int
        K ≥ 2 quantile states.
    source : str
        Name of the data for the report (e.g. ``"data homes.csv"``).
    markov_model : str
        ``chain`` (default), ``order:k``, ``hmm:R`` or ``auto`` (:func:`tpl_model_spec`).
    value_range : (float, float), optional
        Public range the readings are clipped into first.
    slot_seconds : int, optional
        Slot length (seconds): a week of slots for the lags (168 when unknown) and the w-event windows.
    smoothing : float, optional
        Pseudo-count of the count-based fits (default :data:`policyopt.models.estimation.DEFAULT_SMOOTHING`).
    seed : int
        Seed of the check's simulation and of the hidden-regime fits (simulation only, never released noise).
    draws : int, optional
        Data sets simulated per model check (default :data:`policyopt.studies.markov_check.CHECK_DRAWS`).

    Returns
    -------
    TPLModel

    Raises
    ------
    InvalidInputError
        Bad readings or options (see :func:`tpl_model_spec`, :func:`policyopt.models.estimation.fit_population`);
        series too short for a held-out check.
    """
    from policyopt.models.estimation import DEFAULT_SMOOTHING, fit_population
    from policyopt.studies.markov_check import CHECK_DRAWS, check_summary, fit_for_design, periods_from_slot

    s = DEFAULT_SMOOTHING if smoothing is None else float(smoothing)
    tpl_model_spec(markov_model, 2)  # refuse a phase chain or a bad spec before any fit (the size is checked below)
    fitted = fit_population(readings, int(n_states), smoothing=s, value_range=value_range)
    K = int(fitted.quantizer.n_states)
    spec = tpl_model_spec(markov_model, K)
    sel, skipped = _tpl_check(readings, fitted.quantizer, fitted.users, spec, value_range=value_range,
                              slot_seconds=slot_seconds, seed=int(seed), smoothing=s,
                              draws=CHECK_DRAWS if draws is None else int(draws))
    c = sel.chosen
    use = c.model if c is not None and (sel.passed or sel.requested != "auto") else "chain"
    users = len(fitted.users)
    if use == "chain":
        P_B, P_F = fitted.temporal_matrices()
        what = f"P_B, P_F per user ({fmt_count(users, 'user')})"
        description = f"first-order chain on the {fmt_count(K, 'quantile state')}"
    else:
        fz = fit_for_design(use, readings, fitted.quantizer, fitted.users, value_range=value_range, smoothing=s,
                            seed=int(seed), default_period=periods_from_slot(slot_seconds)[0])
        P_B, P_F = z_temporal_matrices(fz)
        description = str(fz.description)
        what = (f"P_B, P_F of the augmented chain Z of {use} ({fmt_count(P_F[0].shape[0], 'state')}) per user "
                f"({fmt_count(users, 'user')})")
    if sel.passed:
        verdict, model, why = "passed", c.model, c.why()
    else:
        verdict = "refuted"
        model = None if sel.requested == "auto" else c.model
        why = "; ".join(f"{x.model}: {x.why()}" for x in sel.checks) if sel.requested == "auto" else c.why()
    mc = check_summary(sel)
    mc["skipped"] = skipped
    return TPLModel(
        P_B=P_B, P_F=P_F, source=f"{source}: {what}", verdict=verdict, model=model, why=why, used=use,
        refuted=tuple((x.model, x.why()) for x in sel.checks if not x.passed), users=users, slot_seconds=slot_seconds,
        model_check=mc,
        markov_model={"requested": spec, "used": use, "states": K, "z_states": int(P_F[0].shape[0]),
                      "description": description},
    )


# --------------------------------------------------------------------------------------------- the numbers


def tpl_model_free(budgets, *, delta: float, windows=()) -> dict:
    """The model-free guarantee of releases with budgets ε_1..ε_T, one per step: the JSON ``model_free`` object.

    The release at step t is ε_t-DP in the user's value at t, hence in the user's whole series; over the T steps the
    T releases compose to pure Σ ε_t (basic composition: C. Dwork, A. Roth, "The Algorithmic Foundations of
    Differential Privacy", 2014, Theorem 3.16) and to (ε, δ) by ``dp_accounting``'s PLD accountant
    (:func:`policyopt.privacy.model_free.model_free_of_releases`, which calls
    :func:`~policyopt.privacy.model_free.laplace_epsilon`'s accounting with the budgets as a sequence), whatever the
    correlation; ``w_event`` for each window w < T (Kellaris et al., PVLDB 7(12), 2014).  The pure Σ ε_t holds for any
    ε_t-DP mechanisms; the (ε, δ) composes Laplace mechanisms (``LaplaceDpEvent``), the releases of Cao et al.'s
    experiments and the ones whose noise variance 2(Δf/ε_t)² ``tpl-budget`` minimises (another ε_t-DP mechanism, e.g.
    randomized response, can have a larger (ε, δ); its pure ε is the same).

    Parameters
    ----------
    budgets : array_like of float, shape (T,)
        ε_t ≥ 0, nats.
    delta : float
        0 ≤ δ < 1.
    windows : sequence of int
        w-event windows (steps); those ≥ T are left out (the whole series is the main guarantee).

    Returns
    -------
    dict
        ``{horizon, releases, epsilon_c (the largest ε_t), epsilon_pure, delta, epsilon, accountant, w_event}``.

    Raises
    ------
    InvalidInputError
        Bad budgets or δ (as :func:`~policyopt.privacy.model_free.model_free_of_releases`).
    """
    return _model_free(budgets, delta=delta, windows=windows)[1]


def _model_free(budgets, *, delta: float, windows=()):
    """(ModelFreeGuarantee, its dict) of :func:`tpl_model_free`."""
    from policyopt.privacy.model_free import model_free_of_releases

    b = np.asarray(budgets, dtype=float)
    ws = tuple(int(w) for w in windows if int(w) < b.size)
    g = model_free_of_releases(b, np.arange(b.size, dtype=np.int64), delta=float(delta), windows=ws)
    return g, g.to_dict()


def tpl_suprema(P_B, P_F, epsilon: float) -> dict:
    """Theorem 11 suprema of BPL, FPL and TPL for a constant budget ε (Cao et al. 2019), rounded up.

    Parameters
    ----------
    P_B, P_F : matrix, None, or list of them (per user)
    epsilon : float
        The constant budget, nats.

    Returns
    -------
    dict
        ``bpl``, ``fpl``, ``tpl``: a number (the maximum over users, rounded up), ``"divergent"`` where a user's
        supremum is infinite, or :data:`UNCERTIFIED` where it is finite but has no finite rounding bound.
    """
    from policyopt.privacy.tpl_supremum import supremum_upper

    def sup(P):
        """Theorem 11 supremum per user (ε where L ≡ 0); None if any user diverges."""
        mats = P if isinstance(P, list) else [P]
        vals = []
        for m in mats:
            if m is None:
                vals.append(epsilon)
                continue
            value = supremum_upper(m, epsilon)
            if value is None:
                return None
            if not math.isfinite(value):
                return UNCERTIFIED  # finite, but no finite rounding bound: ε at the edge of divergence
            vals.append(value)
        return vals

    b, f = sup(P_B), sup(P_F)
    out = {k: "divergent" if v is None else v if isinstance(v, str) else max(v) for k, v in (("bpl", b), ("fpl", f))}
    if b is None or f is None:
        out["tpl"] = "divergent"
    elif isinstance(b, str) or isinstance(f, str):
        out["tpl"] = UNCERTIFIED
    else:
        n = max(len(b), len(f))
        b = b * n if len(b) == 1 else b
        f = f * n if len(f) == 1 else f
        # per user, then the max (eq. 3); x, y are rounded up, the sum is rounded up once more: TPL = BPL + FPL − ε (10)
        out["tpl"] = max(math.nextafter(x + y - epsilon, math.inf) for x, y in zip(b, f))
    return out


def _default_delta(model: TPLModel, delta) -> tuple[float, str]:
    """δ and where it comes from: given, or :func:`policyopt.privacy.model_free.default_delta` of the data's users (of
    one user for matrices)."""
    from policyopt.privacy.model_free import check_delta, default_delta

    if delta is not None:
        return check_delta(delta), "given"
    users = model.users or 1
    return default_delta(int(users)), f"default min(1e-6, 1/(10·I)) with I = {users}"


def _windows(model: TPLModel) -> tuple:
    """w-event windows (steps): a day and a week of slots when the slot length is known, else 24 and 168."""
    from policyopt.studies.guarantee import default_windows

    return default_windows(model.slot_seconds)


def _label(model: TPLModel) -> str:
    """The model a statement names, in words."""
    if model.verdict == "assumed":
        return str(model.model)
    if model.used not in (None, "chain"):
        return f"the Markov model {model.model} (the leakage computed on its augmented chain Z, which bounds the one about X_t)"
    return f"the Markov model {model.model}"


def _reason(model: TPLModel) -> str:
    """Why the model-free guarantee is stated first."""
    if model.model is None:
        return "no Markov model passed its checks on held-out readings"
    return f"the Markov model {model.model} is refuted by the readings ({model.why})"


def _warnings(model: TPLModel, accept_refuted, printed_epsilon, what: str) -> list:
    """Every refuted model, why its numbers are not bounds, and an accepted refuted model's number printed anyway."""
    out = []
    if model.verdict == "passed":
        for name, why in model.refuted:  # auto: the simpler models refuted before the one that passed
            out.append(f"the Markov model {name} is refuted by the readings ({why}); {model.model} passed and is used")
    elif model.verdict == "refuted":
        if len(model.refuted) == 1:
            name, why = model.refuted[0]
            out.append(f"the Markov model {name} is refuted by the readings ({why}): Cao et al.'s leakage assumes an "
                       f"adversary who knows it, so its {what} is not a bound for these data; the guarantee stated is the "
                       "model-free one")
        else:
            out += [f"the Markov model {name} is refuted by the readings ({why})" for name, why in model.refuted]
            out.append(f"no Markov model passed its checks: Cao et al.'s leakage assumes an adversary who knows the model, "
                       f"so the {what} is not a bound for these data; the guarantee stated is the model-free one")
        if accept_refuted is not None and printed_epsilon is not None:
            out.append(f"the refuted model {model.used}'s {what} ({fmt_upper(printed_epsilon)} nats) is printed on request "
                       f"(--accept-refuted: {accept_refuted}); it is not a bound for these data")
    return out


def _guarantee(model: TPLModel, mf: dict | None, mf_text: str | None, model_epsilon, horizon: int, accept_refuted,
               model_text) -> tuple[dict | None, bool]:
    """The JSON ``guarantee`` and whether the model's numbers are stated.

    The decision is :func:`policyopt.studies.guarantee.choose_guarantee`'s (the one place that decides what a report
    states first); its sentence is replaced by the leakage's own (`model_text` for a model-based guarantee, the
    model-free statement and its reason otherwise).
    """
    from policyopt.studies.guarantee import choose_guarantee

    g, stated, _ = choose_guarantee(model=model.model, verdict=model.verdict, why=model.why, model_free=mf,
                                    model_epsilon=model_epsilon, model_horizon=horizon, accept_refuted=accept_refuted)
    if g is None:
        return None, stated
    if g.kind == "model-based":
        g = replace(g, statement=model_text)
    else:
        g = replace(g, statement=f"{mf_text} — stated because {_reason(model)}")
    return g.to_dict(), stated


def tpl_report(model: TPLModel, budgets, *, delta: float | None = None, accept_refuted: str | None = None) -> dict:
    """The JSON object of ``policyopt tpl``: BPL/FPL/TPL (Cao et al. 2019, eqs. (10), (13), (15)) of budgets ε_1..ε_T,
    stated as bounds only under a model that passed its checks (or matrices given without data), and always the
    model-free guarantee of the T releases.

    Parameters
    ----------
    model : TPLModel
        From :func:`tpl_model_from_data` or :func:`tpl_model_from_matrices`.
    budgets : array_like of float, shape (T,)
        ε_t ≥ 0 (nats).
    delta : float, optional
        δ of the model-free (ε, δ) (default min(1e-6, 1/(10·I)), I the data's users; 1e-6 for matrices).
    accept_refuted : str, optional
        A reason to compute and print a refuted model's leakage anyway (recorded; never the headline).

    Returns
    -------
    dict
        ``source``, ``guarantee``, ``model_free``, ``budgets``, ``bpl``, ``fpl``, ``tpl``, ``max_tpl``,
        ``rounding_margin``, ``supremum``, ``supremum_epsilon``, ``accepted_refuted``, ``warnings``, ``markov_model``,
        ``model_check`` (the leakage fields ``null`` when not stated).

    Raises
    ------
    InvalidInputError
        Bad budgets or δ; an empty `accept_refuted`; a leakage that overflows a float.
    """
    from policyopt.privacy.tpl_envelope import check_budgets
    from policyopt.privacy.tpl_leakage import leakage_upper

    if accept_refuted is not None and not str(accept_refuted).strip():
        raise InvalidInputError("`accept_refuted` must give a reason (a non-empty text), got an empty one")
    b = check_budgets(budgets)
    T = int(b.size)
    d, d_src = _default_delta(model, delta)
    mfg, mf = _model_free(b, delta=d, windows=_windows(model))
    compute = model.trusted or accept_refuted is not None
    res = sup = None
    if compute:
        res = leakage_upper(model.P_B, model.P_F, b)  # every value rounded up (Cao et al. eqs. (13), (15), (10))
        if not (np.all(np.isfinite(res.tpl)) and np.all(np.isfinite(res.bpl)) and np.all(np.isfinite(res.fpl))):
            raise InvalidInputError("the leakage overflows a float for these budgets (TPL is not finite); use smaller "
                                    "budgets or a shorter horizon")
        sup = tpl_suprema(model.P_B, model.P_F, float(np.max(b)))
    max_tpl = None if res is None else res.tpl_level
    model_text = None
    if max_tpl is not None:
        what = ("an assumption nobody checked against data" if model.verdict == "assumed" else
                f"it passed its checks on held-out readings ({model.why})")
        model_text = (f"max TPL = {fmt_upper(max_tpl)} nats over {fmt_count(T, 'step')}: the release is α-DP_T for every "
                      f"α ≥ it (Cao et al. 2019, Definition 8) against an adversary who knows {_label(model)} — {what}")
    guarantee, stated = _guarantee(model, mf, mfg.statement(), max_tpl, T, accept_refuted, model_text)
    out = {
        "source": model.source,
        "guarantee": guarantee,
        "model_free": mf,
        "dp_delta_source": d_src,
        "budgets": b.tolist(),
        "bpl": None if res is None else res.bpl.tolist(),
        "fpl": None if res is None else res.fpl.tolist(),
        "tpl": None if res is None else res.tpl.tolist(),
        "max_tpl": max_tpl,
        "rounding_margin": None if res is None else res.margin,
        "supremum": sup,
        "supremum_epsilon": float(np.max(b)),
        "accepted_refuted": (None if model.trusted or accept_refuted is None else
                             {"model": model.used, "reason": str(accept_refuted)}),
        "warnings": _warnings(model, accept_refuted, max_tpl, "leakage"),
        "markov_model": model.markov_model,
        "model_check": model.model_check,
    }
    return out


def tpl_budget_report(model: TPLModel, alpha: float, horizon: int, method: str = "quantification", *,
                      delta: float | None = None, accept_refuted: str | None = None) -> dict:
    """The JSON object of ``policyopt tpl-budget``: budgets ε_1..ε_T meeting α-DP_T under the model (Cao et al. 2019,
    Algorithms 7 and 8, or the least-noise allocation), their model-free guarantee, and whether α-DP_T is supported.

    Under a model that passed (or matrices given without data) the budgets' max TPL ≤ α is stated; under a refuted
    model the budgets are still given (they are what the model asks for) but their α-DP_T is not supported: the
    leakage fields are ``null`` (unless `accept_refuted`) and the guarantee stated is the model-free (ε, δ) of those
    budgets over the T steps.

    Parameters
    ----------
    model : TPLModel
    alpha : float
        α of α-DP_T, nats.
    horizon : int
        T, steps.
    method : {"quantification", "upper-bound", "optimal"}
    delta : float, optional
        δ of the model-free guarantee (default as :func:`tpl_report`).
    accept_refuted : str, optional
        A reason to print a refuted model's leakage anyway.

    Returns
    -------
    dict
        The fields of ``tpl-budget --json`` (see the CLI reference), with ``guarantee``, ``model_free``,
        ``alpha_supported``, ``accepted_refuted``, ``warnings``, ``markov_model``, ``model_check``.

    Raises
    ------
    InvalidInputError
        Bad α, T, method or δ; an empty `accept_refuted`.
    """
    from policyopt.privacy.tpl_leakage import leakage_upper
    from policyopt.problems.tpl_budget import BudgetAllocationProblem

    if accept_refuted is not None and not str(accept_refuted).strip():
        raise InvalidInputError("`accept_refuted` must give a reason (a non-empty text), got an empty one")
    d, d_src = _default_delta(model, delta)
    problem = BudgetAllocationProblem(model.P_B, model.P_F, alpha, horizon)
    sol = problem.solve(method)
    compute = model.trusted or accept_refuted is not None
    naive = leakage_upper(model.P_B, model.P_F, np.full(int(horizon), float(alpha))) if compute else None  # ε_t = α
    out = {
        "source": model.source,
        "status": sol.status.value,
        "method": method,
        "alpha": float(alpha),
        "horizon": int(horizon),
        "guarantee": None,
        "model_free": None,
        "dp_delta_source": d_src,
        "alpha_supported": None,
        "budgets": None,
        "max_tpl": None,
        "total_variance": None,
        "message": sol.message,
        "naive": {"epsilon": float(alpha), "max_tpl": None if naive is None else naive.tpl_level},
        "accepted_refuted": None,
        "warnings": [],
        "markov_model": model.markov_model,
        "model_check": model.model_check,
    }
    mfg = None
    after = None
    if sol.decision is not None:
        budgets = np.asarray(sol.decision["budgets"], dtype=float)
        mfg, out["model_free"] = _model_free(budgets, delta=d, windows=_windows(model))
        out.update(budgets=budgets.tolist(), total_variance=sol.values.get("total_variance", sol.objective),
                   budget_shrink=sol.values.get("budget_shrink"))
        for key in _BUDGET_MODEL_FIELDS:  # model numbers: null unless stated below (suprema only where the method has them)
            if key in out or key in sol.values or not key.startswith("sup_"):
                out[key] = None
        if compute:
            after = leakage_upper(model.P_B, model.P_F, budgets)  # certified by the solver: after.tpl_level ≤ α
            out.update(max_tpl=after.tpl_level, bpl=after.bpl.tolist(), fpl=after.fpl.tolist(), tpl=after.tpl.tolist(),
                       rounding_margin=after.margin)
            for key in ("sup_bpl", "sup_fpl", "sup_tpl", "tpl_rounding_margin"):
                if key in sol.values:
                    out[key] = sol.values[key]
        # every other reported solver field (README: gap, proof, dual_bound, lp_bound, obbt_rounds, eps_lo, eps_hi,
        # phase times, warm_start_accepted, scip_status, nodes, ...); the verified values above are never overwritten
        out.update({k: v for k, v in sol.values.items() if k not in out and k != "alpha"})
        for key in ("dual_bound", "lp_bound"):  # lower bounds on the least total variance: rounded down
            if out.get(key) is not None:
                out[key] = round_down(out[key])
    max_tpl = out["max_tpl"]
    model_text = None
    if max_tpl is not None:
        what = ("an assumption nobody checked against data" if model.verdict == "assumed" else
                f"it passed its checks on held-out readings ({model.why})")
        model_text = (f"the budgets meet α-DP_T with α = {fmt_value(float(alpha))} nats (max TPL = "
                      f"{fmt_upper(max_tpl, 15)} nats ≤ α, Cao et al. 2019, Definition 8) against an adversary who knows "
                      f"{_label(model)} — {what}")
    if mfg is not None:
        out["guarantee"], stated = _guarantee(model, out["model_free"], mfg.statement(), max_tpl, int(horizon),
                                              accept_refuted, model_text)
        if out["guarantee"] is not None and out["guarantee"]["kind"] == "model-free":
            out["guarantee"]["statement"] += (f"; the budgets' α-DP_T (α = {fmt_value(float(alpha))} nats) is not "
                                              "supported: it assumes that model")
        out["alpha_supported"] = bool(model.trusted and max_tpl is not None and max_tpl <= float(alpha))
    if not model.trusted and accept_refuted is not None:
        out["accepted_refuted"] = {"model": model.used, "reason": str(accept_refuted)}
    out["warnings"] = _warnings(model, accept_refuted, max_tpl, "max TPL of these budgets")
    return out


# --------------------------------------------------------------------------------------------- the text


def _refuted_note(out: dict, noun: str = "number") -> str:
    """Why a refuted model's numbers are not printed (the reason only), or that they are printed on request."""
    acc = out.get("accepted_refuted")
    used = (out.get("markov_model") or {}).get("used") or "the model"
    if acc is not None:
        return (f"the refuted model {used}'s {noun}, printed on request (--accept-refuted: {acc['reason']}); not "
                f"{'a bound' if noun == 'number' else 'bounds'} for these data")
    who = "no Markov model passed its checks" if used == "chain" and (out.get("markov_model") or {}).get(
        "requested") == "auto" else f"the readings refute the Markov model {used}"
    return (f"Cao et al.'s leakage assumes an adversary who knows the model, and {who} (--accept-refuted REASON "
            "prints it, marked)")


def model_free_statement(mf: dict, budgets) -> str:
    """One line stating the model-free guarantee of :func:`tpl_model_free`'s object `mf` for `budgets` (privacy rounded
    up; :meth:`policyopt.privacy.model_free.ModelFreeGuarantee.statement`)."""
    from policyopt.privacy.model_free import ModelFreeGuarantee, WEvent

    b = np.asarray(budgets, dtype=float)
    positive = b[b > 0]
    g = ModelFreeGuarantee(mf["horizon"], mf["releases"], mf["epsilon_c"], mf["epsilon_pure"], mf["delta"], mf["epsilon"],
                           mf["accountant"], tuple(WEvent(**w) for w in mf.get("w_event") or ()),
                           float(positive.min()) if positive.size else 0.0)
    return g.statement()


def _tail_lines(out: dict, width: int, *, model_free_line: bool) -> list:
    """The model-free, model-check and warning lines of a report, labels padded to `width`."""
    lines = []
    if model_free_line and out.get("model_free"):
        lines.append(f"{'model-free':<{width}}: {model_free_statement(out['model_free'], out['budgets'])}")
    mc = out.get("model_check")
    if mc:
        from policyopt.studies.markov_check import model_check_line

        text = model_check_line(mc)
        if mc.get("skipped"):
            text += "; not tried (too large for the leakage): " + ", ".join(
                f"{s['model']} ({s['why']})" for s in mc["skipped"])
        lines.append(f"{'model check':<{width}}: {text}")
    for w in out.get("warnings") or []:
        lines.append(f"{'warning':<{width}}: {w}")
    return lines


def format_tpl_report(out: dict) -> str:
    """The text of ``policyopt tpl`` for :func:`tpl_report`'s object (with ``wall_time_s``); privacy rounded up.

    The guarantee stated first; the leakage table only when the model's numbers are stated (marked when a refuted
    model's are printed on request); then the model-free guarantee (when the headline is model-based), the model check
    and the warnings.
    """
    from policyopt.privacy.tpl_leakage import TemporalLeakage, format_leakage

    g = out.get("guarantee")
    head = f"guarantee: {g['kind']}: {g['statement']}" if g else "guarantee: none (no releases)"
    b = np.asarray(out["budgets"], dtype=float)
    if out.get("max_tpl") is not None:
        z = np.zeros((1, b.size))
        res = TemporalLeakage(bpl=np.asarray(out["bpl"]), fpl=np.asarray(out["fpl"]), tpl=np.asarray(out["tpl"]),
                              budgets=b, bpl_users=z, fpl_users=z)
        lines = format_leakage(res, source=out["source"], supremum=out["supremum"],
                               wall_time_s=out.get("wall_time_s")).split("\n")
        if out.get("accepted_refuted") is not None:
            at = next(i for i, x in enumerate(lines) if x.startswith("max TPL"))
            lines.insert(at, f"refuted  : the BPL/FPL/TPL below are {_refuted_note(out, 'numbers')}")
    else:
        lines = [
            "policyopt tpl: temporal privacy leakage (Cao et al. 2019, eqs. (11), (13), (15); nats)",
            f"model    : {out['source']}",
            f"steps    : {b.size}, budgets from {fmt_value(float(b.min()))} to {fmt_value(float(b.max()))} nats",
            f"max TPL  : not stated: {_refuted_note(out)}",
        ]
        if out.get("wall_time_s") is not None:
            lines.append(f"wall time: {out['wall_time_s']:.3f} s")
    lines.insert(1, head)
    tail = _tail_lines(out, 9, model_free_line=bool(g) and g["kind"] == "model-based")
    if lines[-1].startswith("wall time"):
        lines = lines[:-1] + tail + lines[-1:]
    else:
        lines += tail
    return check_text("\n".join(lines))


def format_tpl_budget_report(out: dict) -> str:
    """The text of ``policyopt tpl-budget`` for :func:`tpl_budget_report`'s object (with ``wall_time_s``)."""
    alpha, T = out["alpha"], out["horizon"]
    g = out.get("guarantee")
    lines = [
        f"policyopt tpl-budget: budgets for α = {fmt_value(alpha)}-DP_T over {T} steps ({out['method']})",
        f"guarantee  : {g['kind']}: {g['statement']}" if g else "guarantee  : none (no budgets were found)",
        f"model      : {out['source']}",
        f"status     : {out['status']}",
        f"message    : {out['message']}",
    ]
    stated = out.get("max_tpl") is not None
    accepted = out.get("accepted_refuted") is not None
    mark = f" — {_refuted_note(out)}" if accepted else ""
    if out["naive"]["max_tpl"] is not None:
        lines.append(f"before     : ε_t = α every step gives max TPL = {fmt_upper(out['naive']['max_tpl'])} nats{mark}")
    if out["budgets"] is not None:
        b = out["budgets"]
        mid = b[1:-1]
        if len(b) == 1:
            shown = f"ε_1 = {fmt_exact(b[0])} nats"
        elif not mid:
            shown = f"ε_1 = {fmt_exact(b[0])}, ε_T = {fmt_exact(b[-1])} nats"
        elif min(mid) == max(mid):
            shown = f"ε_1 = {fmt_exact(b[0])}, ε_2..ε_{{T−1}} = {fmt_exact(mid[0])}, ε_T = {fmt_exact(b[-1])} nats"
        else:
            shown = (f"ε_1 = {fmt_exact(b[0])}, ε_2..ε_{{T−1}} from {fmt_exact(min(mid))} to "
                     f"{fmt_exact(max(mid))} (varying; all T in --json), ε_T = {fmt_exact(b[-1])} nats")
        lines.append(f"budgets    : {shown}")
        if stated:
            lines.append(f"after      : max TPL = {fmt_upper(out['max_tpl'], 15)} nats (rounded up; ≤ α in exact "
                         f"arithmetic){mark}")
        else:
            lines.append(f"after      : max TPL not stated and α-DP_T not supported: {_refuted_note(out)}")
        lines.append(f"variance   : Σ 2(Δf/ε_t)² = {fmt_value(out['total_variance'])} (Δf = 1)")
        saved = [(name, out.get(f"savings_vs_{key}"), out.get(f"variance_{key}"))
                 for key, name in (("quantification", "Algorithm 8 (quantification)"),
                                   ("upper_bound", "Algorithm 7 (upper bound)"))]
        saved = [s for s in saved if s[1] is not None and s[2] is not None]
        if saved:  # the saving is never overstated: percentages rounded down
            lines.append("saving     : the optimum's noise variance is " + " and ".join(
                f"{math.floor(10000 * s) / 100:g}% below that of {name[:-1]}, {fmt_value(v)})" for name, s, v in saved))
        if out.get("gap") is not None:
            lines.append(f"proof      : relative gap {fmt_value(out['gap'], 3)} ({out.get('proof') or 'no proof'}; "
                         f"lower bound {fmt_lower(out.get('dual_bound') if out.get('proof') == 'scip' else out.get('lp_bound'))})")
    lines += _tail_lines(out, 11, model_free_line=bool(g) and g["kind"] == "model-based")
    if out.get("wall_time_s") is not None:
        lines.append(f"wall time  : {out['wall_time_s']:.3f} s")
    return check_text("\n".join(lines))


def public_json(out: dict) -> dict:
    """`out` with numpy scalars made Python numbers and non-finite floats ``None`` (strict JSON)."""
    return json_clean(out)
