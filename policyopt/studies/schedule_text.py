"""The text ``policyopt schedule`` prints, one function per section, from the report's JSON object.

:func:`format_report` is ``str()`` of a :class:`~policyopt.studies.schedule.ScheduleReport`; privacy numbers are
rounded outward (:mod:`policyopt.formatting`).
"""

from __future__ import annotations

import math

from policyopt.formatting import (check_text, fmt_band, fmt_count, fmt_epsilon_c, fmt_lower, fmt_range, fmt_upper,
                                  fmt_value)

__all__ = ["format_report"]


def _peak_risk_line(r: dict) -> str:
    """``peak risk`` for an integer schedule: ε* rounded up, or why it is not stated, or that a refuted model's ε* is
    printed on request (``--accept-refuted``)."""
    if r.get("peak_risk") is None:
        g = r.get("guarantee") or {}
        if g.get("kind") == "model-free":
            return ("peak risk   : not stated — no Markov model of the readings passed its checks (see model check), so no "
                    "model-based ε* is a bound for them; --accept-refuted REASON prints the refuted model's")
        return "peak risk   : none — condition (31) fails for this schedule under the model (its ε* diverges)"
    acc = r.get("accepted_refuted")
    return (f"peak risk   : ε* = {fmt_upper(r['peak_risk'])} nats"
            + ("" if r["method"] == "exact" else " ((39a) with the envelope: an upper bound on the exact ε* of integer schedules)")
            + (f" — under the REFUTED model {acc['model']}, printed on request (--accept-refuted: {acc['reason']}); not a "
               "bound for these data" if acc else ""))


def _markov_name(r: dict) -> str | None:
    """The richer Markov model whose Δ_Z(t) the design used (a sweep row's ``markov_model``, a schedule's
    ``deployment.model.markov_model``); ``None`` for the first-order chains."""
    dep = r.get("deployment") if isinstance(r.get("deployment"), dict) else {}
    name = r.get("markov_model") or (dep.get("model") or {}).get("markov_model")
    return None if name in (None, "chain") else name


def _states(m: dict) -> str:
    """``", K states"`` of a model dict, empty for a Δ(t) source without states (e.g. AR(1))."""
    return "" if m.get("states") is None else f", {fmt_count(m['states'], 'state')}"


def _model_lines(r: dict, m: dict, unit: str, vunit: str) -> list[str]:
    """The head: title, the guarantee stated first, the model or the pilot → deployment, value range, Δ(t), envelope,
    excluded users, sparse estimation rows."""
    users, pilot = m.get("users"), m.get("pilot_users")
    from policyopt.studies.guarantee import guarantee_lines

    lines = ["policyopt schedule: peak age-dependent privacy risk (Zhang et al. 2024, problem (28))", *guarantee_lines(r)]
    if pilot is not None and users != pilot:
        lines.append(f"model       : {m.get('source') or 'population given in Python'}; {fmt_count(pilot, 'pilot user')}"
                     f"{_states(m)}")
        if m.get("readings_penalty"):
            markov = _markov_name(r)
            what = ("MSE and Δ(t) from their readings" if "from the data" in (m.get("max_tv_source") or "")
                    else f"MSE from their readings, Δ(t) the maximum over their {markov} models' chains Z" if markov
                    else "MSE from their readings, Δ(t) the maximum over their chains")
            lines.append(f"deployment  : I = {fmt_count(users, 'user')} drawn like the {fmt_count(pilot, 'pilot user')} "
                         f"({what})")
        else:
            lines.append(f"deployment  : I = {fmt_count(users, 'user')}, each following one of the "
                         f"{fmt_count(pilot, 'pilot chain')} in equal shares")
    else:
        lines.append(f"model       : {m.get('source') or 'population given in Python'}; {fmt_count(m['users'], 'user')}"
                     f"{_states(m)}")
    if m.get("value_range") is not None:
        lo, hi = m["value_range"]
        how = ("declared, public" if m.get("value_range_declared") else {
            "model": "the model's state values", "data": "from the data (NOT private)"}.get(
            m.get("value_range_source"), "the state values, not declared public (NOT private when estimated from data)"))
        clip = f"; {fmt_count(m['clipped_readings'], 'reading')} clipped" if m.get("clipped_readings") else ""
        lines.append(
            f"value range : [{fmt_value(lo)}, {fmt_value(hi)}]{vunit} ({how}{clip}); sensitivity of the mean "
            f"Δf = (HI − LO)/I = {fmt_value(m.get('sensitivity'))}{vunit}"
        )
    if m.get("max_tv_source"):
        lines.append(f"Δ(t)        : {m['max_tv_source']}")
    if "from the data" not in (m.get("max_tv_source") or ""):  # the data's Δ̃(t) is a table: no envelope to state
        lines.append(
            f"envelope    : Δ(t) ≤ c·ρ^t with c = {fmt_upper(m['c'])}, ρ = {fmt_upper(m['rho'])} (t ≤ "
            f"{fmt_count(m['envelope_horizon'], 'slot')}, " + ("of the Δ(t) above)" if m.get("max_tv_source") else "ρ = λ*, the chains' spectral rate)")
        )
    if m.get("excluded_users"):
        lines.append(f"excluded    : {fmt_count(len(m['excluded_users']), 'user')}: " + "; ".join(f"{u} ({why})" for u, why in m["excluded_users"].items()))
    if m.get("sparse_states") is not None:
        sp = m["sparse_states"]
        lines.append(
            f"estimation  : {fmt_count(len(sp), '(user, state) row')} observed fewer than "
            f"{fmt_count(m['min_row_transitions'], 'time')}"
            + (": " + ", ".join(f"{x['user']}/{x['state']} ({x['transitions']})" for x in sp[:6]) + (" …" if len(sp) > 6 else "") if sp else "")
        )
    return lines


def _bound_lines(r: dict, m: dict, unit: str, vunit: str) -> list[str]:
    """The trade-off range, the utility bound f̄ and the MSE model."""
    lines = []
    low, high = (m.get("tradeoff_range") or [None, None])[:2]
    if low is None and high is not None:  # low = inf (JSON null): Δ(S̄) = 1 for every S̄ in the box
        lines.append("trade-off   : none in this box — Δ(S̄) = 1 for every S̄ ≤ S_MAX, so no budget ε_C > 0 meets (31)")
    if low is not None:
        between = fmt_range(low, high, unit=unit, digits=6, low_note=" (smallest MSE reachable under (31), ε_C < −ln Δ(S̄))",
                            high_note=" (staleness limit" + (" over the ages estimated" if m.get("penalty") == "readings-mse" else "") + ")")
        if between:
            lines.append(f"trade-off   : a finite optimum exists for f̄ {between}")
        elif high is None:
            lines.append(f"trade-off   : a schedule exists for f̄ above {fmt_value(low)}{unit} (smallest MSE reachable "
                         "under (31)); this penalty has no staleness limit")
        elif math.isfinite(low):
            lines.append(f"trade-off   : none — the smallest MSE reachable under (31), {fmt_value(low)}{unit}, is not "
                         f"below the staleness limit {fmt_value(high)}{unit}, so no f̄ has a finite optimum")
        else:
            lines.append("trade-off   : none in this box — Δ(S̄) = 1 for every S̄ ≤ S_MAX, so no budget ε_C > 0 meets (31)")
    src = r.get("max_penalty_source")
    f_bar = r["max_penalty"]
    rmse = f" (RMSE {fmt_value(math.sqrt(f_bar), 4)}{vunit})" if f_bar is not None and unit else ""
    against = ("the released value vs the current mean of the readings" if m.get("penalty") == "readings-mse"
               else "the released mean")
    lines.append(f"bound       : MSE of {against} ≤ f̄ = {fmt_value(f_bar)}{unit}{rmse}"
                 + (f" ({src})" if src and src != "given" else ""))
    rp = m.get("readings_penalty")
    if rp:
        lines.append(
            f"MSE model   : from the readings: cross(a) + (self(a) − cross(a))/I at the worst of {fmt_count(rp['phase_period'], 'phase')}"
            + (f", designed against the {100 * rp['level']:g}% band's upper end" if rp.get("design") == "upper" else ", point estimate")
            + (f" ({rp['design_reason']}; --penalty readings for the point estimate)"
               if rp.get("design_requested") == "auto" and rp.get("design") == "upper" else
               f" ({rp['design_reason']})" if rp.get("design_requested") == "auto"
               and str(rp.get("design_reason", "")).startswith("no band") else "")
        )
    return lines


def _schedule_lines(r: dict, m: dict, unit: str, vunit: str) -> list[str]:
    """Status, then the schedule (or the relaxation and its deployable neighbour, or the smallest penalty), the
    design in words, and the readings' MSE against the chain model's."""
    users = m.get("users")
    lines = []
    lines.append(f"status      : {r['status']}")
    if r["A"] is not None and r.get("relaxed"):
        lines += [
            f"relaxation  : A = {fmt_value(r['A'], 10)} slots, S̄ = {fmt_value(r['S_bar'], 10)} slots, ε_C = "
            f"{fmt_epsilon_c(r['epsilon_c'])} nats — continuous relaxation of (39): a bound, NOT a deployable schedule "
            "(A and S̄ must be whole slots)",
            f"(39a) value : {fmt_upper(r['peak_risk'])} nats at the relaxed point (envelope Δ(t) ≤ c·ρ^t)",
        ]
        d = r.get("deployable")
        if d is not None:
            lines.append(
                f"deployable  : A = {fmt_count(d['A'], 'slot')}, S̄ = {fmt_count(d['S_bar'], 'slot')}, ε_C = {fmt_epsilon_c(d['epsilon_c'])} nats, "
                f"exact ε* = {fmt_upper(d['peak_risk'])} nats, penalty {fmt_value(d['penalty'])}{unit} "
                "(best integer neighbour of the relaxation; exact eq. (30))")
        else:
            lines.append("deployable  : no integer neighbour of the relaxation meets the bound (see --json "
                         "deployable_neighbours; --method exact gives the integer optimum)")
    elif r["A"] is not None:
        lines += [
            f"schedule    : A = {fmt_count(r['A'], 'slot')}, S̄ = {fmt_count(r['S_bar'], 'slot')}, ε_C = {fmt_epsilon_c(r['epsilon_c'])} nats per release"
            + (" (minimising the model-free (ε, δ) over the horizon: --privacy model-free)" if r.get("privacy") == "model-free" else ""),
            _peak_risk_line(r),
            f"penalty     : {fmt_value(r['penalty'])}{unit} at peak AoI {fmt_count(r['peak_aoi'], 'slot')} (the published data's largest age, A + S̄ − 1)",
        ]
        if m.get("sensitivity") is not None and r["method"] == "exact":
            scale = m["sensitivity"] / r["epsilon_c"]
            which = "the current readings" if r["A"] == 0 else f"the readings taken {fmt_count(r['A'], 'slot')} earlier"
            lines.append(
                f"design      : every {fmt_count(r['S_bar'], 'slot')}, release the mean of {which} of the {fmt_count(users, 'user')} plus "
                f"Laplace noise of scale Δf/ε_C = {fmt_upper(scale)}{vunit}; "
                + ("its privacy is the guarantee stated first (no model-based ε* is stated)" if r.get("peak_risk") is None else
                   f"no user's age-dependent risk ever exceeds ε* = {fmt_upper(r['peak_risk'])} nats "
                   + ("under Δ(t) ≤ the band estimated from the data (see Δ(t) above)" if "from the data" in (m.get("max_tv_source") or "")
                      else f"for any {(r.get('robust') or {}).get('model')} models whose Δ_Z(t) lies below the band"
                      if (r.get("robust") or {}).get("model")
                      else "for any chains whose Δ(t) lies below the posterior band" if r.get("robust")
                      else "under the estimated chains" if not _markov_name(r) else f"under the model {_markov_name(r)}"))
            )
    else:
        lines.append(f"min penalty : {fmt_value(r['min_penalty'])}{unit} (smallest achievable)" if r.get("min_penalty") is not None
                     else "min penalty : none — no schedule in the box reaches any bound (the message says why)")
    pc = r.get("penalty_comparison")
    if pc:
        band = fmt_band(pc["readings_lower"], pc["readings_upper"]) if pc.get("readings_upper") is not None else None
        lines.append(
            f"vs chain MSE: {'at peak AoI ' + str(pc['age']) if pc['age'] == pc['peak_aoi'] else 'fresh data has no staleness; at age 1'}"
            f" the readings give staleness {fmt_value(pc['readings_staleness'], 4)}{unit} "
            f"(self {fmt_value(pc['self'], 4)}, cross {fmt_value(pc['cross'], 4)}, pooled {fmt_value(pc['readings_pooled'], 4)}; "
            + (f"{100 * pc['level']:g}% band {band}; " if band is not None else "")
            + f"phase {pc['worst_phase']} worst), the chain model (48)–(49) {fmt_value(pc['chain_staleness'], 4)}{unit}: "
            + (f"{pc['ratio']:.3g}× the chain's" if pc.get("ratio") is not None else "the chain's is 0")
        )
    return lines


def _benchmark_lines(r: dict, m: dict, unit: str, vunit: str) -> list[str]:
    """The message, and the no-aging and noise-only benchmarks with this schedule against them."""
    lines = []
    lines.append(f"message     : {r['message']}")
    na = r["benchmarks"]["no_aging"]
    if na["A"] is not None:
        lines.append(
            f"no aging    : S̄ = {na['S_bar']}, ε_C = {fmt_epsilon_c(na['epsilon_c'])}, "
            + (f"ε* = {fmt_upper(na['peak_risk'])} nats" if na.get("peak_risk") is not None else "ε* not stated (as above)")
            + f" ({na['status']})"
        )
    else:
        lines.append(f"no aging    : {na['status']}")
    no = r["benchmarks"]["noise_only"]
    if no["epsilon_c"] is not None:
        lines.append(
            f"noise only  : ε_C = {fmt_epsilon_c(no['epsilon_c'])} nats every slot; risk after {fmt_count(no['releases'], 'release')} "
            f"= {fmt_upper(no['risk_after_releases'])} nats (Δ ≡ 1, grows without bound)"
        )
    else:
        lines.append("noise only  : infeasible")
    if r["A"] is not None and r.get("peak_risk") is not None:
        best = r["peak_risk"]
        if na["A"] is not None and na.get("peak_risk") is not None:
            if r["A"] == 0:
                lines.append("vs no aging : this schedule publishes fresh data (A = 0): it is the no-aging optimum itself")
            else:
                lines.append(
                    f"vs no aging : the best schedule without aging has ε* = {fmt_upper(na['peak_risk'])} nats, "
                    f"{na['peak_risk'] / best:.3g} times this schedule's" if best > 0 else
                    f"vs no aging : the best schedule without aging has ε* = {fmt_upper(na['peak_risk'])} nats"
                )
        else:
            lines.append("vs no aging : no schedule without aging meets f̄; aging is what makes this design possible")
        if no["epsilon_c"] is not None:
            n = no["risk_after_releases"] / no["epsilon_c"] if no["epsilon_c"] else None
            k = None if not no["epsilon_c"] else max(1, int(-(-best // no["epsilon_c"])))
            lines.append(
                f"vs fresh    : fresh noisy data every slot needs ε_C = {fmt_epsilon_c(no['epsilon_c'])} nats per slot and, "
                f"composed without temporal decay, passes this schedule's ε* after {fmt_count(k, 'slot')} and keeps "
                f"growing ({fmt_upper(no['risk_after_releases'])} nats after {fmt_count(int(n), 'slot')})"
            )
        else:
            lines.append("vs fresh    : fresh noisy data every slot cannot meet f̄ at any budget")
    return lines


def _evidence_lines(r: dict, m: dict, unit: str, vunit: str) -> list[str]:
    """What the numbers mean, advice, the credible and robust statements, warnings."""
    lines = []
    for sentence in r.get("explanation") or []:
        lines.append(f"meaning     : {sentence}")
    if (r.get("guarantee") or {}).get("kind") == "model-free" and r.get("privacy") == "model-based" and r["A"] is not None:
        lines.append("advice      : this schedule minimises a model-based ε* that no model of the readings supports; "
                     "--privacy model-free designs for the guarantee stated first instead")
    cred = r.get("credible")
    if "credible" in r and cred is None:
        refuted = (r.get("guarantee") or {}).get("kind") == "model-free" and r.get("A") is not None
        asked = (r.get("model_check") or {}).get("requested")  # auto with no model passed designs with the chains
        whose = "the chains are" if asked in (None, "chain", "auto") else f"the model {asked} is"
        lines.append(f"credible    : not computed — {whose} refuted by the readings, and a posterior under a refuted "
                     "model is no guarantee" if refuted else "credible    : no schedule to check")
    if cred:
        model = cred.get("model")  # a richer Markov model: draws of its Δ_Z (Dirichlet rows, or an HMM's bootstrap)
        pilots = (f"{'bootstrap' if model.startswith('hmm') else 'posterior'} draws of Δ_Z" if model else
                  "simulated pilots")
        over = f"over {cred['draws']} {pilots} (seed {cred.get('seed')})"
        fails = cred.get("condition_31_fails") or 0.0
        kind = "bootstrap" if model and model.startswith("hmm") else "posterior"
        why = (f"condition (31) fails for {100 * fails:.1f}% of the {kind} draws (their Δ(S̄) is too large for this "
               "ε_C), so ε* is unbounded for them")
        if cred["median"] is None:
            claim = f"no finite {kind} median of ε* {over}: {why}"
        elif cred["upper"] is None:
            claim = (f"{kind} median ε* = {fmt_upper(cred['median'])} nats {over}; no finite {100 * cred['level']:g}% "
                     f"upper quantile: {why}")
        else:
            claim = (f"{kind} median ε* = {fmt_upper(cred['median'])} nats, {100 * cred['level']:g}% upper = "
                     f"{fmt_upper(cred['upper'])} nats {over}")
        under = (f"a credible statement under the Markov model {model} ({cred['posterior']})" if model else
                 "a Bayesian credible statement under the Dirichlet posterior of the chains")
        lines.append(f"credible    : {claim}; {under}, not a proof")
    if r.get("robust"):
        rb = r["robust"]
        what = f"Δ_Z(t) band of the Markov model {rb['model']}" if rb.get("model") else "Δ(t) band"
        draws = "bootstrap draws" if str(rb.get("model", "")).startswith("hmm") else "posterior draws"
        lines.append(
            f"robust      : designed against a {what} that holds for the whole curve in {100 * rb['coverage']:.1f}% of "
            f"{rb['draws']} {draws} (level {rb['level']:g}; at most {fmt_upper(rb.get('max_ratio'))} × the point estimate)"
        )
    for w in r.get("warnings") or []:
        lines.append(f"warning     : {w}")
    return lines


def _solver_lines(r: dict, m: dict, unit: str, vunit: str) -> list[str]:
    """The KKT check, the method comparison and the plot."""
    lines = []
    if r.get("kkt"):
        k = r["kkt"]
        res = k.get("residual_40")
        lines.append(
            f"KKT         : branch {k.get('branch')}, (40) residual {fmt_value(res, 3)}, "
            f"{'passed' if k.get('passed') else 'FAILED'} (tolerance {fmt_value(k.get('tolerance'), 2)})"
        )
    if r.get("comparison"):
        lines.append("comparison  :")
        head = f"  {'method':<28} {'status':<11} {'objective':>12} {'bound':>12} {'gap':>9} {'time s':>8} {'KKT res':>9}"
        lines.append(head)
        for row in r["comparison"]:
            lines.append(
                f"  {row['method']:<28} {row['status']:<11} {fmt_upper(row['objective'], 8):>12} {fmt_lower(row['bound'], 8):>12} "
                f"{fmt_value(row['gap'], 2):>9} {fmt_value(row['wall_time_s'], 3):>8} {fmt_value(row.get('kkt_residual'), 2):>9}"
            )
            if row["status"] == "unavailable":
                lines.append(f"    ({row['message']})")
    if r.get("plot"):
        drawn = "; ε(t) with the --robust Δ(t) band the design used" if r.get("robust") else ""
        lines.append(f"plot        : {r['plot']} (ε(t) and AoI(t) over the first epochs{drawn})")
    return lines


def format_report(r: dict) -> str:
    """The text ``policyopt schedule`` prints, from the JSON object of :meth:`ScheduleReport.to_dict`.

    Privacy numbers are rounded outward (:func:`~policyopt.formatting.fmt_upper`).  ``str(report)`` of a
    :class:`ScheduleReport` is this text.

    Parameters
    ----------
    r : dict
        The report's fields (``to_dict()``, optionally with ``plot`` and a command-level ``wall_time_s``).

    Returns
    -------
    str
        One line per item, as the command line prints it.
    """
    m = r["model"]
    unit = f" {m['penalty_unit']}" if m.get("penalty_unit") else ""
    vunit = " kWh" if m.get("penalty_unit") == "kWh^2" else ""
    lines = []
    for section in (_model_lines, _bound_lines, _schedule_lines, _benchmark_lines, _evidence_lines, _solver_lines):
        lines += section(r, m, unit, vunit)
    lines.append(f"wall time   : {r['wall_time_s']:.3f} s")
    return check_text("\n".join(lines))
