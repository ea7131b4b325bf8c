"""Benchmark of the distributed schedule model: a million meters on Dask (a measurement script, not a pytest test).

Run with ``.venv/bin/python tests/benchmarks/bench_dask.py [--users N] [--users-per-file M] [--workers W]
[--readings-check | --readings-only | --check-model | --markov-check | --model-fit]``
(``bench()`` is what ``make bench`` calls; its size comes from the environment variable
``POLICYOPT_BENCH_DASK_USERS``, default 10^6 as issue 16 asks).

Measured, each printed:

1. Data: N synthetic users (``make_meters.py``: sticky random chains over 12 levels, 168 hourly slots,
   seeded), written as Parquet files of M whole users each into a temporary directory (time reported).
2. Agreement on a sample: the first 10^4 users (or N if fewer) through the *library's serial path*
   (``read_readings_parquet``, ``Quantizer.fit`` on all sample readings, ``fit_population`` with those edges
   in chunks of 500 users, one ``Population`` of all chains, ``MSEPenalty``) and through
   ``fit_partitions`` on a local Dask cluster: the edges must be equal bit for bit, Δ(t) (t = 0..169) and
   the staleness term (t = 0..337) equal within 1e-12 relative where Δ > 1e-12, and the envelope's c and ρ
   within 1e-12.  A failure exits non-zero.
3. Serial vs Dask at N users, the default search box (A_MAX = S_MAX = 168): *serial* is the same map-reduce
   run partition after partition in this process (``fit_partitions(client=None)``: the library's serial path
   cannot hold 10^6 users — ``fit_population`` compares every reading with every user); *Dask* is
   ``fit_partitions`` on a LocalCluster of W worker processes (one thread each; cluster start-up timed
   separately).  The ratio serial / Dask, the peak RSS of each worker (VmHWM of /proc/self/status, read in the tasks),
   the peak RSS of this process, and the load average (``os.getloadavg``) before and after are printed;
   the two results are checked to agree as in 2.  The optimal schedule of the reduced model is solved
   and printed too.

4. ``run_readings_check`` (also in ``bench()``, ``--readings-check`` alone): the readings penalty and the model
   check of ``schedule --workers`` on the same meters (box A_MAX = S_MAX = 48: the readings penalty needs ages up
   to 97 inside the 168 slots), agreement on 1,000 users in four files, wall time and the workers' VmHWM of each phase.
   ``--readings-only`` runs the readings penalty alone on all N meters (no model check): issue 24's "penalty on the
   10^6-meter Parquet set through Dask".  Measured at load average 5-6, 2 workers: 2·10^4 users (2 files) generate
   1.6 s, penalty 2.9 s with the cluster up, workers' VmHWM 385 MiB each, this process 406 MiB; 10^5 users (10 files)
   generate 4.5 s, penalty 4.2 s, workers 392 MiB each, this process 421 MiB.  At 10^6 users (100 files) expect about
   45 s to generate and 45 s for the penalty (linear in the files from 10^5), about 2 minutes in all with the sample
   check and cluster start-ups, longer on a loaded machine; memory as at 10^5 (one file per worker; this process
   holds per-slot totals only), far inside 24 GiB.

5. ``run_check_model`` (``--check-model``): ``policyopt check-model --workers`` (the full check with its
   block-bootstrap band, 99 simulated data sets, 200 replicates): agreement with the serial ``check_model`` on
   200 users in four files (the JSON equal), then wall time, per-worker VmHWM, the band at a few lags and the
   verdict at N users.  Not in ``bench()`` (the lead runs it at 10^6).

6. ``run_markov_check`` (also in ``bench()``, ``--markov-check`` alone): issue 32's Markov test through Dask.  The
   chains' fit (``fit_partitions``) and the held-out check of the chains (``held_out_check_partitions``: fitted on the
   first half of each series, the G² test of X_{t+1} ⊥ X_{t−ℓ} | X_t at lags 1..82 and the Δ(t) check, each against
   39 posterior-predictive data sets), each on a fresh LocalCluster; agreement with the serial ``check_markov_model``
   on 1,000 users in four files first.  ``--check-users`` checks the first files holding that many users only.
   Measured 2026-11-27 at load average 3.4–10 (other people's tests; the workers got about half a core each),
   ``--markov-check --users 1000000 --check-users 20000``, 2 workers: agreement OK (edges bit for bit, every field and
   verdict equal, G² to 2.0e-15 relative; serial 59.5 s, Dask 40.9 s); generate 80.1 s; **chains' fit on 10^6
   meters 745.2 s**, VmHWM 455 / 476 MiB per worker; **held-out Markov check on 2·10^4 meters 320.4 s**, VmHWM
   703 / 705 MiB per worker, this process 617 MiB; G² test p = 1 (worst lag 40), Δ(t) check p = 1 (worst lag 1), not
   refuted.  At 16 ms per meter the check of all 10^6 meters would have taken about 4.5 hours on 2 workers.  Run in
   full 2026-12-03 with the machine to itself, ``--markov-check --users 1000000``: generate 33.3 s, chains' fit
   264.0 s (VmHWM 441 / 436 MiB), **held-out Markov check of all 10^6 meters 3752.2 s** (3.75 ms per meter on 2
   workers; VmHWM 716 / 729 MiB per worker, driver 571 MiB), G² test p = 1 (worst lag 41), Δ(t) check p = 1, not
   refuted; 1 h 7 min 50 s in all.  ``bench()`` checks the first 4·10^4 (``POLICYOPT_BENCH_DASK_MARKOV_USERS=1000000``
   checks all).

7. ``run_model_fit`` (also in ``bench()``, ``--model-fit`` alone; ``--spec``, ``--spec-users SPEC=N``): the per-user
   ``phase:24`` and ``order:2`` models through ``markov_model_partitions`` (max over users of ln Δ_Z(t), t = 0..24,
   and the summed counts, reduced by a maximum and a sum); agreement on 200 users in four files with the serial map
   (bit for bit) and with ``fit_markov_model`` on all users' states at once (ln Δ_Z to 1e-12, counts equal).
   Measured 2026-11-27 at load average 1.3–5.6, ``--model-fit --users 100000 --users-per-file 2500 --spec-users
   order:2=5000``, 2 workers: agreement OK for both (bit for bit, ln Δ_Z difference 0); generate 5.6 s, the chains'
   fit (the shared edges) 61.4 s; **phase:24 on 10^5 meters 221.9 s**, VmHWM 614 / 614 MiB per worker; **order:2 on
   5,000 meters 256.2 s**, VmHWM 397 / 390 MiB per worker; this process 298 MiB.  Nearly all of it is Δ_Z (24 phase
   matrices of 12 × 12, resp. a 144-state Z chain per user): 10^6 meters would take about 37 minutes (phase:24) and
   about 14 hours (order:2) on 2 workers, extrapolated linearly in the files, not run.  Run 2026-12-03 after the
   compiled row-pair search (``models/tv_pairs.py``), ``--model-fit --users 1000000 --spec phase:24 --spec order:2
   --spec-users order:2=20000`` at load average 1.6–2.4: **phase:24 on all 10^6 meters 698.0 s**, VmHWM 1214 / 1251
   MiB per worker; order:2 on 2·10^4 meters 176.6 s (8.8 ms per meter: about 2.5 hours at 10^6, not run), VmHWM
   731 / 731 MiB.  ``bench()`` fits phase:24 on
   min(N, 10^5) meters (``POLICYOPT_BENCH_DASK_MODEL_USERS``) and order:2 on the first 5,000.

Targets: the Dask path agrees with the serial one (asserted); ratio > 1.3 on 2 workers (reached only when two
cores are free: on a loaded machine the figure is reported as OVER TARGET, not hidden); peak RSS per worker
< 2 GiB (bounded by the partition size, not by N).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_meters import write_meters  # noqa: E402

SAMPLE_USERS = 10_000
A_MAX = S_MAX = 168
RATIO_TARGET, WORKER_MIB_TARGET = 1.3, 2048.0


def report(label: str, value: float, unit: str, target: float, above: bool = False) -> None:
    """Print ``label: value unit  [target < X unit] OK`` (or ``> X`` when `above`)."""
    ok = value > target if above else value < target
    sign = ">" if above else "<"
    print(f"{label}: {value:.3f} {unit}  [target {sign} {target:g} {unit}] {'OK' if ok else 'OVER TARGET'}")


def _generate(tmp, n_users: int, users_per_file: int, slots: int) -> list:
    """Write the synthetic meters into `tmp`, print the time taken; the files."""
    start = time.perf_counter()
    paths = write_meters(tmp, n_users, users_per_file=users_per_file, slots=slots)
    print(f"generate: {time.perf_counter() - start:.1f} s, {len(paths)} files")
    return paths


def _load() -> str:
    return "load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def _rss(stats: dict, what: str) -> None:
    """Report each worker's peak RSS (``{worker: MiB}``) against WORKER_MIB_TARGET, labelled `what`."""
    for w, mib in sorted(stats.items()):
        report(f"{what}: peak RSS of worker {w}", mib, "MiB", WORKER_MIB_TARGET)


def _on_cluster(workers: int, job):
    """Run ``job(client)`` on a fresh LocalCluster of `workers` workers (``dask_client``), timed.

    Parameters
    ----------
    workers : int
        Dask workers of the cluster.
    job : callable
        Called once with the cluster's ``distributed.Client``.

    Returns
    -------
    (float, float, object)
        Cluster start-up seconds, the job's seconds with the cluster up (without its shutdown), and its result.
    """
    from policyopt.studies.distributed import dask_client

    start = time.perf_counter()
    with dask_client(workers=workers) as client:
        t_up = time.perf_counter() - start
        start = time.perf_counter()
        out = job(client)
        t_job = time.perf_counter() - start
    return t_up, t_job, out


def _agree(label, a_tv, b_tv, a_stale, b_stale, a_env, b_env, a_edges, b_edges) -> bool:
    """Print and return whether two fits agree (edges exact; Δ, staleness, envelope to 1e-12 relative)."""
    a_tv, b_tv = np.exp(np.asarray(a_tv)), np.exp(np.asarray(b_tv))
    big = a_tv > 1e-12
    tv_err = float(np.max(np.abs(b_tv[big] / a_tv[big] - 1.0))) if big.any() else 0.0
    pos = np.asarray(a_stale) > 0
    st_err = float(np.max(np.abs(np.asarray(b_stale)[pos] / np.asarray(a_stale)[pos] - 1.0)))
    env_err = max(abs(b_env.c / a_env.c - 1.0), abs(b_env.rho / a_env.rho - 1.0))
    same_edges = bool(np.array_equal(a_edges, b_edges))
    ok = same_edges and tv_err <= 1e-12 and st_err <= 1e-12 and env_err <= 1e-12
    print(f"{label}: edges equal {same_edges}; max rel. difference Δ(t) {tv_err:.2e}, staleness {st_err:.2e}, "
          f"envelope {env_err:.2e}  [tolerance 1e-12] {'OK' if ok else 'MISMATCH'}")
    return ok


def run(n_users: int, users_per_file: int, workers: int, slots: int = 168) -> int:
    """Generate, check agreement on a sample, time serial vs Dask; return the exit code."""
    from policyopt.io import read_readings_parquet
    from policyopt.models.estimation import fit_population
    from policyopt.studies.distributed import dask_client, fit_partitions
    from policyopt.studies.schedule import design_schedule
    from policyopt.utility.penalty import MSEPenalty

    horizon, n_stale = max(A_MAX, S_MAX) + 1, A_MAX + S_MAX + 2
    ok = True
    print(f"users {n_users}, {users_per_file} per file, {slots} slots, 12 states, {workers} Dask workers; "
          f"os.cpu_count() = {os.cpu_count()}; {_load()}")
    with tempfile.TemporaryDirectory(prefix="policyopt-meters-") as tmp:
        start = time.perf_counter()
        paths = write_meters(tmp, n_users, users_per_file=users_per_file, slots=slots)
        size = sum(p.stat().st_size for p in paths) / 2**20
        print(f"generate: {time.perf_counter() - start:.1f} s, {len(paths)} files, {size:.0f} MiB")

        sample = paths[: max(1, -(-min(SAMPLE_USERS, n_users) // users_per_file))]
        n_sample = min(n_users, len(sample) * users_per_file)
        with dask_client(workers=workers) as client:
            start = time.perf_counter()
            # the library's serial path: Quantizer.fit on all sample readings (numpy.quantile), fit_population with
            # those edges in chunks of 500 users (its per-user loop compares every reading with every user: quadratic
            # in one call), one Population of all chains, MSEPenalty
            from policyopt.models.estimation import Quantizer
            from policyopt.models.markov import Population

            frames = [read_readings_parquet(p) for p in sample]
            quant = Quantizer.fit(np.concatenate([f["value"].to_numpy() for f in frames]), 12)
            fits = []
            for f in frames:  # chunks of 500 users (sorted), the estimate of each user being independent of the others
                codes = f["user"].factorize()[0] // 500
                fits += [fit_population(chunk, smoothing=0.01, quantizer=quant) for _, chunk in f.groupby(codes, sort=True)]
            pop = Population([c for f in fits for c in f.population.chains])
            pen = MSEPenalty(pop)
            ser_tv = pop.log_max_tv(np.arange(horizon + 1))
            ser_stale = pen.staleness(np.arange(n_stale))
            ser_env = pop.envelope(max(A_MAX, S_MAX))
            t_lib = time.perf_counter() - start
            start = time.perf_counter()
            dist = fit_partitions(sample, 12, smoothing=0.01, horizon=horizon, n_staleness=n_stale, client=client)
            t_dist = time.perf_counter() - start
            print(f"sample of {n_sample} users: library serial path {t_lib:.1f} s, Dask {t_dist:.1f} s")
            ok &= _agree(
                "sample agreement (library serial vs Dask)",
                ser_tv, dist.population.log_max_tv_table, ser_stale, dist.penalty.staleness(np.arange(n_stale)),
                ser_env, dist.population.envelope(max(A_MAX, S_MAX)), quant.edges, dist.edges,
            )
            del frames, fits, pop, pen
        print(_load())

        start = time.perf_counter()
        serial = fit_partitions(paths, 12, smoothing=0.01, horizon=horizon, n_staleness=n_stale, client=None)
        t_serial = time.perf_counter() - start
        rss_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # this process: no exec since start
        print(f"serial (same map-reduce, in process): {t_serial:.1f} s  "
              f"(edges {serial.timings['edges_s']:.1f} s, state values {serial.timings['state_values_s']:.1f} s, "
              f"chains + Δ + staleness {serial.timings['chains_s']:.1f} s); peak RSS of this process {rss_self:.0f} MiB; {_load()}")

        t_up, t_dask, dist = _on_cluster(workers, lambda client: fit_partitions(
            paths, 12, smoothing=0.01, horizon=horizon, n_staleness=n_stale, client=client))
        print(f"Dask ({workers} workers): {t_dask:.1f} s with the cluster up (start-up {t_up:.1f} s)  "
              f"(edges {dist.timings['edges_s']:.1f} s, state values {dist.timings['state_values_s']:.1f} s, "
              f"chains + Δ + staleness {dist.timings['chains_s']:.1f} s); {_load()}")
        report("ratio serial / Dask", t_serial / t_dask, "x", RATIO_TARGET, above=True)
        for w, mib in sorted(dist.peak_rss_mib.items()):
            report(f"peak RSS of worker {w}", mib, "MiB", WORKER_MIB_TARGET)
        print(f"model: {dist.population.n_users} users kept of {dist.users}, {len(dist.excluded)} excluded, "
              f"{dist.readings} readings, {dist.transitions} transitions, λ* = {dist.population.spectral_rate:.6f}")
        ok &= _agree(
            "full agreement (serial map-reduce vs Dask)",
            serial.population.log_max_tv_table, dist.population.log_max_tv_table,
            serial.penalty.staleness(np.arange(n_stale)), dist.penalty.staleness(np.arange(n_stale)),
            serial.population.envelope(max(A_MAX, S_MAX)), dist.population.envelope(max(A_MAX, S_MAX)),
            serial.edges, dist.edges,
        )
        start = time.perf_counter()
        rep = design_schedule(dist.population, max_penalty=0.15, A_max=A_MAX, S_max=S_MAX, penalty=dist.penalty)
        d = rep.solution.decision or {}
        print(f"schedule on the reduced model: {rep.solution.status.value}, A = {d.get('A')}, S_bar = {d.get('S_bar')}, "
              f"epsilon_c = {d.get('epsilon_c')}, peak risk = {rep.solution.objective} ({time.perf_counter() - start:.2f} s)")
    return 0 if ok else 1


#: Search box of the readings penalty and model check section: the ages A_MAX + S_MAX + 1 = 97 of the readings penalty
#: must lie inside the 168 slots of the meters (the box of 168 above needs 337).
CHECK_A_MAX = CHECK_S_MAX = 48
CHECK_SAMPLE_USERS = 200


def run_readings_check(n_users: int, users_per_file: int, workers: int, slots: int = 168,
                       check_users: int | None = None) -> int:
    """The readings penalty and the model check through Dask on the same meters; return the exit code.

    1. Agreement on a sample (the first CHECK_SAMPLE_USERS users, one file): ``readings_moments_partitions`` and
       ``check_partitions`` against the serial ``readings_moments`` / ``check_fitted`` (the ``quick_check`` of
       ``schedule``) on the same readings: staleness within 1e-12 relative, the check's arrays equal.
    2. At N users: the chains (``fit_partitions``, needed by the check) on one cluster, then the readings penalty
       and the model check each on a *fresh* LocalCluster of W workers, so that each worker's VmHWM (read in the
       tasks) is that phase's peak; wall times, per-worker peaks, the penalty at a few ages and the verdict printed.
       The model check costs about 0.5 ms per user on this machine (19 simulated data sets, 95 lags, 144 lagged
       pair counts each); `check_users` runs it on the first files holding that many users only (whole files);
       ``check_users=0`` (``--readings-only``) skips the model check, in the sample and at N users: the readings
       penalty alone on all N meters (issue 24's benchmark).  Memory: the meters are generated one file at a time
       (10^4 users × 168 slots ≈ 40 MB of arrays), each worker holds one file's readings and per-slot sums, this
       process only the per-slot totals (168 × (L + 1) floats); the sample's serial fit is of 200 users.
    """
    from policyopt.io import read_readings_parquet
    from policyopt.models.estimation import fit_population
    from policyopt.studies.check_model import QUICK_DRAWS, check_fitted, data_states, quick_max_lag
    from policyopt.studies.distributed import dask_client, fit_partitions
    from policyopt.studies.distributed_checks import check_partitions, readings_moments_partitions
    from policyopt.utility.readings_penalty import ReadingsMSEPenalty, readings_moments

    L = CHECK_A_MAX + CHECK_S_MAX + 1
    horizon, n_stale = max(CHECK_A_MAX, CHECK_S_MAX) + 1, CHECK_A_MAX + CHECK_S_MAX + 2
    ok = True
    with_check = check_users != 0
    print(f"readings penalty{' + model check' if with_check else ' only'}: users {n_users}, {users_per_file} per file, {slots} slots, 12 states, "
          f"A_MAX = S_MAX = {CHECK_A_MAX} (ages 0..{L}, lags 1..{CHECK_A_MAX + CHECK_S_MAX - 1}), {workers} Dask workers; {_load()}")
    with tempfile.TemporaryDirectory(prefix="policyopt-meters-") as tmp:
        paths = _generate(tmp, n_users, users_per_file, slots)

        with tempfile.TemporaryDirectory(prefix="policyopt-sample-") as stmp:
            write_meters(stmp, min(CHECK_SAMPLE_USERS, n_users), users_per_file=max(1, CHECK_SAMPLE_USERS // 4), slots=slots)
            sample = stmp  # four files
            df = read_readings_parquet(sample)
            start = time.perf_counter()
            ser_m = readings_moments(df, L)
            if with_check:
                fitted = fit_population(df, 12, smoothing=0.01)
                states, users = data_states(df, fitted)
                ser_c = check_fitted(fitted, states, users, max_lag=quick_max_lag(CHECK_A_MAX, CHECK_S_MAX, states.shape[1]),
                                     draws=QUICK_DRAWS, n_boot=0, seed=0)
            t_ser = time.perf_counter() - start
            start = time.perf_counter()
            with dask_client(workers=workers) as client:
                dist_m, _ = readings_moments_partitions(sample, L, client=client)
                if with_check:
                    sfit = fit_partitions(sample, 12, smoothing=0.01, horizon=horizon, n_staleness=n_stale, client=client)
                    dist_c, _ = check_partitions(sample, sfit, CHECK_A_MAX, CHECK_S_MAX, client=client, seed=0)
            t_dist = time.perf_counter() - start
            # the self and cross terms themselves (the staleness clips estimates below 0 to 0, which would hide a
            # difference there), normwise relative difference per term
            err = max(float(np.nanmax(np.abs(y - x)) / np.nanmax(np.abs(x)))
                      for x, y in zip(ser_m.by_phase(), dist_m.by_phase()))
            a = ReadingsMSEPenalty(ser_m, users=10**5).staleness(np.arange(1, L + 1))
            b = ReadingsMSEPenalty(dist_m, users=10**5).staleness(np.arange(1, L + 1))
            err = max(err, float(np.max(np.abs(b - a)) / np.max(np.abs(a))))
            same = (not with_check or (np.array_equal(ser_c.empirical.estimate, dist_c.empirical.estimate)
                                       and np.array_equal(ser_c.draws, dist_c.draws) and ser_c.summary() == dist_c.summary()))
            good = err <= 1e-12 and same
            ok &= good
            print(f"sample of {ser_m.n_users} users: serial {t_ser:.1f} s, Dask (with cluster start) {t_dist:.1f} s; readings "
                  f"self/cross terms and staleness, max normwise rel. difference {err:.2e} [tolerance 1e-12]"
                  + (f"; model check arrays and summary equal {same}" if with_check else " (model check skipped)")
                  + f"  {'OK' if good else 'MISMATCH'}")

        t_up, _, (moments, rstats) = _on_cluster(
            workers, lambda client: readings_moments_partitions(paths, L, client=client))
        pen = ReadingsMSEPenalty(moments, users=moments.n_users)
        print(f"readings penalty on Dask: {rstats['seconds']:.1f} s with the cluster up (start-up {t_up:.1f} s); "
              f"{moments.n_users} users, {moments.slots} slots; staleness at ages 1, 3, 8, {L}: "
              + ", ".join(f"{pen.staleness(a):.6g}" for a in (1, 3, 8, L)) + f"; {_load()}")
        _rss(rstats["peak_rss_mib"], "readings penalty")
        print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0:.0f} MiB")
        if not with_check:
            return 0 if ok else 1

        check_paths = paths if check_users is None else paths[: max(1, -(-check_users // users_per_file))]
        start = time.perf_counter()
        with dask_client(workers=workers) as client:  # the model the check tests: the chains of these files' users
            fit = fit_partitions(check_paths, 12, smoothing=0.01, horizon=horizon, n_staleness=n_stale, client=client)
        print(f"chains of the checked users (fit_partitions): {time.perf_counter() - start:.1f} s with cluster start-up")
        t_up, _, (check, cstats) = _on_cluster(
            workers, lambda client: check_partitions(check_paths, fit, CHECK_A_MAX, CHECK_S_MAX, client=client, seed=0))
        s = check.summary()
        print(f"model check on Dask: {cstats['seconds']:.1f} s with the cluster up (start-up {t_up:.1f} s); "
              f"{check.info['users']} users, lags 1..{s['max_lag']}, {s['draws']} simulated data sets; refuted {s['refuted']} "
              f"at {s['refuted_count']} lags ({s['refuted_lag_ranges']}); {_load()}")
        _rss(cstats["peak_rss_mib"], "model check")
    return 0 if ok else 1


#: Users of the serial-vs-Dask agreement sample of ``run_check_model`` (four files).
CHECK_MODEL_SAMPLE_USERS = 200


def run_check_model(n_users: int, users_per_file: int, workers: int, slots: int = 1000, states: int = 3,
                    draws: int = 99, n_boot: int = 200) -> int:
    """``policyopt check-model --workers`` (the full check with its block-bootstrap band) through Dask; exit code.

    1. Agreement: the first CHECK_MODEL_SAMPLE_USERS users in four files through the serial
       :func:`~policyopt.studies.check_model.check_model` (all readings in one table) and through
       ``check_model_partitions`` on a LocalCluster of W workers: the reports' JSON must be equal but for the
       wall time and the data's name (the band and the simulated draws come from per-user streams).
    The defaults (1,000 slots, 3 states) give every user's rows the ≥ 100 pairs a claim needs (with 168 slots and 12
    states no row has them, Δ̂ is 0 and the band [0, 1]: nothing would be measured but the overhead).

    2. At N users: ``check_model_partitions`` (chains fitted with ``fit_partitions``, then per file the lagged-pair
       statistic, the B replicates' maxima and the R simulated data sets) on a fresh LocalCluster, so that each
       worker's VmHWM (read in the tasks, after the fit and the check of its files) is that run's peak; wall time,
       per-worker peaks, the band at a few lags and the verdict printed.
    """
    from policyopt.io import read_readings_parquet
    from policyopt.studies.check_model import check_model
    from policyopt.studies.distributed import dask_client
    from policyopt.studies.distributed_checks import check_model_partitions

    kw = dict(n_states=states, draws=draws, n_boot=n_boot, seed=0)
    print(f"check-model with band: users {n_users}, {users_per_file} per file, {slots} slots, {states} states, "
          f"{draws} simulated data sets, {n_boot} bootstrap replicates, {workers} Dask workers; {_load()}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="policyopt-sample-") as stmp:
        m = min(CHECK_MODEL_SAMPLE_USERS, n_users)
        write_meters(stmp, m, users_per_file=max(1, -(-m // 4)), slots=slots)
        start = time.perf_counter()
        ser = check_model(read_readings_parquet(stmp), **kw).to_dict()
        t_ser = time.perf_counter() - start
        start = time.perf_counter()
        with dask_client(workers=workers) as client:
            dist, _ = check_model_partitions(stmp, client=client, **kw)
        t_dist = time.perf_counter() - start
        dist = dist.to_dict()
        same = all(ser[k] == dist[k] for k in ser if k not in ("wall_time_s", "source"))
        ok &= same
        print(f"sample of {ser['users']} users in 4 files: serial {t_ser:.1f} s, Dask (with cluster start) {t_dist:.1f} s; "
              f"reports equal (band, draws, verdict) {same}  {'OK' if same else 'MISMATCH'}")
    with tempfile.TemporaryDirectory(prefix="policyopt-meters-") as tmp:
        paths = _generate(tmp, n_users, users_per_file, slots)
        t_up, _, (report_, stats) = _on_cluster(
            workers, lambda client: check_model_partitions(paths, client=client, **kw))
        out = report_.to_dict()
        rows = out["lags"]
        shown = sorted({1, 2, len(rows) // 2, len(rows)})
        claimed = sum(r["users_without_claim"] == 0 for r in rows)
        print(f"check-model on Dask: {stats['seconds']:.1f} s with the cluster up (start-up {t_up:.1f} s; chains' fit "
              f"{stats['fit_seconds']:.1f} s); {out['users']} users, lags 1..{out['max_lag']} ({claimed} with every "
              f"user's rows claimed); refuted {out['refuted']} at "
              f"{out['summary']['refuted_count']} lags; peak RSS of this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0:.0f} MiB; {_load()}")
        for t in shown:
            r = rows[t - 1]
            print(f"  lag {t}: chains' Δ {r['model_max_tv']:.4g}, direct Δ̂ {r['empirical_max_tv']:.4g}, band "
                  f"[{r['empirical_lower']:.4g}, {r['empirical_upper']:.4g}] ({r['users_without_claim']} users without "
                  f"claim), p = {r['p_value']:.3g}")
        _rss(stats["peak_rss_mib"], "check-model")
    return 0 if ok else 1


#: Users and files of the agreement sample of the held-out Markov check.
MARKOV_SAMPLE_USERS, MARKOV_SAMPLE_FILES = 1000, 4


def _sample_dir(stmp, n_users: int, files: int, slots: int) -> str:
    """The first min(`n_users`, N) meters of the generator as `files` Parquet files in `stmp`."""
    write_meters(stmp, n_users, users_per_file=max(1, -(-n_users // files)), slots=slots)
    return stmp


def run_markov_check(n_users: int, users_per_file: int, workers: int, slots: int = 168,
                     check_users: int | None = None) -> int:
    """The chains' fit and the held-out Markov check (G² test + Δ(t) check) through Dask on the meters; exit code.

    1. Agreement on MARKOV_SAMPLE_USERS users in MARKOV_SAMPLE_FILES files: ``held_out_check_partitions`` on a
       LocalCluster of W workers against the library's serial ``check_markov_model("chain", split_states(...))`` of
       the same readings with ``fit_population``'s quantizer (as ``tests/cli/test_check_model_dask.py``): the edges
       bit for bit, every field of the two checks equal but the G² sums (added in another order: 1e-12 relative).
    2. At N users: ``fit_partitions`` (the chains) on a fresh cluster, then ``held_out_check_partitions`` on another
       (so each worker's VmHWM, read in the tasks, is that phase's peak); wall time of each phase, the workers' peaks,
       this process's peak, the load average before and after, the p-values, worst lags and verdicts.  The check
       cost 16 ms per meter on 2 workers at load average 5–10 (39 simulated data sets, each fitted chain simulated
       twice, 82 lags);
       `check_users` checks the first files holding that many users only (whole files; the chains are fitted on all N).
    """
    import pyarrow.parquet as pq

    from policyopt.models.estimation import fit_population
    from policyopt.studies.distributed import dask_client, fit_partitions
    from policyopt.studies.distributed_heldout import held_out_check_partitions
    from policyopt.studies.markov_check import CHECK_DRAWS, check_markov_model, split_states

    # held out: the last half of each series (slots // 2 slots), lags 1..slots // 2 − 2 (a triple must fit) of both tests
    lags = slots // 2 - 2
    kw = dict(markov_lags=lags, max_tv_lags=lags, seed=0, draws=CHECK_DRAWS)
    print(f"Markov check of the chains: users {n_users}, {users_per_file} per file, {slots} slots, 12 states, held out "
          f"the last half, lags 1..{lags} of the G² test and the Δ(t) check, {CHECK_DRAWS} simulated data sets, "
          f"{workers} Dask workers; {_load()}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="policyopt-sample-") as stmp:
        m = min(MARKOV_SAMPLE_USERS, n_users)
        sample = _sample_dir(stmp, m, MARKOV_SAMPLE_FILES, slots)
        import pandas as pd

        df = pd.concat([pq.read_table(p).to_pandas() for p in sorted(Path(sample).glob("*.parquet"))], ignore_index=True)
        start = time.perf_counter()
        fitted = fit_population(df, 12, smoothing=0.01)
        ser = check_markov_model("chain", split_states(df, fitted.quantizer, fitted.users), **kw)
        t_ser = time.perf_counter() - start
        start = time.perf_counter()
        with dask_client(workers=workers) as client:
            fit = fit_partitions(sample, 12, smoothing=0.01, horizon=2, n_staleness=2, client=client)
            dist, _ = held_out_check_partitions(sample, fit, client=client, **kw)
        t_dist = time.perf_counter() - start
        a, b = np.asarray(ser.markov_test["statistic"], dtype=float), np.asarray(dist.markov_test["statistic"], dtype=float)
        nz = a != 0  # relative difference where the serial G² is not 0, equality where it is
        g2 = float(np.max(np.abs(b[nz] / a[nz] - 1.0))) if nz.any() else 0.0
        g2 = g2 if np.array_equal(a[~nz], b[~nz]) else np.inf
        same = (np.array_equal(fit.edges, fitted.quantizer.edges)
                and (dist.model, dist.description, dist.n_parameters, dist.passed)
                == (ser.model, ser.description, ser.n_parameters, ser.passed)
                and {k: v for k, v in dist.info.items() if k != "wall_time_s"}
                == {k: v for k, v in ser.info.items() if k != "wall_time_s"}
                and dist.max_tv_check == ser.max_tv_check
                and {k: v for k, v in dist.markov_test.items() if k != "statistic"}
                == {k: v for k, v in ser.markov_test.items() if k != "statistic"}
                and g2 <= 1e-12)
        ok &= same
        print(f"sample of {ser.info['users']} users in {MARKOV_SAMPLE_FILES} files: serial check_markov_model {t_ser:.1f} s, "
              f"Dask (fit + check, with cluster start) {t_dist:.1f} s; edges, fields, verdicts equal, G² max rel. "
              f"difference {g2:.2e} [tolerance 1e-12]  {'OK' if same else 'MISMATCH'}")
        del df, fitted, ser, dist

    with tempfile.TemporaryDirectory(prefix="policyopt-meters-") as tmp:
        paths = _generate(tmp, n_users, users_per_file, slots)
        load0 = _load()
        t_up, t_fit, fit = _on_cluster(workers, lambda client: fit_partitions(
            paths, 12, smoothing=0.01, horizon=169, n_staleness=2, client=client))
        print(f"chains' fit (fit_partitions) on Dask: {t_fit:.1f} s with the cluster up (start-up {t_up:.1f} s); "
              f"{fit.population.n_users} users kept of {fit.users}, {fit.readings} readings; {load0} before, {_load()} after")
        _rss(fit.peak_rss_mib, "chains' fit")
        load0 = _load()
        check_paths = paths if check_users is None else paths[: max(1, -(-check_users // users_per_file))]
        t_up, _, (check, stats) = _on_cluster(
            workers, lambda client: held_out_check_partitions(check_paths, fit, client=client, **kw))
        mt, mv = check.markov_test, check.max_tv_check
        print(f"held-out Markov check on Dask: {stats['seconds']:.1f} s with the cluster up (start-up {t_up:.1f} s); "
              f"{check.info['users']} users ({len(check_paths)} files), fitted on {check.info['fit_slots']} slots, tested on {check.info['test_slots']}; "
              f"G² test lags 1..{mt['lags'][-1]}: p = {mt['p_value']:.3g}, worst lag {mt['worst_lag']}, "
              f"{'refuted' if mt['refuted'] else 'not refuted'}; Δ(t) check lags 1..{mv['max_lag']}: p = {mv['p_value']:.3g}, "
              f"worst lag {mv['worst_lag']}, {'refuted' if mv['refuted'] else 'not refuted'}; verdict "
              f"{'passed' if check.passed else 'refuted'}; {load0} before, {_load()} after")
        _rss(stats["peak_rss_mib"], "Markov check")
        print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0:.0f} MiB")
    return 0 if ok else 1


#: The per-user models fitted through Dask (``markov_model_partitions``) and the last age of their Δ_Z table (a day of
#: hourly slots: Δ_Z of order:2 on 144 Z states costs ~76 ms per user up to 24 slots, ~290 ms up to 169).
MODEL_SPECS, MODEL_HORIZON, MODEL_SAMPLE_USERS = ("phase:24", "order:2"), 24, 200


def run_model_fit(n_users: int, users_per_file: int, workers: int, slots: int = 168, specs=MODEL_SPECS,
                  horizon: int = MODEL_HORIZON, spec_users: dict | None = None) -> int:
    """The per-user ``phase:24`` and ``order:2`` models through Dask (``markov_model_partitions``); exit code.

    1. Agreement on MODEL_SAMPLE_USERS users in four files, per spec: Dask equal to the serial map (``client=None``)
       bit for bit, and to ``fit_markov_model`` on all users' states at once (ln Δ_Z to 1e-12, summed counts equal).
    2. At N users: the chains (``fit_partitions``, for the shared edges), then each spec on a fresh LocalCluster of W
       workers: wall time, workers' VmHWM, Δ_Z at a few ages, transitions counted.  ``spec_users[spec]`` fits that
       spec on the first files holding that many users only (whole files; the edges are those of all N users).
    """
    import pandas as pd
    import pyarrow.parquet as pq

    from policyopt.models.markov_model import fit_markov_model
    from policyopt.studies.distributed import dask_client, fit_partitions
    from policyopt.studies.distributed_models import markov_model_partitions

    print(f"per-user models {', '.join(specs)}: users {n_users}, {users_per_file} per file, {slots} slots, 12 states, "
          f"Δ_Z at ages 0..{horizon}, {workers} Dask workers; {_load()}")
    ok = True
    ages = np.arange(horizon + 1)
    with tempfile.TemporaryDirectory(prefix="policyopt-sample-") as stmp:
        sample = _sample_dir(stmp, min(MODEL_SAMPLE_USERS, n_users), 4, slots)
        fit = fit_partitions(sample, 12, smoothing=0.01, horizon=2, n_staleness=2)
        df = pd.concat([pq.read_table(p).to_pandas() for p in sorted(Path(sample).glob("*.parquet"))], ignore_index=True)
        df = df[~df["user"].isin(list(fit.excluded))]
        users = tuple(sorted(df["user"].unique()))
        row = {u: i for i, u in enumerate(users)}
        x = np.full((len(users), int(df["time"].max()) + 1), -1, dtype=np.int64)
        x[df["user"].map(row).to_numpy(), df["time"].to_numpy()] = np.searchsorted(fit.edges, df["value"].to_numpy(), side="right")
        with dask_client(workers=workers) as client:
            for spec in specs:
                start = time.perf_counter()
                ser = markov_model_partitions(sample, spec, fit, horizon=horizon)
                t_ser = time.perf_counter() - start
                dist = markov_model_partitions(sample, spec, fit, horizon=horizon, client=client)
                ref = fit_markov_model(spec, x, 12, users=users, smoothing=0.01)
                err = float(np.max(np.abs(dist.log_max_tv[1:] - ref.log_max_tv(ages)[1:])))
                same = (np.array_equal(dist.log_max_tv, ser.log_max_tv) and np.array_equal(dist.counts, ser.counts)
                        and np.array_equal(dist.counts, ref.counts.sum(axis=0)) and err <= 1e-12)
                ok &= same
                print(f"sample {spec}, {dist.users} users in 4 files: serial map {t_ser:.1f} s, Dask {dist.seconds:.1f} s; "
                      f"Dask = serial map bit for bit, counts = fit_markov_model's on all users, ln Δ_Z max abs difference "
                      f"{err:.2e} [tolerance 1e-12]  {'OK' if same else 'MISMATCH'}")

    with tempfile.TemporaryDirectory(prefix="policyopt-meters-") as tmp:
        paths = _generate(tmp, n_users, users_per_file, slots)
        start = time.perf_counter()
        with dask_client(workers=workers) as client:
            fit = fit_partitions(paths, 12, smoothing=0.01, horizon=horizon, n_staleness=2, client=client)
        print(f"chains' fit (fit_partitions, the shared edges): {time.perf_counter() - start:.1f} s with cluster start-up")
        for spec in specs:
            load0 = _load()
            cap = (spec_users or {}).get(spec)
            spec_paths = paths if cap is None else paths[: max(1, -(-cap // users_per_file))]
            t_up, _, res = _on_cluster(
                workers, lambda client: markov_model_partitions(spec_paths, spec, fit, horizon=horizon, client=client))
            shown = sorted({1, 2, horizon // 2, horizon})
            print(f"{spec} on Dask: {res.seconds:.1f} s with the cluster up (start-up {t_up:.1f} s); {res.users} users "
                  f"({res.partitions} files), "
                  f"{res.transitions} transitions counted, counts {res.counts.shape}; Δ_Z at "
                  + ", ".join(f"t={t}: {res.max_tv[t]:.4g}" for t in shown) + f" (chains' Δ at t={horizon}: "
                  f"{fit.population.max_tv(horizon):.4g}); {load0} before, {_load()} after")
            _rss(res.peak_rss_mib, spec)
        print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0:.0f} MiB")
    return 0 if ok else 1


def bench() -> None:
    """Entry point of ``make bench`` (size from POLICYOPT_BENCH_DASK_USERS, default 10^6)."""
    n = int(os.environ.get("POLICYOPT_BENCH_DASK_USERS", "1000000"))
    if run(n, 10_000, 2) != 0:
        raise SystemExit("bench_dask: the Dask and serial results disagree")
    # the model check costs ~0.5 ms per user: by default one file of 10^4 users (10^6 would take ~5 min on 2 workers)
    check = int(os.environ.get("POLICYOPT_BENCH_DASK_CHECK_USERS", "10000"))
    if run_readings_check(n, 10_000, 2, check_users=min(check, n)) != 0:
        raise SystemExit("bench_dask: the Dask and serial readings penalty or model check disagree")
    # check-model with its band on the same kind of meters (168 slots, 12 states): about 11 minutes at 10^6
    cm = int(os.environ.get("POLICYOPT_BENCH_DASK_CHECK_MODEL_USERS", str(n)))
    if cm and run_check_model(cm, 10_000, 2, slots=168, states=12) != 0:
        raise SystemExit("bench_dask: the Dask and serial check-model reports disagree")
    # the held-out Markov check costs 3.75 ms per meter on 2 workers (62.5 min at 10^6, measured 2026-12-03 alone on
    # the machine; ~16 ms at load 5-10): the chains on all N meters, the check by default on the first 4·10^4
    mc = int(os.environ.get("POLICYOPT_BENCH_DASK_MARKOV_USERS", "40000"))
    if run_markov_check(n, 10_000, 2, check_users=min(mc, n)) != 0:
        raise SystemExit("bench_dask: the Dask and serial held-out Markov checks disagree")
    # the per-user models: phase:24 ~5 ms, order:2 ~150 ms per user on a worker at load average 5 (Δ_Z on 144 Z
    # states): by default on 10^5 and 5,000 meters in files of 2,500 (so that order:2 keeps both workers busy)
    mn = min(n, int(os.environ.get("POLICYOPT_BENCH_DASK_MODEL_USERS", "100000")))
    if run_model_fit(mn, 2_500, 2, spec_users={"order:2": min(mn, 5_000)}) != 0:
        raise SystemExit("bench_dask: the Dask and serial per-user model fits disagree")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="serial vs Dask on synthetic Parquet meters")
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--users-per-file", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--slots", type=int, default=None, help="slots per user (default 168; 1000 with --check-model)")
    parser.add_argument("--states", type=int, default=3, help="with --check-model: quantile states (default 3)")
    parser.add_argument("--check-users", type=int, default=None,
                        help="with --readings-check (--markov-check): run the model check (the held-out Markov check) "
                             "on the first files holding this many users (0: no model check)")
    parser.add_argument("--readings-only", action="store_true",
                        help="the readings penalty alone on all --users meters (= --readings-check --check-users 0)")
    parser.add_argument("--readings-check", action="store_true",
                        help="time the readings penalty and the model check instead of the chains' fit")
    parser.add_argument("--markov-check", action="store_true",
                        help="time the chains' fit and the held-out Markov check (G² test + Δ(t) check) instead")
    parser.add_argument("--model-fit", action="store_true",
                        help="time the per-user phase:24 and order:2 models (markov_model_partitions) instead")
    parser.add_argument("--spec", action="append", default=None,
                        help="with --model-fit: the model (repeatable; default phase:24 and order:2)")
    parser.add_argument("--spec-users", action="append", default=None, metavar="SPEC=N",
                        help="with --model-fit: fit SPEC on the first files holding N users only (repeatable)")
    parser.add_argument("--check-model", action="store_true",
                        help="time check-model --workers (the full check with its bootstrap band) instead")
    args = parser.parse_args(argv)
    if args.markov_check:
        return run_markov_check(args.users, args.users_per_file, args.workers, args.slots or 168, args.check_users)
    if args.model_fit:
        return run_model_fit(args.users, args.users_per_file, args.workers, args.slots or 168,
                             tuple(args.spec) if args.spec else MODEL_SPECS,
                             spec_users={k: int(v) for k, v in (a.split("=") for a in args.spec_users or [])})
    if args.check_model:
        return run_check_model(args.users, args.users_per_file, args.workers,
                               1000 if args.slots is None else args.slots, args.states)
    if args.readings_check or args.readings_only:
        return run_readings_check(args.users, args.users_per_file, args.workers, args.slots or 168,
                                  0 if args.readings_only else args.check_users)
    return run(args.users, args.users_per_file, args.workers, args.slots or 168)


if __name__ == "__main__":
    sys.exit(main())
