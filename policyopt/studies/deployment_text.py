"""The lines a design on data adds to the schedule text (:func:`~policyopt.studies.schedule_text.format_report`):
the model check, the data's Δ̃(t) band, the backtest and the horizon design (``policyopt schedule``'s full text,
``str()`` of a :class:`~policyopt.app.schedule.DeploymentReport`); ``publish`` states the model check the same way.
"""

from __future__ import annotations

__all__ = ["backtest_text", "model_check_text", "with_data_lines"]


def backtest_text(r: dict | None, fraction: float) -> str:
    """The one-line ``backtest`` summary of a design's replay on held-out readings (the report's ``backtest`` object,
    :func:`policyopt.studies.backtest.backtest` without its series; ``None``: no integer schedule to replay)."""
    from policyopt.formatting import fmt_value
    from policyopt.studies.backtest import backtest_verdict, interval_text, max_tv_comparison_text, mse_text

    if r is None:
        return f"designed on the first {fraction:g} of the time range; no integer schedule to replay"
    u = f" {r['unit']}" if r.get("unit") else ""
    what = "the horizon design, made" if r.get("replayed") == "horizon_design" else "designed"
    text = (f"{what} on slots before {r['split_slot']} (the first {fraction:g}), replayed on the "
            f"{r['held_out_slots']} held-out slots: realised MSE {mse_text(r)}{u} "
            f"({interval_text(r, 'mse')}) vs f̄ = {fmt_value(r['max_penalty'])}{u}: {backtest_verdict(r)}")
    c = r.get("max_tv_comparison")
    if c:
        text += f"; Δ(t) at {max_tv_comparison_text(c)}"
    if r.get("ci_coverage") is not None:
        text += (f"; the releases' {100 * r['ci_level']:g} % current-mean interval covered {100 * r['ci_coverage']:.1f} % "
                 f"of them ({interval_text(r, 'coverage')})")
    left = r.get("left_out_users") or []
    if left:
        text += "; left out: " + ", ".join(f"{u['user']} ({u['why']})" for u in left)
    return text


def model_check_text(mc: dict, chains_used: bool = True) -> str:
    """The ``model check`` line's text: :func:`~policyopt.studies.check_model_text.format_summary` and, with
    :func:`~policyopt.studies.markov_check.design_lags` in `mc`, whether the lags the schedule's risk uses are refuted.

    `chains_used` False: the accounting's Δ(t) is not the chains' (an ``empirical:LEVEL`` table), which the line says
    instead of drawing a conclusion about the risk from the chains.
    """
    from policyopt.formatting import lag_ranges
    from policyopt.studies.check_model_text import clear_evidence, format_summary

    line = format_summary(mc)
    if mc.get("design_lags"):
        lags, bad = mc["design_lags"], mc["design_lags_refuted"]
        line += f"; this design's ε* uses Δ at lag{'s' if len(lags) > 1 else ''} {lag_ranges(lags)} (A..A + S̄ − 1 and S̄): "
        if not chains_used:
            line += (f"the chains are refuted at {len(bad)} of them, but the accounting uses the data's Δ̃(t) table, "
                     "not the chains")
        elif bad and "refuted_count" in mc and not clear_evidence(mc):
            line += (f"pointwise beyond the level at {len(bad)} of them ({lag_ranges(bad)}), about what chance gives "
                     "(see the count above): no clear evidence against the chains there either")
        elif bad:
            line += f"REFUTED at {len(bad)} of them ({lag_ranges(bad)}), so its ε* is not a bound for the data"
        else:
            line += "the chains are not refuted there (Theorem 3's composition still assumes them)"
    return line


def with_data_lines(text: str, out: dict) -> str:
    """`text` (:func:`~policyopt.studies.schedule_text.format_report` of `out`) with the lines of a design on data before the wall time: the model
    check, the data's Δ̃(t) band, the backtest and the horizon design (``policyopt schedule``'s full text)."""
    from policyopt.formatting import fmt_count, fmt_epsilon_c, fmt_upper

    extra = []
    if out.get("model_check") and out["model_check"].get("models") is not None:
        from policyopt.studies.markov_check import model_check_line

        extra.append(f"model check : {model_check_line(out['model_check'])}")
    elif out.get("model_check"):
        extra.append(f"model check : {model_check_text(out['model_check'], chains_used=not out.get('empirical_max_tv'))}")
    emp = out.get("empirical_max_tv")
    if emp:
        used = emp["max_tv_used"]
        extra.append(
            f"Δ(t) data   : {emp['level']:g} upper band, Δ̃(1) = {fmt_upper(used[1], 3)}, Δ̃({len(used) - 1}) = "
            f"{fmt_upper(used[-1], 3)} (direct estimate {emp['estimate'][len(used) - 2]:.3g} there); 1 beyond t = {len(used) - 1} "
            f"(band estimated for t ≤ L = {emp['max_lag']})"
        )
    if "backtest" in out:
        extra.append(f"backtest    : {backtest_text(out['backtest'], out['deployment']['backtest'])}")
    hd = out.get("horizon_design")
    if hd is not None:
        if hd["status"] == "optimal" and hd.get("accounting") == "model-free":
            extra.append(
                f"horizon     : no finite ε* is stated (condition (31) fails, or no model passed its checks), so the design "
                f"minimises the model-free (ε, δ) over {fmt_count(hd['horizon'], 'slot')}: A = {fmt_count(hd['A'], 'slot')}, "
                f"S̄ = {fmt_count(hd['S_bar'], 'slot')}, ε_C = {fmt_epsilon_c(hd['epsilon_c'])} nats, "
                f"{fmt_count(hd['releases'], 'release')}: ({fmt_upper(hd['epsilon'], 4)} nats, δ = {hd['delta']:.3g}), pure ε ≤ "
                f"{fmt_upper(hd['horizon_risk'])} nats (optimal: {hd['proof']})"
            )
        elif hd["status"] == "optimal":
            whose = "the data's Δ(t)" if out.get("empirical_max_tv") else "the model's Δ(t)"
            extra.append(
                f"horizon     : no schedule has a finite ε* under {whose} (condition (31) fails), so the design "
                f"bounds the largest risk over {hd['horizon']} slots (Theorem 3): A = {fmt_count(hd['A'], 'slot')}, "
                f"S̄ = {fmt_count(hd['S_bar'], 'slot')}, ε_C = {fmt_epsilon_c(hd['epsilon_c'])} nats, "
                f"{fmt_count(hd['releases'], 'release')}, largest risk ≤ "
                f"{fmt_upper(hd['horizon_risk'])} nats (optimal: {hd['proof']})"
            )
        else:
            extra.append(f"horizon     : no schedule in the box meets f̄ over {hd['horizon']} slots ({hd['proof']})")
    if not extra:
        return text
    lines = text.split("\n")
    return "\n".join(lines[:-1] + extra + lines[-1:])
