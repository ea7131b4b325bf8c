"""The text ``policyopt sweep`` prints after its grid: the summary of the sweep's JSON summary and CSV rows, one
function per line (the guarantee stated first, the peak risk, the model-free one), privacy numbers rounded outward
(:mod:`policyopt.formatting`).
"""

from __future__ import annotations

from policyopt.formatting import check_text, fmt_count, fmt_upper, fmt_value

__all__ = ["format_summary"]


def _span(lo, hi, *, digits: int = 6) -> str:
    """``= a`` or ``from a to b`` (privacy upper bounds, rounded up)."""
    return f"= {fmt_upper(hi, digits)}" if lo == hi else f"from {fmt_upper(lo, digits)} to {fmt_upper(hi, digits)}"


def _points(n: int, total: int) -> str:
    return "every point" if n == total else fmt_count(n, "point")


def _why_not_trusted(verdicts, *, short: bool = False) -> str:
    """Why a model-based number is not stated, once per distinct model verdict (`short`: without the p-values)."""
    out = []
    for v in verdicts:
        why = " (see model check)" if short else f" ({v.why})"
        if v.model is None:
            text = f"no Markov model passed its checks{why}"
        elif v.verdict == "refuted":
            text = f"the Markov model {v.model} is refuted by the readings{why}"
        elif v.verdict == "unchecked":
            text = f"the Markov model {v.model} is not checked ({v.why})"
        else:
            text = f"the model {v.model} gives no finite risk for these schedules"
        if text not in out:
            out.append(text)
    return "; ".join(out)


def _trusted_text(verdicts) -> str:
    out = []
    for v in verdicts:
        label = v.model if str(v.model).startswith("the ") else f"the Markov model {v.model}"
        what = ("an assumption nobody checked against data" if v.verdict == "assumed" else
                f"it passed its checks on held-out readings ({v.why})")
        text = f"{label} — {what}"
        if text not in out:
            out.append(text)
    return "; ".join(out)


def _model_free_text(eps, pure, deltas, horizon: str) -> str:
    """(ε, δ) over the horizon in words: the ε range at δ and the pure ε range (privacy numbers rounded up)."""
    deltas = sorted(set(deltas))
    dtext = f"δ = {deltas[0]:.3g}" if len(deltas) == 1 else f"δ from {deltas[0]:.3g} to {deltas[-1]:.3g} (by I)"
    return (f"(ε, δ)-DP for each user's whole series over {horizon} with ε {_span(min(eps), max(eps), digits=4)} nats "
            f"at {dtext}, whatever the correlation (PLD accountant; pure ε {_span(min(pure), max(pure), digits=4)} nats "
            "by basic composition)")


def _guarantee_line(s: dict, rows: list) -> str:
    """The ``guarantee`` line, stated first: the model-free range where the rows state it (a refuted or unchecked
    model), the model-based range where they state that (a model that passed or was given), each with why."""
    total = len(rows)
    parts = []
    free = [(r, v) for r, v in rows if r["guarantee_kind"] == "model-free"]
    based = [(r, v) for r, v in rows if r["guarantee_kind"] == "model-based"]
    if free:
        hs = sorted({r["model_free_horizon"] for r, _ in free})
        htext = fmt_count(hs[0], "slot") if len(hs) == 1 else f"{hs[0]} to {fmt_count(hs[-1], 'slot')}"
        text = _model_free_text([r["guarantee_epsilon"] for r, _ in free], [r["model_free_epsilon_pure"] for r, _ in free],
                                [r["guarantee_delta"] for r, _ in free], htext)
        parts.append(f"model-free at {_points(len(free), total)}: {text}, stated because "
                     f"{_why_not_trusted([v for _, v in free])}")
    if based:
        peak = [r["guarantee_epsilon"] for r, _ in based if r["risk_kind"] == "peak"]
        over = [r["guarantee_epsilon"] for r, _ in based if r["risk_kind"] != "peak"]
        what = []
        if peak:
            what.append(f"ε* {_span(min(peak), max(peak))} nats (Zhang et al. 2024, Theorem 3, eq. (30))"
                        + (f" at {fmt_count(len(peak), 'point')}" if over else ""))
        if over:
            what.append(f"the largest risk over {fmt_count(s['horizon'], 'slot')} {_span(min(over), max(over))} nats "
                        f"(Theorem 3) at {fmt_count(len(over), 'point')} without a finite ε*")
        parts.append(f"model-based at {_points(len(based), total)}: {'; '.join(what)}; if the readings follow "
                     f"{_trusted_text([v for _, v in based])}")
    if not parts:
        return "guarantee    : none — no point of the grid has a schedule (see the status counts)"
    return "guarantee    : " + "; ".join(parts)


def _peak_risk_line(s: dict, rows: list) -> str:
    """The ``peak risk ε*`` line: the stated ε* range (a trusted model's), the refuted model's printed on request
    (``--accept-refuted``), and why ε* is not stated where it is withheld."""
    trusted = [r["peak_risk"] for r, v in rows if r["peak_risk"] is not None and v.trusted]
    accepted = [(r["peak_risk"], v) for r, v in rows if r["peak_risk"] is not None and not v.trusted]
    withheld = [v for r, v in rows if r["risk_kind"] == "peak" and r["peak_risk"] is None]
    parts = []
    if trusted:
        parts.append(f"{_span(min(trusted), max(trusted)).removeprefix('= ')} nats"
                     + ("" if len(trusted) == len(rows) else
                        f" ({'at every point with a schedule' if not (accepted or withheld) else 'at ' + fmt_count(len(trusted), 'point')})"))
    if accepted:
        e = [x for x, _ in accepted]
        acc = s.get("accepted_refuted") or [{}]
        parts.append(f"{_span(min(e), max(e)).removeprefix('= ')} nats at {fmt_count(len(accepted), 'point')} under the REFUTED model "
                     f"{', '.join(str(v.model) for v in dict.fromkeys(v for _, v in accepted))}, printed on request "
                     f"(--accept-refuted: {acc[0].get('reason')}); not a bound for these data")
    if withheld and not accepted:
        parts.append(f"not stated at {fmt_count(len(withheld), 'point')} — {_why_not_trusted(withheld, short=True)}, so no "
                     "model-based ε* is a bound for the readings (the model-free guarantee above is); --accept-refuted "
                     "REASON prints the refuted model's")
    if parts:
        return "peak risk ε* : " + "; ".join(parts)
    if s["risk_kind_counts"].get("horizon"):
        return "peak risk ε* : none — no point of the grid has a finite ε* (see horizon)"
    return "peak risk ε* : none — no point of the grid has a schedule (see the status counts)"


def format_summary(s: dict, rows: list) -> str:
    """The text summary; `rows` pairs each CSV row with its model's :class:`~policyopt.studies.sweep.ModelVerdict`."""
    where = "serial" if s["scheduler"] is None and s["workers"] == 1 else (
        f"Dask scheduler {s['scheduler']}" if s["scheduler"] else f"local Dask cluster, {s['workers']} workers"
    )
    f = s["max_penalty"]
    lines = [
        "policyopt sweep: optimal peak risk over the utility bound f̄ (Zhang et al. 2024, problem (28))",
        _guarantee_line(s, rows),
        f"grid         : {fmt_count(len(f), 'f̄ value')}"
        + (f" from {fmt_value(f[0])} to {fmt_value(f[-1])}" if len(f) > 1 else f" ({fmt_value(f[0])})")
        + "".join(f" × {fmt_count(len(v), 'value')} of {k}" for k, v in s["varied"].items()) + f" = {fmt_count(s['points'], 'point')} ({where})",
        f"points       : {s['computed']} computed, {s['resumed']} resumed from the existing files",
        "status       : " + ", ".join(f"{k} {v}" for k, v in sorted(s["status_counts"].items())),
        _peak_risk_line(s, rows),
    ]
    if s["model_free_epsilon_min"] is not None and s["guarantee_kind_counts"].get("model-free", 0) < s["points"]:
        with_mf = [r for r, _ in rows if r["model_free_epsilon"] is not None]
        hs = sorted({r["model_free_horizon"] for r in with_mf})
        htext = fmt_count(hs[0], "slot") if len(hs) == 1 else f"{hs[0]} to {fmt_count(hs[-1], 'slot')}"
        lines.append("model free   : " + _model_free_text([r["model_free_epsilon"] for r in with_mf],
                                                          [r["model_free_epsilon_pure"] for r in with_mf],
                                                          [r["model_free_delta"] for r in with_mf], htext))
    if s["max_tv_source"] != "chain":
        lines.append(
            f"Δ(t)         : {s['max_tv_source']}: the upper edge of the data's simultaneous band for t ≤ L = "
            f"{s['empirical_max_lag']} slots, made non-increasing over the ages the box uses, 1 beyond them (as schedule "
            f"--max-tv {s['max_tv_source']})"
        )
    n = s["risk_kind_counts"].get("horizon", 0)
    if n:
        by = {}
        for r, _ in rows:
            if r["risk_kind"] == "horizon":
                by.setdefault(r["horizon_accounting"], []).append(r["horizon_risk"])
        for acc, vals in by.items():
            lo, hi = min(vals), max(vals)
            if acc == "model-free":
                lines.append(
                    f"horizon      : {fmt_count(len(vals), 'point')} without a finite ε* (condition (31) fails) and no "
                    f"trusted model: designed for the model-free (ε, δ) over {fmt_count(s['horizon'], 'slot')}, pure ε "
                    + (f"≤ {fmt_upper(hi)} nats" if lo == hi else f"from {fmt_upper(lo)} to {fmt_upper(hi)} nats")
                    + " (risk_kind horizon, horizon_accounting model-free, columns horizon_*)"
                )
            else:
                refuted = list(dict.fromkeys(str(v.model or "chain") for r, v in rows
                                             if r["risk_kind"] == "horizon" and r["horizon_accounting"] == acc
                                             and not v.trusted))
                lines.append(
                    f"horizon      : {fmt_count(len(vals), 'point')} without a finite ε* (condition (31) fails): designed "
                    f"for the largest risk over {s['horizon']} slots (Theorem 3), "
                    + (f"≤ {fmt_upper(hi)} nats" if lo == hi else f"from {fmt_upper(lo)} to {fmt_upper(hi)} nats")
                    + " (risk_kind horizon, columns horizon_*)"
                    + (f" — under the REFUTED model {', '.join(refuted)}, printed on request (--accept-refuted); not a "
                       "bound for these data" if refuted else "")
                )
    if s["no_tradeoff"]:
        for r in s["no_tradeoff"]:
            model = ", ".join(f"{k}={fmt_value(v) if isinstance(v, float) else v}" for k, v in r["model"].items()
                              if v is not None and k in s["varied"])
            lines.append(
                f"no trade-off : f̄ ∈ [{fmt_value(r['from'])}, {fmt_value(r['to'])}]{' (' + model + ')' if model else ''}: raising f̄ does "
                f"not lower ε* = {fmt_upper(r['peak_risk'])} nats (Corollary 3)"
            )
    else:
        unknown = sum(1 for r, _ in rows if r["A"] is not None and r["peak_risk"] is None)
        if unknown and s["peak_risk_min"] is None:
            lines.append("no trade-off : not assessed — no ε* is stated (see peak risk ε*)")
        elif unknown:
            lines.append(f"no trade-off : none where ε* is stated; not assessed next to the {fmt_count(unknown, 'point')} "
                         "whose ε* is not stated")
        else:
            lines.append("no trade-off : none on this grid (every step up in f̄ lowers ε*)")
    lines.append(f"files        : {s['out']} (CSV), {s['jsonl']} (JSON lines)")
    if s["plot"]:
        lines.append(f"plot         : {s['plot']}")
    for w in s["warnings"]:
        lines.append(f"warning      : {w}")
    if s.get("model_check"):
        from policyopt.studies.markov_check import model_check_line

        used = "" if s["max_tv_source"] == "chain" else (
            f"; these designs use the data's Δ̃(t) ({s['max_tv_source']}), not the chains: only the first-order Markov "
            "premise of Theorem 3 is taken from this check")
        for check in s["model_check"]:
            lines.append(f"model check  : K = {check['states']}: {model_check_line(check)}{used}")
    lines.append(f"wall time    : {s['wall_time_s']:.3f} s")
    return check_text("\n".join(lines))
