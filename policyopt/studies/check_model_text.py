"""The text of ``policyopt check-model`` and the one-sentence ``model check`` line, from the report's JSON object.

:func:`format_check` is ``str()`` of a :class:`~policyopt.studies.check_model.ModelCheckReport`; upper band edges are
rounded up and lower edges down to the printed digits (:mod:`policyopt.formatting`).
"""

from __future__ import annotations

from policyopt.formatting import check_text, fmt_count, fmt_lower, fmt_upper, fmt_value, lag_ranges

__all__ = ["clear_evidence", "format_check", "format_summary", "models_line", "SHOWN_LAGS"]

#: Lags shown in the text report (those ≤ L), plus L itself.
SHOWN_LAGS = (1, 2, 3, 6, 12, 24, 48, 72, 168, 336, 504, 720)


def _model_words(r: dict) -> str:
    """``the chains`` for the first-order chains, else ``the order:2 model``."""
    return "the chains" if r.get("model", "chain") == "chain" else f"the {r['model']} model"


def _markov_line(mt: dict, model: str) -> str:
    """The ``Markov test`` line: what was tested where, p, worst lag, verdict."""
    lags = mt["lags"]
    hold = mt.get("holdout")
    where = (f"on the held-out last {fmt_value(100 * hold, 4)}% of each series ({fmt_count(mt['test_slots'], 'slot')}; "
             f"{model} fitted on the first {fmt_value(100 * (1 - hold), 4)}%)" if hold else "on the readings")
    verdict = "REFUTED" if mt["refuted"] else "not refuted"
    worst = f", worst lag {mt['worst_lag']}" if mt.get("worst_lag") is not None else ""
    return (f"G² test of X_(t+1) independent of X_(t−ℓ) given {mt['context']} (Anderson & Goodman 1957), lags "
            f"{lags[0]}..{lags[-1]}, {where}, against {fmt_count(mt['draws'], 'data set')} simulated from the fitted "
            f"model's posterior predictive, family-wise by max-T/min-p: p = {fmt_value(mt['p_value'], 3)}{worst}: "
            f"{verdict} at level {mt['level']:g}")


def _model_part(m: dict) -> str:
    """One model of ``models``, worded as :func:`policyopt.studies.markov_check.model_check_line` words it."""
    mt, mv = m["markov_test"], m["max_tv_check"]
    return (f"{m['model']} {'passed' if m['passed'] else 'REFUTED'} (held-out Markov test p = {fmt_value(mt['p_value'], 3)}"
            + (f", worst lag {mt['worst_lag']}" if mt.get("refuted") and mt.get("worst_lag") is not None else "")
            + f"; Δ(t) check p = {fmt_value(mv['p_value'], 3)}"
            + (f", worst lag {mv['worst_lag']}: Δ̂ = {fmt_value(mv['estimate'], 3)} vs ≤ {fmt_value(mv['critical'], 3)} "
               "under the model" if mv.get("refuted") else "") + ")")


def models_line(r: dict) -> str:
    """The ``models`` line of ``check-model --markov-model auto``: which model was chosen and every model tried.

    Parameters
    ----------
    r : dict
        :meth:`~policyopt.studies.check_model.ModelCheckReport.to_dict`.
    """
    models = r.get("models") or []
    n = fmt_count(len(models), "model")
    head = (f"auto chose {r['chosen']}, the simplest of {n} tried that passed — " if r.get("chosen") else
            f"auto: none of the {n} tried passed (the table shows the last) — ")
    return head + "; ".join(_model_part(m) for m in models)


def format_check(r: dict) -> str:
    """The text of ``policyopt check-model`` from :meth:`~policyopt.studies.check_model.ModelCheckReport.to_dict`.

    Upper band edges are rounded up and lower edges down to the printed digits.
    """
    L = r["max_lag"]
    hold = r.get("holdout")
    model = r.get("model", "chain")
    chains = model == "chain"
    what = "model" if not chains else "chains"
    where = (f"{what} fitted on the first {fmt_value(100 * (1 - hold), 4)}% of each series ({fmt_count(r['fit_slots'], 'slot')}), "
             f"Δ(t) estimated on the rest ({fmt_count(r['slots'], 'slot')})" if hold else
             f"{what} fitted and Δ(t) estimated on the same {fmt_count(r['slots'], 'slot')}")
    title = ("fitted first-order chains" if chains else f"fitted {model} model") + \
        " vs Δ(t) estimated from the readings (Zhang et al. 2024, eq. (12)), and a held-out Markov test"
    col = "chain Δ(t)" if chains else "model Δ(t)"
    under = "Δ̂ under chain" if chains else "Δ̂ under model"
    lines = [
        f"policyopt check-model: {title}",
        f"data        : {r['source']}; {fmt_count(r['users'], 'user')}, {fmt_count(r['states'], 'quantile state')}; {where}",
        f"model       : {model} ({r.get('model_description')})",
        f"estimate    : {r['estimate_method']}",
        f"test        : {r['test_method']}",
        f"{'lag':>6} {col:>11} {'direct Δ̂(t)':>12} {'band ' + format(r['level'], 'g'):>17} "
        f"{under:>15} {'p':>6}  pointwise",
    ]
    rows = {row["lag"]: row for row in r["lags"]}
    shown = [t for t in SHOWN_LAGS if t <= L] + ([L] if L not in SHOWN_LAGS else [])
    for t in shown:
        row = rows[t]
        band = f"[{fmt_lower(row['empirical_lower'], 3)}, {fmt_upper(row['empirical_upper'], 3)}]"
        lines.append(
            f"{t:>6} {fmt_value(row['model_max_tv'], 3):>11} {fmt_value(row['empirical_max_tv'], 3):>12} {band:>17} "
            f"{'≤ ' + fmt_value(row['model_critical'], 3):>15} {fmt_value(row['p_value'], 2):>6}  "
            f"{'REFUTED' if row['refuted'] else 'consistent'}"
        )
    s = r["summary"]
    expect = (1 - r["level"]) * L
    them = _model_words(r)
    if s["refuted"]:
        lines.append(
            f"pointwise   : beyond the level at {s['refuted_count']} of {L} lags ({s['refuted_lag_ranges']}; about "
            f"{expect:.2g} would be by chance alone if {them} were true; each lag on its own, descriptive); the largest "
            f"excess is at lag {s['worst_lag']}: Δ̂ = {fmt_value(s['worst_empirical_max_tv'], 3)} on the data vs ≤ "
            f"{fmt_value(s['worst_model_critical'], 3)} in {100 * r['level']:g}% of the simulated data sets "
            f"({'chain Δ' if chains else 'model Δ'} = {fmt_value(s['worst_model_max_tv'], 3)})"
        )
    else:
        lines.append(
            f"pointwise   : beyond the level at no lag of 1..{L} (about {expect:.2g} lags would be by chance alone "
            f"at this level if {them} were true; each lag on its own, descriptive)"
        )
    mv = r["max_tv_check"]
    lines.append(
        f"Δ(t) check  : family-wise over lags 1..{mv['max_lag']} (max-T on the lag-wise standardised Δ̂): p = "
        f"{fmt_value(mv['p_value'], 3)}, worst lag {mv['worst_lag']} (Δ̂ = {fmt_value(mv['estimate'], 3)} vs ≤ "
        f"{fmt_value(mv['critical'], 3)} under {them}): {'REFUTED' if mv['refuted'] else 'not refuted'} at level "
        f"{mv['level']:g}"
    )
    mt = r.get("markov_test")
    if mt is not None:
        lines.append(f"Markov test : {_markov_line(mt, them)}")
    tests = ("the Markov test nor the Δ(t) check" if mt is not None else "the Δ(t) check")
    if r["refuted"]:
        who = [n for n, d in (("the Markov test", mt), ("the Δ(t) check", mv)) if d is not None and d["refuted"]]
        lines.append(f"refuted     : yes: {' and '.join(who)} refute{'s' if len(who) == 1 else ''} {them} at "
                     f"family-wise level {r['level']:g}")
        lines.append(
            f"meaning     : the readings keep a dependence {them} forget{'s' if not chains else ''}; privacy numbers "
            f"computed from {'their Δ(t)' if chains else 'its Δ_Z(t)'} (Theorem 3 of Zhang et al. 2024 needs a Markov "
            "process) are not supported by the data: state the model-free guarantee (schedule --privacy model-free)"
            + ("" if r.get("markov_model") == "auto" else ", or try --markov-model auto")
        )
    else:
        chance = 2 * (1 - r["level"]) if mt is not None else 1 - r["level"]
        lines.append(
            f"refuted     : no: {'neither ' if mt is not None else ''}{tests} refutes {them} at family-wise level "
            f"{r['level']:g} (a true model is refuted in about {100 * chance:.2g}% of data sets or fewer)"
        )
    if r.get("markov_model") == "auto":
        lines.append(f"models      : {models_line(r)}")
    none = [row["lag"] for row in r["lags"] if row["users_without_claim"] > 0]
    if none:
        lines.append(
            f"no claim    : at {len(none)} lags some user has a row with < {r['min_pairs']} pairs, so the upper band is 1 "
            f"there ({lag_ranges(none)})"
        )
    if r.get("excluded_users"):
        lines.append(f"excluded    : {fmt_count(len(r['excluded_users']), 'user')}: "
                     + "; ".join(f"{u} ({why})" for u, why in r["excluded_users"].items()))
    if r.get("plot"):
        lines.append(f"plot        : {r['plot']} ({'chain' if chains else 'model'} Δ(t) vs the band on a log lag axis, "
                     "pointwise refuted lags marked)")
    dist = r.get("distributed")
    if dist:
        where = (f"a local cluster of {fmt_count(dist['workers'], 'worker')}" if dist.get("workers")
                 else f"the scheduler {dist['scheduler']}")
        peak = max(dist["peak_rss_mib"].values()) if dist.get("peak_rss_mib") else 0.0
        lines.append(f"dask        : map-reduce over {fmt_count(dist['partitions'], 'Parquet file')} on {where} (per-user random "
                     f"streams: the serial run's numbers); largest worker peak {peak:.0f} MiB")
    lines.append(f"wall time   : {r['wall_time_s']:.3f} s")
    return check_text("\n".join(lines))


def clear_evidence(s: dict) -> bool:
    """Whether a :meth:`~policyopt.studies.check_model.ModelCheckReport.summary` refutes the chains clearly: more lags
    pointwise beyond the level than twice what chance gives when each of its lags is tested on its own, plus 2 (the one
    rule of :func:`format_summary` and of the design-lag sentence of
    :func:`policyopt.studies.deployment_text.model_check_text`)."""
    return bool(s["refuted"]) and s["refuted_count"] > 2 * (1 - s["level"]) * s["max_lag"] + 2


def format_summary(s: dict) -> str:
    """One sentence on a :meth:`~policyopt.studies.check_model.ModelCheckReport.summary` (the ``model check`` line of ``policyopt schedule``)."""
    head = (f"first-order chains ({s['states']} states) vs Δ(t) estimated from the data, lags 1..{s['max_lag']}, "
            f"parametric bootstrap of {s['draws']} simulated data sets, level {s['level']:g}: ")
    if not s["refuted"]:
        return head + "not refuted at any lag"
    expect = (1 - s["level"]) * s["max_lag"]
    verdict = (
        "the chain's ε at those ages is not supported by the data (see policyopt check-model; --max-tv empirical "
        "designs against the data)" if clear_evidence(s) else
        "about what chance gives when each lag is tested on its own: no clear evidence against the chains"
    )
    return head + (
        f"REFUTED at {s['refuted_count']} lags ({s['refuted_lag_ranges']}; ~{expect:.2g} by chance); worst at lag "
        f"{s['worst_lag']}: Δ̂ = {fmt_value(s['worst_empirical_max_tv'], 3)} on the data vs ≤ "
        f"{fmt_value(s['worst_model_critical'], 3)} under the chains, whose Δ there is "
        f"{fmt_value(s['worst_model_max_tv'], 3)} — {verdict}"
    )
