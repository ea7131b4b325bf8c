"""Every bound ``policyopt schedule`` states against the exact risk of processes whose truth we know (a measurement
script, not a pytest test).

Run with ``nice -n 10 .venv/bin/python tests/benchmarks/bench_guarantee.py`` (``bench()`` is what ``make bench``
calls; about 50 minutes on the shared 2-core machine at load average 10, mostly ``--markov-model auto``).
``--figure [PATH]`` also draws the exact-vs-stated figure of the docs (default
``docs/_static/guarantee_exact_vs_printed.png``); ``--results FILE`` writes the rows as JSON, and
``--from-results FILE`` redraws the figure from such a file without running anything.

1. **The zoo against its exact risk** (issue 32, item 6 and "Done when").  For each process of ``tests/_processes.py``
   — an order-2 chain, a slowly switching home/away regime, a daily habit, a weekly routine, the XOR chain, and a
   first-order chain as the control — 30 users × 8,760 hourly slots are simulated (binary readings, LO = 0, HI = 1;
   ``np.random.default_rng([SEED, k])`` for the k-th process: simulation only) and written as a long CSV; then the
   installed command is run as a subprocess::

       policyopt schedule --data CSV --value-range 0:1 --states 2 --max-age 24 --max-interval 24 --users I \\
           --max-rmse 0.005 --slot-length 1h --json [SETTING]

   for I ∈ {1000, 10000} and three settings: the default (``--markov-model chain``), ``--max-tv empirical`` and
   ``--markov-model auto``.  Per run: the model chosen and its verdict, the printed schedule (A, S̄, ε_C) (or the
   horizon design's when no schedule has a finite ε*), ``guarantee.kind`` and ``epsilon``, ``peak_risk``, the horizon
   design's ``horizon_risk``, ``model_free.epsilon`` and ``epsilon_pure``, and the exact lower bound on the risk of
   the printed schedule (``tests/_exact_risk.py: tail_risk``, the steady-state peak of a run of 8,760 slots; for a
   horizon design, over its horizon).  Every stated upper bound is compared with it by
   ``printed_bound_violations`` (and, for a horizon design, which that function does not take, by the same rule
   here: its exact risk must be ≤ ``horizon_risk``, ≤ a model-based ``guarantee.epsilon`` and ≤
   ``model_free.epsilon_pure``).  Target: 0 violations; on the first-order control, a model-based guarantee.
2. **What trusting no model costs on the bundled homes**: ``policyopt schedule --json`` (the demo), with
   ``--accept-refuted benchmark`` (the refuted chains' ε*, printed on request) and with ``--privacy model-free`` (the
   model-free optimum): the model-free (ε, δ) over a year against the refuted ε*.

The figure: per process of the issue's table, the exact risk ≥ (x) against the bound stated first (y), log–log, with
the line y = x: the issue's "before" (the model-based ε* printed under ``--max-tv empirical``, and the exact risk the
issue measured) and this run's "after" (the model-based ε* where a model passed, else the model-free pure ε over the
horizon, which is what the exact pure risk can be compared with).  Points below the line are bounds below the truth.

Measured: see ``docs/benchmarks.md``, section "Guarantees against exact risk".
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))  # tests/: the exact-risk reference and the process zoo

USERS, SLOTS, SEED = 30, 8760, 2026
DEPLOYMENTS = (1000, 10000)
COMMON = ("--value-range", "0:1", "--states", "2", "--max-age", "24", "--max-interval", "24", "--max-rmse", "0.005",
          "--slot-length", "1h")
SETTINGS = (("default", ()), ("empirical", ("--max-tv", "empirical")), ("auto", ("--markov-model", "auto")))
FIGURE = TESTS.parent / "docs" / "_static" / "guarantee_exact_vs_printed.png"

#: (key, label, factory name in tests/_processes.py, keyword arguments); the first-order chain is the control.
PROCESSES = (
    ("order2", "order-2 chain", "order2_chain", {}),
    ("switching", "switching regime", "switching_regime", {}),
    ("daily", "daily habit", "daily_habit", {}),
    ("weekly", "weekly routine", "weekly_routine", {}),
    ("xor", "XOR chain", "xor_chain", {}),
    ("first_order", "first-order chain (control)", "first_order_chain", {"p": 0.05, "q": 0.1}),
)

#: The issue's table (issue 32, "Why"), measured before this session with ``--max-tv empirical``:
#: (process, I) → (printed (A, S̄, ε_C), printed ε*, exact risk ≥), nats.
# source: issue 32, "Why (measured on main)" table
ISSUE_BEFORE = {
    ("switching", 1000): ((0, 1, 0.283), 0.397, 1.141),
    ("switching", 10000): ((0, 1, 0.0283), 0.0378, 0.632),
    ("daily", 1000): ((0, 1, 0.283), 0.507, 1.593),
    ("weekly", 1000): ((4, 1, 0.283), 0.107, 3.06),
    ("order2", 10000): ((0, 1, 0.0283), 0.115, 0.180),
}


def process(key: str):
    """The :class:`_exact_risk.BinaryHMM` of the zoo named `key`."""
    import _processes as P

    _, _, factory, kwargs = next(p for p in PROCESSES if p[0] == key)
    return getattr(P, factory)(**kwargs)


def policyopt_command() -> str:
    """The installed ``policyopt`` entry point of the interpreter running the benchmark."""
    return str(Path(sys.executable).with_name("policyopt"))


def run_schedule(*args: str, timeout: float = 3600.0) -> tuple[dict, float]:
    """``policyopt schedule ARGS --json`` as a subprocess (one OpenBLAS thread): its strict JSON and wall time (s)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    start = time.perf_counter()
    proc = subprocess.run([policyopt_command(), "schedule", *map(str, args), "--json"], capture_output=True,
                          text=True, env=env, timeout=timeout)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"bench_guarantee: `policyopt schedule {' '.join(map(str, args))}` failed:\n{proc.stderr}")

    def bad(c):
        raise ValueError(f"non-finite JSON constant {c}")

    return json.loads(proc.stdout, parse_constant=bad), wall


def horizon_design_violations(report: dict, proc) -> tuple[float | None, list[str]]:
    """The exact risk ≥ of a horizon design's schedule over its horizon, and every stated bound below it.

    For reports without a printed schedule (``A`` null, status infeasible), which
    :func:`_exact_risk.printed_bound_violations` does not take: ``horizon_design.horizon_risk``, a model-based
    ``guarantee.epsilon`` and ``model_free.epsilon_pure`` must each be ≥ :func:`_exact_risk.tail_risk` of
    (``horizon_design.A``, ``S_bar``, ``epsilon_c``) over ``horizon_design.horizon`` slots (the publication slots of
    its last period/epoch), up to 1e-9 relative.
    """
    import _exact_risk as E

    hd = report.get("horizon_design") or {}
    if any(hd.get(k) is None for k in ("A", "S_bar", "epsilon_c", "horizon")):
        return None, []
    exact = E.tail_risk(proc, int(hd["A"]), int(hd["S_bar"]), float(hd["epsilon_c"]), horizon=int(hd["horizon"]))
    bounds = {"horizon_design.horizon_risk": hd.get("horizon_risk"),
              "model_free.epsilon_pure": (report.get("model_free") or {}).get("epsilon_pure")}
    g = report.get("guarantee") or {}
    if g.get("kind") == "model-based":
        bounds["guarantee.epsilon (model-based)"] = g.get("epsilon")
    out = [f"{name} = {float(b)!r} nats is below the exact risk ≥ {exact.value:.6g} nats (slot {exact.t}) of the "
           f"horizon design ({hd['A']}, {hd['S_bar']}, {hd['epsilon_c']!r}) on {proc!r}"
           for name, b in bounds.items() if b is not None and float(b) < exact.value - 1e-9 * max(1.0, exact.value)]
    return exact.value, out


def evaluate(key: str, users: int, setting: str, report: dict, wall: float) -> dict:
    """One row of the table: what the report states and the exact risk of the schedule it prints."""
    import _exact_risk as E

    proc = process(key)
    mc = report.get("model_check") or {}
    hd = report.get("horizon_design") or {}
    g = report.get("guarantee") or {}
    mf = report.get("model_free") or {}
    start = time.perf_counter()
    if report.get("A") is not None:
        sched = (int(report["A"]), int(report["S_bar"]), float(report["epsilon_c"]))
        exact = E.tail_risk(proc, *sched, horizon=SLOTS).value
        violations = E.printed_bound_violations(report, proc, horizon=SLOTS)
        design = "printed"
    else:
        sched = (hd.get("A"), hd.get("S_bar"), hd.get("epsilon_c"))
        exact, violations = horizon_design_violations(report, proc)
        design = f"horizon design ({hd.get('accounting')})" if hd else "none"
    return {
        "process": key, "users": users, "setting": setting, "status": report.get("status"), "design": design,
        "model": mc.get("chosen"), "passed": mc.get("passed"), "A": sched[0], "S_bar": sched[1],
        "epsilon_c": sched[2], "guarantee_kind": g.get("kind"), "guarantee_epsilon": g.get("epsilon"),
        "guarantee_delta": g.get("delta"), "guarantee_model": g.get("model"), "peak_risk": report.get("peak_risk"),
        "horizon_risk": hd.get("horizon_risk"), "mf_epsilon": mf.get("epsilon"), "mf_delta": mf.get("delta"),
        "mf_epsilon_pure": mf.get("epsilon_pure"), "mf_horizon": mf.get("horizon"), "exact": exact,
        "violations": violations, "run_s": wall, "exact_s": time.perf_counter() - start,
    }


def stated_pure(row: dict) -> float | None:
    """The pure-ε bound a row states first: the model-based ε* (or horizon risk) when a model passed, else the
    model-free pure ε over the horizon (what an exact pure risk can be compared with)."""
    if row["guarantee_kind"] == "model-based":
        return row["guarantee_epsilon"]
    return row["mf_epsilon_pure"]


def _g(x, digits: int = 3) -> str:
    """A number for the table (``n/a`` for null)."""
    return "n/a" if x is None else f"{x:.{digits}g}"


def print_table(rows: list[dict], header: bool = True) -> None:
    """One line per run (after a header line when `header`)."""
    head = ("process", "I", "setting", "model (check)", "status", "(A, S̄, ε_C)", "guarantee", "ε stated",
            "peak_risk", "horizon_risk", "MF ε (δ)", "MF pure ε", "exact ≥", "violations", "run s")
    if header:
        print(" | ".join(head))
    for r in rows:
        check = "passed" if r["passed"] else "refuted"
        sched = "n/a" if r["A"] is None else f"({r['A']}, {r['S_bar']}, {r['epsilon_c']:.4g})"
        if r["design"].startswith("horizon"):
            sched += " horizon"
        print(" | ".join((
            r["process"], str(r["users"]), r["setting"], f"{r['model'] or 'none'} ({check})", str(r["status"]),
            sched, str(r["guarantee_kind"]), _g(r["guarantee_epsilon"]), _g(r["peak_risk"]), _g(r["horizon_risk"]),
            f"{_g(r['mf_epsilon'])} ({_g(r.get('mf_delta'))})",
            _g(r["mf_epsilon_pure"]), _g(r["exact"], 4), str(len(r["violations"])), f"{r['run_s']:.0f}",
        )), flush=True)


def bench_zoo(folder: Path) -> list[dict]:
    """Section 1: simulate, run every setting, compare with the exact risk; returns the rows."""
    import numpy as np

    rows = []
    for k, (key, label, _, _) in enumerate(PROCESSES):
        csv = folder / f"{key}.csv"
        process(key).simulate(USERS, SLOTS, np.random.default_rng([SEED, k])).to_csv(csv, index=False)
        for users in DEPLOYMENTS:
            for setting, extra in SETTINGS:
                report, wall = run_schedule("--data", csv, *COMMON, "--users", users, *extra)
                row = evaluate(key, users, setting, report, wall)
                rows.append(row)
                print_table([row], header=len(rows) == 1)
                for v in row["violations"]:
                    print(f"  VIOLATION: {v}\n  command: policyopt schedule --data {csv} {' '.join(COMMON)} "
                          f"--users {users} {' '.join(extra)} --json", flush=True)
    return rows


def summarise(rows: list[dict]) -> int:
    """The summary lines; returns the number of violations."""
    n = sum(len(r["violations"]) for r in rows)
    print(f"printed bounds below the exact risk: {n} of {len(rows)} runs' bounds  [target 0] "
          f"{'OK' if n == 0 else 'VIOLATED'}")
    control = [r for r in rows if r["process"] == "first_order"]
    mb = [r for r in control if r["guarantee_kind"] == "model-based"]
    print(f"first-order control: model-based guarantee in {len(mb)} of {len(control)} runs  [target all] "
          f"{'OK' if len(mb) == len(control) else 'NOT ALL'}")
    others = [r for r in rows if r["process"] != "first_order"]
    mb_other = [r for r in others if r["guarantee_kind"] == "model-based"]
    which = sorted({f"{r['process']} under {r['guarantee_model']}" for r in mb_other})
    print(f"other processes: model-based guarantee in {len(mb_other)} of {len(others)} runs "
          f"({', '.join(which) or 'none'})")
    ratios = [stated_pure(r) / r["exact"] for r in rows if stated_pure(r) is not None and r["exact"]]
    if ratios:
        print(f"stated pure ε / exact risk ≥: from {min(ratios):.3g} to {max(ratios):.3g}")
    return n


def bench_homes() -> dict:
    """Section 2: the bundled homes, default vs the refuted ε* (on request) vs the model-free design."""
    out = {}
    for name, extra in (("default", ()), ("accept-refuted", ("--accept-refuted", "benchmark")),
                        ("model-free design", ("--privacy", "model-free"))):
        r, wall = run_schedule(*extra)
        mf = r["model_free"]
        out[name] = {"A": r["A"], "S_bar": r["S_bar"], "epsilon_c": r["epsilon_c"], "peak_risk": r["peak_risk"],
                     "guarantee": r["guarantee"]["kind"], "mf_epsilon": mf["epsilon"], "delta": mf["delta"],
                     "mf_epsilon_pure": mf["epsilon_pure"], "horizon": mf["horizon"],
                     "w_event": {w["w"]: w["epsilon"] for w in mf["w_event"]}, "wall_s": wall}
        print(f"bundled homes, {name}: (A, S̄, ε_C) = ({r['A']}, {r['S_bar']}, {r['epsilon_c']:.6g}); guarantee "
              f"{r['guarantee']['kind']}; peak_risk {_g(r['peak_risk'])}; model-free ({mf['epsilon']:.4g} nats, "
              f"δ = {mf['delta']:g}) over {mf['horizon']} slots, pure {mf['epsilon_pure']:.4g}; w-event "
              + ", ".join(f"{w['epsilon']:.3g} over {w['w']}" for w in mf["w_event"]) + f"  ({wall:.0f} s)",
              flush=True)
    refuted = out["accept-refuted"]["peak_risk"]
    d, m = out["default"], out["model-free design"]
    print(f"trusting no model costs, on the bundled homes: the refuted chains' ε* = {_g(refuted, 4)} nats (not a "
          f"bound) vs the model-free ({d['mf_epsilon']:.4g} nats, δ = {d['delta']:g}) over a year of the demo's "
          f"schedule and ({m['mf_epsilon']:.4g} nats, δ = {m['delta']:g}) of the model-free design "
          f"(ratio {d['mf_epsilon'] / refuted:.3g}×)" if refuted else "the refuted ε* is not finite")
    return out


def draw_figure(rows: list[dict], path: Path) -> None:
    """Exact risk ≥ against the bound stated first, per process, one panel per I (log–log, PNG 900 px wide, Agg).

    The three settings of a run are drawn as concentric markers (default: large ring, ``--max-tv empirical``: medium
    disc, ``--markov-model auto``: small disc), so runs that state the same number stay visible; nothing is offset.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    markers = {"order2": "s", "switching": "o", "daily": "D", "weekly": "^", "xor": "v", "first_order": "P"}
    labels = {p[0]: p[1] for p in PROCESSES}
    style = {  # setting → scatter keywords (concentric: large ring, medium disc, small disc)
        "default": {"s": 150, "facecolors": "none", "edgecolors": "#1b7837", "linewidths": 1.6},
        "empirical": {"s": 60, "color": "#2166ac"},
        "auto": {"s": 16, "color": "#fdb863", "edgecolors": "#7f3b08", "linewidths": 0.6},
    }
    before_style = {"s": 90, "facecolors": "none", "edgecolors": "#d6604d", "linewidths": 1.8}
    points = [(r["exact"], stated_pure(r)) for r in rows if stated_pure(r) is not None and r["exact"]]
    points += [(exact, printed) for _, printed, exact in ISSUE_BEFORE.values()]
    values = [v for xy in points for v in xy]
    lo = 10 ** math.floor(math.log10(min(values) / 1.5))
    hi = 10 ** math.ceil(math.log10(max(values) * 1.5))
    fig, axes = plt.subplots(1, len(DEPLOYMENTS), figsize=(9.0, 5.2), dpi=100, sharex=True, sharey=True)
    for ax, users in zip(axes, DEPLOYMENTS):
        ax.plot([lo, hi], [lo, hi], color="black", lw=1)
        ax.fill_between([lo, hi], [lo, lo], [lo, hi], color="#f4a582", alpha=0.25, lw=0)
        ax.text(hi / 1.6, lo * 2.2, "bound below\nthe exact risk", ha="right", va="bottom", fontsize=8,
                color="#b2182b")
        for (key, u), (_, printed, exact) in ISSUE_BEFORE.items():
            if u != users:
                continue
            ax.scatter(exact, printed, marker=markers[key], zorder=3, **before_style)
            after = [r for r in rows if (r["process"], r["users"], r["setting"]) == (key, users, "empirical")]
            if after and stated_pure(after[0]) is not None and after[0]["exact"]:
                ax.annotate("", xy=(after[0]["exact"], stated_pure(after[0])), xytext=(exact, printed),
                            arrowprops={"arrowstyle": "->", "color": "#999999", "lw": 0.8}, zorder=1)
        for setting in style:
            for r in rows:
                y = stated_pure(r)
                if r["users"] != users or r["setting"] != setting or y is None or not r["exact"]:
                    continue
                ax.scatter(r["exact"], y, marker=markers[r["process"]], zorder=4, **style[setting])
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="exact risk ≥ (nats)")
        ax.set_title(f"I = {users:,} users", fontsize=10)
        ax.grid(True, which="major", lw=0.4, alpha=0.5)
    axes[0].set_ylabel("bound stated first (pure ε, nats)")
    handles = [Line2D([], [], ls="", marker=markers[k], color="#444444", label=labels[k]) for k in markers
               if k in labels]
    handles += [Line2D([], [], ls="", marker="o", ms=9, mfc="none", mec="#d6604d", mew=1.8,
                       label="before: ε* printed (issue 32)"),
                Line2D([], [], ls="", marker="o", ms=11, mfc="none", mec="#1b7837", mew=1.6, label="after: default"),
                Line2D([], [], ls="", marker="o", ms=7, color="#2166ac", label="after: --max-tv empirical"),
                Line2D([], [], ls="", marker="o", ms=4, color="#fdb863", mec="#7f3b08", mew=0.6,
                       label="after: --markov-model auto")]
    fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=7.5, frameon=False, bbox_to_anchor=(0.5, 0.045))
    fig.suptitle(f"Bounds policyopt states first against the exact risk of the schedule it prints "
                 f"({USERS} users × {SLOTS} hourly slots)", fontsize=10)
    fig.text(0.01, 0.005, "after: the model-based ε* (or Theorem 3 horizon risk) where a model passed its held-out "
             "checks, else the model-free pure ε over a year (basic composition).\nGrey arrows: the issue's rows, "
             "before → after under --max-tv empirical.  Exact risk ≥: tests/_exact_risk.py (tail outputs, forward "
             "pass over the hidden states).", fontsize=6.5, color="#555555", va="bottom")
    fig.tight_layout(rect=(0, 0.14, 1, 1.0))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    print(f"figure written to {path}")


def bench(figure: Path | None = None, results: Path | None = None) -> None:
    """Both sections (``make bench``); draw the figure to `figure` and write the rows to `results` when given."""
    print(f"bench_guarantee: load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {USERS} users × "
          f"{SLOTS} slots per process, seed {SEED}", flush=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_guarantee_") as folder:
        rows = bench_zoo(Path(folder))
    violations = summarise(rows)
    homes = bench_homes()
    if results is not None:
        Path(results).write_text(json.dumps({"rows": rows, "homes": homes}, indent=1))
    if figure is not None:
        draw_figure(rows, Path(figure))
    print(f"bench_guarantee: {time.perf_counter() - start:.0f} s in all; load average at end "
          f"{os.getloadavg()[0]:.2f}")
    if violations:
        raise SystemExit(f"bench_guarantee: {violations} printed bound(s) below the exact risk: a bug in policyopt")


def _option(argv: list[str], name: str, default=None):
    """The value after `name` in `argv` (`default` when `name` is last or followed by another option)."""
    if name not in argv:
        return None
    i = argv.index(name)
    return argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else default


if __name__ == "__main__":
    args = sys.argv[1:]
    fig = _option(args, "--figure", FIGURE)
    source = _option(args, "--from-results")
    if source is not None:
        draw_figure(json.loads(Path(source).read_text())["rows"], Path(fig or FIGURE))
    else:
        bench(figure=None if fig is None else Path(fig), results=_option(args, "--results"))
