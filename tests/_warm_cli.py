"""The warm start of the CLI tests: ``policyopt`` in a child forked from an interpreter that has imported it.

Most of the time of the CLI tests went to starting ``policyopt``: every run imported the package and its libraries
again (``dp_accounting`` alone takes about a second, scipy's statistics and signal modules, pandas, numba's cached
kernels …), about 60 % of the suite's time.  This module is both sides of a faster way to start the *same* program:

* **the server** (``python tests/_warm_cli.py``, one per test process): it imports what the installed console script
  imports — the entry point named by the package metadata (``policyopt = policyopt.cli.main:main``) — and every
  module of the installed package with the libraries the commands import lazily, then waits.  For each request it
  forks; the child takes the request's argument list (``sys.argv``), environment, working directory and files as its
  standard input, output and error (file descriptors 0, 1, 2), calls the entry point exactly as the console script
  does (``sys.exit(main())``), runs the interpreter's exit steps (non-daemon threads joined, ``atexit`` functions,
  streams flushed) and ends with the exit status the script would have.  Each child starts from the server's
  untouched state: nothing a run does reaches the next.
* **the client** (:func:`run`): what the tests call instead of ``subprocess.run([policyopt, …])``; it returns the
  same :class:`subprocess.CompletedProcess` (text, captured) and raises the same :class:`subprocess.TimeoutExpired`
  (the child is killed).

What a forked child does not repeat is the start-up itself: the imports, and whatever a library does once when it is
imported (a warning printed at import time is printed once, in the server, not by each run).  It also shares the
server's string-hash seed (a real start draws one per process).  So the tests that are *about* the start-up, the
console script, signals or several processes at once exec the script (``subprocess`` as before).  A run is forked
from a server started with the run's own start-up environment: everything but ``POLICYOPT_*`` and pytest's
variables (Python and the libraries read the rest at import) and but :data:`_DRIFT_ENV`, the few variables that
libraries imported by the test process set in its own environment and that change nothing a started ``policyopt``
prints (Dask's nanny sets ``PYTHONHASHSEED``, ``MALLOC_TRIM_THRESHOLD_``, ``MKL_NUM_THREADS`` and
``__DASK_PARENT_PID``, and policyopt's local Dask workers ``MALLOC_MMAP_THRESHOLD_`` through it, matplotlib's tests
``MPLBACKEND=Agg``, an OpenMP shim ``KMP_*``).  A run that differs only in
those is forked with them in its environment; each new value had started another server (14 starts of about 6 s each
in one suite run).  At most three servers are kept, the least recently used ended first.  ``POLICYOPT_TEST_EXEC=1``
execs every command: the whole suite as a user's shell starts the program (slower; run it before a release).
``tests/cli/test_warm_start.py`` checks that both ways give the same exit code, stdout and stderr.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

#: The installed ``policyopt`` entry point of the interpreter running the tests.
POLICYOPT = str(Path(sys.executable).with_name("policyopt"))

#: Set to 1 (or anything but empty / 0): every command is exec'ed, none forked from the warm server.
EXEC_ENV = "POLICYOPT_TEST_EXEC"

#: Environment variables a run may set or change and still be forked: read by policyopt at run time, or pytest's.
_RUN_TIME_ENV = ("POLICYOPT_", "PYTEST_", "COV_CORE_")

#: Variables that libraries imported by a test process set in its own environment as the suite runs, none of which
#: changes what a started ``policyopt`` prints (the server already chose matplotlib's Agg backend; numpy here uses
#: OpenBLAS, not MKL or Intel's OpenMP; a forked run shares the server's hash seed in any case): not part of the
#: start-up environment a server is chosen by.
_DRIFT_ENV = frozenset({"PYTHONHASHSEED", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MKL_NUM_THREADS",
                        "__DASK_PARENT_PID", "MPLBACKEND", "KMP_DUPLICATE_LIB_OK", "KMP_INIT_AT_FORK"})

#: Modules of the installed package not imported by the server: ``__main__`` runs the command when imported, and
#: ``data.make_bundle`` is the maintainers' script that built the bundled file.
_NOT_IMPORTED = ("policyopt.__main__", "policyopt.data.make_bundle")

#: Libraries the commands import lazily (inside their handlers), imported by the server so no run pays for them.
_LIBRARIES = ("dp_accounting", "scipy.stats", "scipy.signal", "scipy.optimize", "pandas", "pyarrow.parquet",
              "arch.bootstrap", "cvxpy", "pyomo.environ", "pyscipopt", "highspy", "opendp.prelude", "hmmlearn.hmm",
              "tqdm", "dask.dataframe", "distributed", "matplotlib.pyplot", "mpmath", "sqlite3")


# ----------------------------------------------------------------------------------------------------- the server


def _entry_point():
    """The function the installed ``policyopt`` console script calls (from the package metadata)."""
    from importlib.metadata import entry_points

    (ep,) = entry_points(group="console_scripts", name="policyopt")
    return ep.load()


def _warm_up() -> None:
    """Import every module of the installed package and the libraries its commands import lazily."""
    import importlib
    import pkgutil

    import matplotlib

    matplotlib.use("Agg")  # what a run without a display selects by itself; set before pyplot is imported
    import policyopt

    for info in pkgutil.walk_packages(policyopt.__path__, "policyopt."):
        if info.name not in _NOT_IMPORTED:
            importlib.import_module(info.name)
    for name in _LIBRARIES:
        importlib.import_module(name)
    _load_compiled_kernels()


def _load_compiled_kernels() -> None:
    """Load the numba kernels of the held-out model check from their on-disk cache, as a run's first check does.

    numba compiles (or loads from its cache) a kernel at its first call in a process, and sets up its compiler the
    first time: 0.5–1 s a run, 60 s of the suite's forked runs when each child did it.  A check of a 2-user chain on
    int64 states (:class:`~policyopt.studies.markov_check.CheckData`'s type) calls the G² kernel and the simulation's
    time loop with the argument types of every real check."""
    import numpy as np

    from policyopt.studies.markov_check import CheckData, check_markov_model

    x = np.random.default_rng(0).integers(0, 2, size=(2, 64)).astype(np.int64)
    zero = np.zeros(2, dtype=np.int64)
    data = CheckData(train=x, test=x, train_starts=zero, test_starts=zero, users=("a", "b"), n_states=2, holdout=0.5)
    check_markov_model("chain", data, markov_lags=3, max_tv_lags=3, draws=1)


def _exit_status(code) -> int:
    """The exit status the interpreter gives ``sys.exit(code)`` (a non-integer is printed on stderr, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _child(main, request: dict) -> None:
    """In the forked child: become the requested ``policyopt`` run, then end the process with its exit status."""
    status = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, path, flags in ((0, request["stdin"], os.O_RDONLY), (1, request["stdout"], os.O_WRONLY),
                                (2, request["stderr"], os.O_WRONLY)):
            new = os.open(path, flags)
            os.dup2(new, fd)
            os.close(new)
        sys.argv = [POLICYOPT, *request["argv"]]
        if "numpy" in sys.modules:  # numpy's legacy global generator is seeded once per process by the OS
            sys.modules["numpy"].random.seed()
        try:
            sys.exit(main())
        except SystemExit as exc:
            status = _exit_status(exc.code)
        except BaseException:  # noqa: BLE001 - what the interpreter does with an exception that ends the program
            sys.excepthook(*sys.exc_info())
            status = 1
        threading._shutdown()  # the interpreter's exit steps, in its order
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed or broken stream at exit, as the interpreter ignores it
                pass
    finally:
        os._exit(status)


def serve() -> None:
    """The server's loop: one JSON request per line on stdin, replies (``pid``, then ``status``) on stdout."""
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.close(null)
    before = dict(os.environ)
    main = _entry_point()
    _warm_up()
    # What the imports set in the environment (KMP_* by an OpenMP runtime, say), which a started run sets too.
    by_imports = {k: v for k, v in os.environ.items() if before.get(k) != v}
    replies.write(json.dumps({"ready": True}) + "\n")
    for line in requests:
        request = json.loads(line)
        request["env"] = {**request["env"], **by_imports}
        if threading.active_count() != 1:  # pragma: no cover - fork is only safe from a single-threaded process
            replies.write(json.dumps({"error": "the server has threads"}) + "\n")
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            _child(main, request)
        replies.write(json.dumps({"pid": pid}) + "\n")
        _, wait_status = os.waitpid(pid, 0)
        replies.write(json.dumps({"status": os.waitstatus_to_exitcode(wait_status)}) + "\n")


# ----------------------------------------------------------------------------------------------------- the client


class _Server:
    """The warm server of this test process (started on first use, ended with the process)."""

    def __init__(self, env: dict):
        self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1, env=env)
        ready = self._reply(timeout=300)
        if not ready.get("ready"):
            raise RuntimeError(f"the warm policyopt server did not start: {ready}")

    def close(self) -> None:
        """End the server (its stdin closed: its loop ends; killed if it does not within 10 s)."""
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()

    def _reply(self, timeout: float | None) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the warm policyopt server ended")
        return json.loads(line)

    def run(self, argv: list, env: dict, cwd: str, timeout: float | None, input, text: bool):
        with tempfile.TemporaryDirectory(prefix="policyopt-run-") as tmp:
            paths = {name: os.path.join(tmp, name) for name in ("stdin", "stdout", "stderr")}
            Path(paths["stdin"]).write_bytes((input or "").encode() if text or isinstance(input, str) else (input or b""))
            for name in ("stdout", "stderr"):
                Path(paths[name]).touch()
            self.proc.stdin.write(json.dumps({"argv": argv, "env": env, "cwd": cwd, **paths}) + "\n")
            pid = self._reply(timeout=60)["pid"]
            try:
                status = self._reply(timeout=timeout)["status"]
            except TimeoutError:
                os.kill(pid, 9)
                self._reply(timeout=60)
                raise subprocess.TimeoutExpired([POLICYOPT, *argv], timeout, _read(paths["stdout"], text),
                                                _read(paths["stderr"], text)) from None
            return subprocess.CompletedProcess([POLICYOPT, *argv], status, _read(paths["stdout"], text),
                                               _read(paths["stderr"], text))


def _read(path: str, text: bool):
    """A run's output file: bytes, or text as ``subprocess.run(text=True)`` decodes it."""
    if not text:
        return Path(path).read_bytes()
    with open(path, encoding=None, newline=None) as f:
        return f.read()


def _start_up(env: dict) -> tuple:
    """The part of an environment that a started ``policyopt`` reads at start-up: all but the run-time variables
    (:data:`_RUN_TIME_ENV`) and the test process's drift (:data:`_DRIFT_ENV`)."""
    return tuple(sorted((k, v) for k, v in env.items() if not k.startswith(_RUN_TIME_ENV) and k not in _DRIFT_ENV))


#: The warm servers of this test process, by the start-up environment they were started with (a run is forked from
#: the one whose start-up environment is its own), least recently used first.
_SERVERS: "collections.OrderedDict[tuple, _Server]" = collections.OrderedDict()
#: At most this many servers are kept: a run with another start-up environment ends the least recently used one.
#: The environment of a test process drifts as it runs (libraries imported by the tests set ``OMP_NUM_THREADS``,
#: ``MPLBACKEND``, ``KMP_*`` …) and seldom goes back.
_MAX_SERVERS = 3
#: Held while a run uses the server (one run at a time); a run that finds it taken (a test running commands from
#: several threads at once) is exec'ed, so runs meant to overlap still do.
_LOCK = threading.Lock()


@atexit.register
def _close_all() -> None:
    """End this process's servers when it exits (their pipes closed)."""
    while _SERVERS:
        _SERVERS.popitem()[1].close()


def _server(env: dict) -> _Server:
    """The server started with `env`'s start-up environment (started now if need be)."""
    key = _start_up(env)
    server = _SERVERS.get(key)
    if server is None or server.proc.poll() is not None:
        while len(_SERVERS) >= _MAX_SERVERS:
            _SERVERS.popitem(last=False)[1].close()
        server = _SERVERS[key] = _Server(dict(key))
    _SERVERS.move_to_end(key)
    return server


def exec_only() -> bool:
    """Whether ``POLICYOPT_TEST_EXEC`` asks for every command to be exec'ed."""
    return os.environ.get(EXEC_ENV, "") not in ("", "0")


def run(args, *, env: dict | None = None, cwd=None, timeout: float | None = None, input=None, text: bool = True,
        warm: bool = True) -> subprocess.CompletedProcess:
    """``subprocess.run([policyopt, *args], capture_output=True, text=text, …)``, forked from the warm server.

    `args` are the arguments after the program name; `env` (default: this process's), `cwd`, `timeout` (the run is
    killed and :class:`subprocess.TimeoutExpired` raised), `input` (the run's standard input; default empty) and
    `text` (str output, else bytes) as :func:`subprocess.run` takes them.  The command is exec'ed instead when `warm` is false, when
    ``POLICYOPT_TEST_EXEC`` is set, or when `env` changes a start-up setting (see the module docstring).
    """
    argv = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    cwd = os.path.abspath(cwd if cwd is not None else os.getcwd())
    if warm and not exec_only() and _LOCK.acquire(blocking=False):
        try:
            return _server(env).run(argv, env, cwd, timeout, input, text)
        finally:
            _LOCK.release()
    empty = "" if text else b""
    return subprocess.run([POLICYOPT, *argv], capture_output=True, text=text, env=env, cwd=cwd, timeout=timeout,
                          input=input if input is not None else empty)


if __name__ == "__main__":
    serve()
