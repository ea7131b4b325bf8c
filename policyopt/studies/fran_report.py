"""The FRAN design job and its report: what ``policyopt fran`` prints, as a Python object.

Source: Y. Luo, M. Zhang, J. Xu, J. Chen, J. Huang, "Correlated-Sequence Differential Privacy", preprint, 2025:
problem P1 (eqs. 23–24), the sound leakage (first line of eq. 45), the paper's bound (15), Fig. 5's baselines.

:func:`design_fran` solves P1 for a coupling Markov chain, probes the age limit like ``policyopt schedule`` and
computes the Fig. 5 baselines; :class:`FRANReport` holds the result.  ``str(report)`` is exactly the text of
``policyopt fran`` and ``report.to_dict()`` exactly its ``--json`` object.  Every printed leakage is rounded
outward: the sound bound by :func:`~policyopt.privacy.fran.sound_leakage_upper`, the exact leakage by
:func:`~policyopt.privacy.fran.exact_leakage_upper` and the paper's eq. (15) — not an upper bound, labelled so —
by :func:`~policyopt.privacy.fran.paper_leakage_upper`, for consistency.  Privacy in nats, time in slots.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field

from policyopt.errors import InvalidInputError, fmt
from policyopt.formatting import check_text, fmt_epsilon_c, fmt_upper, json_clean
from policyopt.result import Solution, result_repr

__all__ = ["FRANReport", "design_fran", "format_fran_report", "FRAN_METHODS"]

#: Back ends of :func:`design_fran` (``groups``: exact search over independent groups, no baselines).
FRAN_METHODS = ("enumeration", "cvxpy", "scip", "groups")

_BASELINES = (("dp", "standard DP (no aging)"), ("ddp", "DDP (group sensitivity, no aging)"),
              ("adp", "ADP (sequences as independent chains)"), ("csdp", "CSDP / FRAN (P1)"))


@dataclass(frozen=True)
class FRANReport:
    """Everything ``policyopt fran`` prints.

    Attributes
    ----------
    fields : dict
        The JSON object of ``policyopt fran --json`` (see :meth:`to_dict`): ``status``, ``aoi`` (slots, one
        per sequence, or None), ``epsilon_c`` (nats, the value to deploy, never rounded), ``epsilon_s`` (nats,
        rounded outward), ``bound``, ``mse``, ``max_mse``, ``max_age``, ``query``, ``method``, ``model``,
        ``n_sequences``, ``n_states``, ``correlation_degree``, ``d_k``, ``sensitivity``, ``distance``,
        ``distance_kind``, ``message``, ``baselines`` (None with ``method="groups"``, which adds ``groups``).
    solution : Solution
        The solver's result (unrounded objective).
    """

    fields: dict
    solution: Solution = field(repr=False, compare=False)

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        r = self.fields
        eps = "no design" if r.get("epsilon_s") is None else f"ε_S = {fmt_upper(r['epsilon_s'])} nats (rounded up)"
        return result_repr(self, head=f"{r.get('status')}: AoI {r.get('aoi')}, {eps}; print(report) for the full text")

    def to_dict(self) -> dict:
        """The ``--json`` object (a deep copy; strict JSON: non-finite floats become null)."""
        return json_clean(copy.deepcopy(self.fields))

    @property
    def status(self) -> str:
        """``optimal``, ``unbounded``, ``feasible``, ``infeasible`` or ``unknown``."""
        return self.fields["status"]

    @property
    def epsilon_s(self) -> float | None:
        """The reported leakage ε_S (nats), rounded outward; None without a design."""
        return self.fields["epsilon_s"]

    def __str__(self) -> str:
        """The text ``policyopt fran`` prints (:func:`format_fran_report`)."""
        return format_fran_report(self.to_dict())

    def _repr_html_(self) -> str:
        """A small HTML table for notebooks: the design, its leakage and the Fig. 5 baselines (sound)."""
        from html import escape

        r = self.to_dict()
        rows = [
            ("model", r["model"]),
            ("status", r["status"]),
            ("AoI vector (slots)", "—" if r["aoi"] is None else str(r["aoi"])),
            ("ε_C (nats)", fmt_epsilon_c(r["epsilon_c"])),
            (f"ε_S (nats, {r['bound']} bound{', NOT an upper bound' if r['bound'] == 'paper' else ''})",
             fmt_upper(r["epsilon_s"])),
            (f"l_MSE (≤ {r['max_mse']:g})", "—" if r["mse"] is None else f"{r['mse']:.6g}"),
        ]
        for name, text in _BASELINES if r["baselines"] else ():
            snd = r["baselines"][name]["sound"]
            rows.append((f"baseline: {text}", "n/a" if snd["epsilon_s"] is None else fmt_upper(snd["epsilon_s"])))
        rows += [("method", r["method"]), ("message", r["message"])]
        body = "".join(
            f"<tr><th style='text-align:left'>{escape(k)}</th><td style='text-align:left'>{escape(str(v))}</td></tr>"
            for k, v in rows
        )
        return f"<table class='policyopt-fran'>{body}</table>"


def _probe_age_limit(problem, sol, method, status, message):
    """Like ``schedule``'s A = A_MAX + 1 probe: when the optimum uses the age limit, solve once with the limit one
    higher; if that lowers ε_S the answer is ``unbounded`` (best within the limit returned), else it stays optimal."""
    from policyopt.problems.fran import AOI_VECTOR_LIMIT, FRANProblem

    max_age = problem.max_age
    wider_count = (max_age + 2) ** problem.cmc.n_sequences
    if wider_count > AOI_VECTOR_LIMIT:
        return status, (message + f"; the age limit {max_age} binds and was not probed beyond ((A+2)^s = "
                        f"{wider_count} AoI vectors > {AOI_VECTOR_LIMIT}): a larger --max-age may lower ε_S")
    wider_problem = FRANProblem(problem.cmc, problem.max_mse, query=problem.query, max_age=max_age + 1,
                                bound=problem.bound, distance=problem.distance_kind)
    wider = wider_problem.solve(method)
    if wider.objective is not None and sol.objective is not None and wider.objective < sol.objective * (1 - 1e-12):
        here = _leakage_upper(problem, problem.bound, sol, max_age)  # both rounded outward, like every leakage printed
        there = _leakage_upper(wider_problem, problem.bound, wider, max_age + 1)
        return "unbounded", (
            f"unbounded: the age limit binds and --max-age {max_age + 1} lowers ε_S from "
            f"{fmt_upper(here)} to {fmt_upper(there)} nats; best design within --max-age "
            f"{max_age} returned ({message})")
    return status, message + f"; the age limit {max_age} is reached, but --max-age {max_age + 1} does not lower ε_S"


def _round_baselines(baselines: dict, d_k: float, max_age: int) -> dict:
    """Fig. 5 baselines with every ε_S rounded outward (sound: sound_leakage_upper; paper: paper_leakage_upper)."""
    from policyopt.privacy.fran import paper_leakage_upper, sound_leakage_upper

    out = copy.deepcopy(baselines)
    for row in out.values():
        snd, pap = row.get("sound"), row.get("paper")
        if isinstance(snd, dict) and snd.get("epsilon_s") is not None:
            snd["epsilon_s"] = sound_leakage_upper(snd["epsilon_s"], snd.get("epsilon_c"), d_k, max_age)
        if isinstance(pap, dict) and pap.get("epsilon_s") is not None:
            pap["epsilon_s"] = paper_leakage_upper(pap["epsilon_s"], max_age)
    return out


def design_fran(cmc, max_mse, *, query: str = "mean", max_age: int = 10, bound: str = "sound",
                method: str = "enumeration", model_label: str | None = None) -> FRANReport:
    """Solve problem P1 of Luo et al. (2025) and report it as ``policyopt fran`` does.

    Chooses the AoI vector (slots) and the Laplace level ε_C (nats) of FRAN that minimise the leakage ε_S
    subject to l_MSE ≤ `max_mse` (eqs. 23–24), probes the age limit (``unbounded`` when ``max_age + 1``
    lowers ε_S) and computes the baselines of the paper's Fig. 5 (DP, DDP, ADP, CSDP) under the same bound.

    Parameters
    ----------
    cmc : CouplingMarkovChain
        The coupled sequences (s sequences, m states each).
    max_mse : float
        l̄ > 0, bound on l_MSE (22), squared query units.
    query : {"mean", "sum", "max", "min"}, keyword-only
        Released query f of the aged snapshot.
    max_age : int, keyword-only
        Largest age per sequence, slots.
    bound : {"sound", "paper", "exact"}, keyword-only
        Leakage minimised and reported: the sound bound ln(1 + Δ_k(e^{d(k)ε_C} − 1)) (default), the paper's
        eq. (15) d(k)Δ_kε_C (NOT an upper bound; one :class:`~policyopt.privacy.fran.PaperBoundWarning` is
        issued), or the exact leakage of small systems (scalar query).
    method : {"enumeration", "cvxpy", "scip", "groups"}, keyword-only
        P1 back end; ``groups`` is the exact search over independent groups of coupled sequences (queries
        mean/sum, bounds sound/paper, no baselines).
    model_label : str, optional, keyword-only
        How the report names the model (the CLI passes the file or data set).

    Returns
    -------
    FRANReport

    Raises
    ------
    InvalidInputError
        If `method` is unknown, or as :class:`~policyopt.problems.fran.FRANProblem` /
        :class:`~policyopt.problems.fran_groups.GroupedFRANProblem` (bad `max_mse`, `max_age`, `query`,
        `bound`, or a problem too large).
    InfeasibleProblemError
        As the back ends, when no design meets `max_mse`.

    References
    ----------
    Y. Luo, M. Zhang, J. Xu, J. Chen, J. Huang, "Correlated-Sequence Differential Privacy", preprint, 2025,
    eqs. (15), (23)–(24), (45) and Fig. 5.

    Examples
    --------
    >>> from policyopt.models.cmc import two_binary_cmc
    >>> report = design_fran(two_binary_cmc(0.3, 0.3, 0.5), 0.5, max_age=3)
    >>> report.status, report.to_dict()["aoi"]  # --max-age 4 would lower ε_S
    ('unbounded', [3, 3])
    """
    from policyopt.privacy.fran import PaperBoundWarning

    if method not in FRAN_METHODS:
        raise InvalidInputError(f"`method` must be one of {FRAN_METHODS}, got {fmt(method)}")
    label = model_label or "coupling Markov chain given in Python"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PaperBoundWarning)  # one warning below, after the problem is accepted
        fields, sol = (_design_groups if method == "groups" else _design_joint)(cmc, max_mse, query, max_age, bound,
                                                                                 method, label)
    if bound == "paper":
        warnings.warn("Luo et al.'s (2025) eq. (15) is NOT an upper bound of the leakage (its proof uses "
                      "ln(1 + x(e^y − 1)) ≤ xy, false for 0 < x < 1); the sound bound is the default",
                      PaperBoundWarning, stacklevel=2)
    return FRANReport(fields, sol)


def _leakage_upper(problem, bound: str, sol: Solution, max_age: int):
    """The solution's ε_S rounded outward for its bound (None without a design)."""
    from policyopt.privacy.fran import exact_leakage_upper, paper_leakage_upper, sound_leakage_upper

    if sol.decision is None or sol.objective is None:
        return sol.objective
    eps = sol.decision["epsilon_c"]
    if bound == "sound":
        return sound_leakage_upper(sol.objective, eps, problem.d_k, max_age)
    if bound == "paper":
        return paper_leakage_upper(sol.objective, max_age)
    return exact_leakage_upper(sol.objective, problem.cmc, problem.query, sol.decision["aoi"], eps)


def _report_fields(prob, sol: Solution, cmc, bound: str, max_age: int, label: str, *, status: str, message: str,
                   baselines, groups=None) -> dict:
    """The report's fields in the order of the ``--json`` object (``groups`` only for the group search)."""
    feasible = sol.decision is not None
    fields = {
        "status": status,
        "aoi": list(sol.decision["aoi"]) if feasible else None,
        "epsilon_c": sol.decision["epsilon_c"] if feasible else None,
        "epsilon_s": _leakage_upper(prob, bound, sol, max_age),
        "bound": bound,
        "mse": sol.values.get("mse"),
        "max_mse": prob.max_mse,
        "max_age": max_age,
        "query": prob.query.name,
        "method": sol.method,
        "model": label,
        "n_sequences": cmc.n_sequences,
        "n_states": cmc.n_states,
        "correlation_degree": cmc.correlation_degree,
        "d_k": prob.d_k,
        "sensitivity": prob.sensitivity,
        "distance": sol.values.get("distance"),
        "distance_kind": prob.distance_kind,
    }
    if groups is not None:
        fields["groups"] = groups
    fields["message"] = message
    fields["baselines"] = baselines
    return fields


def _design_joint(cmc, max_mse, query, max_age, bound, method, label):
    from policyopt.problems.fran import FRANProblem
    from policyopt.solvers.fran_solvers import fig5_baselines

    prob = FRANProblem(cmc, max_mse, query=query, max_age=max_age, bound=bound)
    sol = prob.solve(method)
    baselines = fig5_baselines(prob)
    feasible = sol.decision is not None
    status, message = sol.status.value, sol.message
    if feasible and max_age > 0 and max(sol.decision["aoi"]) >= max_age and status == "optimal":
        status, message = _probe_age_limit(prob, sol, method, status, message)
    fields = _report_fields(prob, sol, cmc, bound, max_age, label, status=status, message=message,
                            baselines=_round_baselines(baselines, prob.d_k, max_age))
    return fields, sol


def _design_groups(cmc, max_mse, query, max_age, bound, method, label):
    from policyopt.problems.fran_groups import GroupedFRANProblem

    prob = GroupedFRANProblem(cmc, max_mse, query=query, max_age=max_age, bound=bound)
    sol = prob.solve()
    fields = _report_fields(prob, sol, cmc, bound, max_age, label, status=sol.status.value, message=sol.message,
                            baselines=None, groups=sol.values["groups"])
    return fields, sol


def format_fran_report(r: dict) -> str:
    """The text of ``policyopt fran`` for a report's JSON object (:meth:`FRANReport.to_dict`).

    Leakages are printed rounded up (:func:`~policyopt.formatting.fmt_upper`); ε_C, the value to deploy, in
    full (``repr``, the digits of the JSON).

    Parameters
    ----------
    r : dict
        As :meth:`FRANReport.to_dict` returns.

    Returns
    -------
    str
        Lines separated by ``\\n``, no final newline.
    """
    groups = r["baselines"] is None
    head = [
        "FRAN design, problem P1 of Luo et al. (2025, eqs. 23–24)" + (", group search" if groups else ""),
        f"model       : {r['model']}; s = {r['n_sequences']}, m = {r['n_states']}, k = {r['correlation_degree']}, "
        f"d(k) = {r['d_k']:g}, Δf = {r['sensitivity']:.6g} ({r['query']})",
        f"status      : {r['status']} ({r['method']}: {r['message']})",
    ]
    what = {"sound": "sound bound ln(1 + Δ_k(e^{d(k)ε_C} − 1))" + (
                " with Δ_k ≤ the spectral upper bound (Zhang et al. 2024 eq. 55, matrix-free), not the exact Δ_k"
                if r["distance_kind"] == "spectral" else ""),
            "paper": "Luo et al. (2025) eq. (15) d(k)Δ_kε_C — NOT an upper bound",
            "exact": "exact leakage of FRAN"}[r["bound"]]
    lines = head
    if r["aoi"] is not None:
        lines += [
            f"AoI vector  : {r['aoi']} slots (each ≤ {r['max_age']})",
            f"epsilon_c   : {fmt_epsilon_c(r['epsilon_c'])} nats (Laplace scale Δf/ε_C)",
            f"epsilon_s   : {fmt_upper(r['epsilon_s'])} nats ({what}, rounded up)",
            f"l_MSE       : {r['mse']:.6g} ≤ {r['max_mse']:g}",
        ]
    if groups:
        lines.append("baselines   : not computed with --method groups (they need the joint chain of all sequences)")
        return check_text("\n".join(lines))
    lines.append("baselines under the same MSE bound (ε_S in nats, rounded up; sound | paper eq. 15):")
    for name, text in _BASELINES:
        row = r["baselines"][name]
        snd, pap = row["sound"], row["paper"]
        s_txt = "n/a" if snd["epsilon_s"] is None else f"{fmt_upper(snd['epsilon_s'])} (A={snd['aoi']})"
        p_txt = "n/a" if pap["epsilon_s"] is None else f"{fmt_upper(pap['epsilon_s'])} (A={pap['aoi']})"
        if "note" in snd:
            p_txt += f"  ({snd['note']})"
        lines.append(f"  {text:<38} {s_txt:<26} | {p_txt}")
    lines.append("  (ADP ignores the coupling, so its number is not a CSDP guarantee for coupled sequences)")
    return check_text("\n".join(lines))
