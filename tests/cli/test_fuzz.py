"""Property-based test of the command-line contract: no traceback, ever.

Hypothesis generates argument vectors and file contents for every sub-command registered in
:data:`policyopt.cli.main.COMMANDS` (found by walking the parser that ``build_parser`` returns, so a new command is
fuzzed without editing this file) and runs the *installed* ``policyopt`` entry point as a subprocess with a timeout.

The contract checked for every generated case:

* exit 0: under ``--json`` stdout is one strict JSON document (``json.loads`` with a ``parse_constant`` that raises
  on ``NaN``/``Infinity``); every stderr line is one of the program's own ``policyopt: warning: …`` lines and none of
  them asks to be reported (Python or numpy warnings re-printed by ``main`` say "please report");
* exit 2: exactly one line on stderr, ``policyopt…: error: …``, nothing on stdout but what a text/JSON report printed
  before an error it reports (``--plot`` failures) — and never a traceback or a warning line;
* never exit 1 (``policyopt: internal error: … (please report)``: an unexpected exception is a bug), never any other
  code, never a traceback, never a hang (the subprocess timeout).

Generated inputs: numbers at the extremes (±1e308, 1e400, 5e-324, 1e-300, NaN, inf, 2^53 + 1, huge sizes) and files
that are empty, header only, binary, UTF-16, UTF-8 with a BOM, hold huge numbers / NaN / subnormals, deeply nested
JSON, complex or 3-D ``.npy`` arrays, integer times ≥ 2^53, and small valid ones.

Profiles (environment variable ``POLICYOPT_FUZZ``): unset or ``quick`` runs 6 derandomized examples per command
(the whole file took 29 s with 4 per command at load average 6, so ``make test`` stays well under 90 s); ``large``
runs 80 per command; an integer N runs N per command.  ``POLICYOPT_FUZZ_LOG=FILE`` appends one JSON line per case
(command, argv, outcome) and ``POLICYOPT_FUZZ_COUNT_ONLY=1`` records without failing (used to measure how often the
contract held); ``POLICYOPT_FUZZ_TIMEOUT`` is the per-case limit in seconds (default 120).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyopt.cli.main import build_parser

from _cli import default_sigint  # noqa: E402
import _warm_cli  # noqa: E402

PROGRAM = Path(sys.executable).with_name("policyopt")
PROFILE = os.environ.get("POLICYOPT_FUZZ", "quick")
EXAMPLES = {"quick": 6, "large": 80}.get(PROFILE) or int(PROFILE)
TIMEOUT = float(os.environ.get("POLICYOPT_FUZZ_TIMEOUT", "120"))
LOG = os.environ.get("POLICYOPT_FUZZ_LOG")
COUNT_ONLY = os.environ.get("POLICYOPT_FUZZ_COUNT_ONLY") == "1"


def _reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def _subcommands() -> dict:
    """{name: sub-parser} of every registered sub-command."""
    parser = build_parser()
    for action in parser._actions:  # noqa: SLF001 - argparse keeps sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return dict(action.choices)
    raise AssertionError("policyopt has no sub-commands")


SUBCOMMANDS = _subcommands()

# ---------------------------------------------------------------------------------------------------- values
PLAIN_NUMBERS = ["1", "2", "3", "0.5", "0.15", "0.9"]
EXTREME_NUMBERS = ["0", "-1", "1e308", "-1e308", "1e-300", "5e-324", "nan", "inf", "-inf", "1e400", "1e20", "1e12",
                   "1000000", "10000000", "9007199254740993", "abc", "", "0x10", "1_0"]
SMALL_INTS = ["2", "3", "4", "6", "10"]
VALID_READINGS = "user,time,value\n" + "".join(
    f"{u},{t},{v:.3f}\n" for u in ("a", "b") for t, v in enumerate(np.random.default_rng(1).uniform(0, 2, 40)))


def _readings(kind: str) -> bytes:
    rows = {
        "valid": VALID_READINGS,
        "header_only": "user,time,value\n",
        "huge": "user,time,value\na,0,1e308\na,1,-1e308\na,2,1e308\nb,0,1\nb,1,2\nb,2,1\n",
        "subnormal": "user,time,value\na,0,5e-324\na,1,0\na,2,5e-324\nb,0,0\nb,1,5e-324\nb,2,0\n",
        "nan": "user,time,value\na,0,nan\na,1,1\n",
        "big_times": "user,time,value\n" + "".join(f"a,{2**53 + t},{t % 3}\n" for t in range(6))
        + "".join(f"b,{2**53 + t},{t % 2}\n" for t in range(6)),
        "huge_times": "user,time,value\na,1e300,1\na,1e301,2\nb,0,1\nb,1,2\n",
        "bad_row": "user,time,value\na,0\n",
    }[kind]
    return rows.encode()


def _matrix(kind: str) -> tuple[str, bytes]:
    """(suffix, content) of a matrix file."""
    if kind == "npy_complex":
        return ".npy", _npy(np.array([[0.5 + 1j, 0.5], [0.5, 0.5]]))
    if kind == "npy_3d":
        return ".npy", _npy(np.full((2, 2, 2), 0.5))
    if kind == "npy_valid":
        return ".npy", _npy(np.array([[0.9, 0.1], [0.2, 0.8]]))
    if kind == "npy_huge":
        return ".npy", _npy(np.array([[1e308, -1e308], [0.5, 0.5]]))
    text = {
        "valid": "0.9,0.1\n0.2,0.8\n",
        "valid3": "0.6,0.3,0.1\n0.2,0.6,0.2\n0.1,0.3,0.6\n",
        "values": "-1,1\n0.9,0.1\n0.2,0.8\n",
        "huge": "1e308,-1e308\n0.5,0.5\n",
        "huge_values": "1e308,-1e308\n0.9,0.1\n0.2,0.8\n",
        "subnormal": "5e-324,1\n1,5e-324\n",
        "nan": "nan,1\n0.5,0.5\n",
    }[kind]
    return ".csv", text.encode()


def _npy(arr) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _model(kind: str) -> bytes:
    good = {"transitions": [[0.7, 0.3], [0.3, 0.7]], "coupling": [[0.5, 0.5], [0.5, 0.5]], "n_sequences": 2}
    if kind == "valid":
        return json.dumps(good).encode()
    if kind == "nested":
        return b"[" * 100000 + b"]" * 100000
    if kind == "nested_obj":
        return b'{"transitions": ' + b"[" * 5000 + b"]" * 5000 + b', "coupling": [[1]]}'
    if kind == "nan":
        return b'{"transitions": [[NaN, 0.5], [0.5, 0.5]], "coupling": [[1, 0.5], [0.5, 1]], "n_sequences": 2}'
    if kind == "huge":
        return json.dumps({**good, "n_sequences": 10**30}).encode()
    if kind == "huge_values":
        return json.dumps({**good, "state_values": [1e308, -1e308]}).encode()
    if kind == "subnormal":
        return json.dumps({**good, "transitions": [[1 - 5e-324, 5e-324], [5e-324, 1]]}).encode()
    if kind == "wrong_types":
        return json.dumps({"transitions": "abc", "coupling": {"a": 1}, "n_sequences": 2.5}).encode()
    raise AssertionError(kind)


def _budgets(kind: str) -> bytes:
    return {
        "valid": "0.5,0.5,0.5\n1\n",
        "huge": "1e308,1e308\n",
        "subnormal": "5e-324,5e-324\n",
        "nan": "nan,1\n",
        "long": ",".join(["0.1"] * 5000),
    }[kind].encode()


GENERIC_FILE_KINDS = ["empty", "binary", "utf16", "bom"]


def _generic(kind: str, text: bytes, draw_bytes: bytes) -> bytes:
    if kind == "empty":
        return b""
    if kind == "binary":
        return b"\xff\xfe\x00\x9c" + draw_bytes
    if kind == "utf16":
        return text.decode().encode("utf-16")
    if kind == "bom":
        return b"\xef\xbb\xbf" + text
    raise AssertionError(kind)


FILE_OPTIONS = {  # dest → (content kinds, maker, valid text for the generic kinds, suffixes)
    "data": (["valid", "header_only", "huge", "subnormal", "nan", "big_times", "huge_times", "bad_row"], _readings,
             VALID_READINGS.encode(), [".csv"]),
    "matrix": (["valid", "valid3", "values", "huge", "huge_values", "subnormal", "nan", "npy_complex", "npy_3d",
                "npy_valid", "npy_huge"], None, b"0.9,0.1\n0.2,0.8\n", [".csv"]),
    "budgets": (["valid", "huge", "subnormal", "nan", "long"], _budgets, b"0.5,0.5\n", [".csv", ".txt"]),
    "model": (["valid", "nested", "nested_obj", "nan", "huge", "huge_values", "subnormal", "wrong_types"], _model,
              _model("valid"), [".json"]),
}
FILE_OPTIONS["pb"] = FILE_OPTIONS["pf"] = FILE_OPTIONS["matrix"]


VALID_FILE_KINDS = {"data": ["valid"], "matrix": ["valid", "valid3", "values", "npy_valid"], "budgets": ["valid"],
                    "model": ["valid"]}
VALID_FILE_KINDS["pb"] = VALID_FILE_KINDS["pf"] = VALID_FILE_KINDS["matrix"]


@st.composite
def file_value(draw, dest: str, workdir: Path, counter: list, fault: bool) -> str:
    kinds, maker, generic_text, suffixes = FILE_OPTIONS[dest]
    pool = kinds + GENERIC_FILE_KINDS + ["missing"] if fault else VALID_FILE_KINDS[dest]
    kind = draw(st.sampled_from(pool))
    counter[0] += 1
    suffix = draw(st.sampled_from(suffixes))
    if kind == "missing":
        return str(workdir / f"missing{counter[0]}{suffix}")
    if kind in GENERIC_FILE_KINDS:
        content = _generic(kind, generic_text, draw(st.binary(max_size=32)))
    elif maker is None:
        suffix, content = _matrix(kind)
    else:
        content = maker(kind)
    path = workdir / f"f{counter[0]}{suffix}"
    path.write_bytes(content)
    return str(path)


INLINE_VALID = ["0.8,0.2;0.2,0.8", "0.8,0.2;0.1,0.9", "0.6,0.3,0.1;0.2,0.6,0.2;0.1,0.3,0.6"]
INLINE_FAULTS = ["1,0;0,1", "0.5,0.5", "1e308,-1e308;0.5,0.5", "nan,1;0.5,0.5", "0.5+1j,0.5;0.5,0.5", ";", "",
                 ";".join([",".join(["0.05"] * 20)] * 20), "[[[[[[[[[[", "5e-324,1;1,5e-324"]

# (valid values, fault values) of options whose values are not plain numbers
SPECIAL = {
    "chain": (["two-state:p=0.1,q=0.1", "two-state:p=0.3,q=0.2"],
              ["two-state:p=0,q=0", "two-state:p=1e-300,q=0.5", "two-state:p=5e-324,q=1", "two-state:p=nan,q=0.1",
               "two-state:p=2,q=0.1", "two-state:p=1,q=1", "nope", ""]),
    "two_binary": (["p=0.3,q=0.3,lambda=0.5", "p=0.2,q=0.4,lambda=0.8"],
                   ["p=0,q=0,lambda=0", "p=1,q=1,lambda=1", "p=5e-324,q=0.5,lambda=1", "p=nan,q=0.3,lambda=0.5",
                    "p=0.3", "x"]),
    "homes": (["Building_1,Building_2", "Building_1"], ["Nope", ",", "Building_1,Building_1"]),
    "vary": (["p=0.05:0.3:3", "users=10,20", "states=2:4:2", "q=0.1,0.2"],
             ["users=1:1000000:1000000", "q=nan:1:2", "x=1", "p=1e-300,5e-324", "states=1e400", "p=0.1:0.2:1000000000"]),
    "scheduler": ([], ["not a url", "tcp://", "inproc://x", "tcp://host:notaport", "inproc://x/1/2"]),
    "sweep_grid": (["0.1:0.2:3", "0.1,0.2", "0.05:0.5:2"],
                   ["0.1:0.2:1000000000", "1e308:1e308:2", "5e-324,1e-300", "nan:1:2", "0.2:0.1:3", "abc", "0.1:0.2:1e400"]),
}
INT_DESTS = ("states", "users", "max_age", "max_interval", "releases", "horizon", "plot_epochs", "workers")
SOURCE_DESTS = ("data", "pb", "pf", "matrix", "chain", "model", "two_binary", "homes")


@st.composite
def option_value(draw, cmd: str, action, workdir: Path, counter: list, fault: bool):
    dest = action.dest
    if action.choices is not None:
        return "bogus" if fault and draw(st.booleans()) else draw(st.sampled_from(list(action.choices)))
    if dest in FILE_OPTIONS and (dest not in ("pb", "pf") or draw(st.booleans())):
        return draw(file_value(dest, workdir, counter, fault))
    if dest in ("pb", "pf"):
        return draw(st.sampled_from(INLINE_FAULTS if fault else INLINE_VALID))
    key = "sweep_grid" if dest == "max_penalty" and cmd == "sweep" else dest
    if key in SPECIAL:
        valid, faults = SPECIAL[key]
        return draw(st.sampled_from(faults if fault or not valid else valid))
    if dest == "out":
        counter[0] += 1
        out = workdir / f"sweep{counter[0]}.csv"
        if fault:  # an existing output holding binary bytes
            out.write_bytes(b"\xff\xfe\x00garbage")
            out.with_suffix(".jsonl").write_bytes(b"\xff\x00\n")
        return str(out)
    if dest == "plot":
        counter[0] += 1
        suffix = draw(st.sampled_from([".txt", ".png/x", ""])) if fault else ".svg"
        return str(workdir / f"plot{counter[0]}{suffix}")
    if fault:
        return draw(st.sampled_from(EXTREME_NUMBERS))
    if dest in INT_DESTS:
        return draw(st.sampled_from(SMALL_INTS))
    return draw(st.sampled_from(PLAIN_NUMBERS))


@st.composite
def argv_for(draw, cmd: str, workdir: Path):
    """An argument vector for sub-command `cmd`: mostly valid values with 0-2 faults (an extreme number, a bad
    file, a wrong choice, a missing or extra option) injected, so that the faults reach past the option parser."""
    parser = SUBCOMMANDS[cmd]
    counter = [0]
    argv = [cmd]
    actions = [a for a in parser._actions if a.option_strings and a.dest != "help"]  # noqa: SLF001
    groups = [g for g in parser._mutually_exclusive_groups]  # noqa: SLF001
    chosen = []
    for group in groups:  # one member of each exclusive group (rarely none or two)
        n = draw(st.sampled_from([1] * 8 + [0, 2]))
        chosen += draw(st.lists(st.sampled_from(group._group_actions), min_size=n, max_size=n, unique=True))  # noqa: SLF001
    in_groups = {a for g in groups for a in g._group_actions}  # noqa: SLF001
    for a in actions:
        if a in in_groups:
            continue
        p = 0.97 if a.required else 0.8 if a.dest in SOURCE_DESTS else 0.35
        if draw(st.floats(0, 1)) < p:
            chosen.append(a)
    n_faults = draw(st.sampled_from([0, 1, 1, 1, 2]))
    faulty = set(draw(st.lists(st.integers(0, max(len(chosen) - 1, 0)), min_size=n_faults, max_size=n_faults)))
    for i, a in enumerate(chosen):
        opt = a.option_strings[-1]
        if a.nargs == 0:
            argv.append(opt)
        else:
            argv += [opt, draw(option_value(cmd, a, workdir, counter, i in faulty))]
    if draw(st.integers(0, 19)) == 0:
        argv.append(draw(st.sampled_from(["--no-such-option", "stray", "--json=1"])))
    return argv


def run_program(argv, cwd, timeout=TIMEOUT):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONWARN")}
    env["MPLBACKEND"] = "Agg"
    return _warm_cli.run(argv, cwd=cwd, timeout=timeout, env=env, text=False)


def contract_violation(argv, proc) -> str | None:
    """None if the run held the contract, else what broke."""
    try:
        out = proc.stdout.decode("utf-8")
        err = proc.stderr.decode("utf-8")
    except UnicodeDecodeError:
        return "output is not UTF-8"
    lines = err.splitlines()
    if "Traceback" in err:
        return "traceback"
    if proc.returncode == 0:
        bad = [ln for ln in lines if not ln.startswith("policyopt: warning: ") or "please report" in ln]
        if bad:
            return f"stray stderr line on success: {bad[0][:200]!r}"
        if "--json" in argv:
            try:
                json.loads(out, parse_constant=_reject_constant)
            except ValueError as exc:
                return f"stdout is not strict JSON: {exc}"
        return None
    if proc.returncode == 2:
        if len(lines) != 1 or not err.endswith("\n"):
            return f"exit 2 with {len(lines)} stderr lines: {err[:300]!r}"
        if not (lines[0].startswith("policyopt: error: ") or lines[0].startswith(f"policyopt {argv[0]}: error: ")
                or lines[0].startswith("policyopt: error")):
            return f"exit 2 with an unexpected line: {lines[0][:200]!r}"
        return None
    return f"exit {proc.returncode}: {err[-300:]!r}"


def _record(cmd, argv, verdict, seconds):
    if LOG:
        with open(LOG, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"command": cmd, "argv": argv, "violation": verdict, "seconds": round(seconds, 2)}) + "\n")


def _check(cmd, data):
    with tempfile.TemporaryDirectory(prefix="policyopt-fuzz-") as tmp:
        workdir = Path(tmp)
        argv = data.draw(argv_for(cmd, workdir), label="argv")
        start = time.perf_counter()
        try:
            proc = run_program(argv, workdir)
            verdict = contract_violation(argv, proc)
        except subprocess.TimeoutExpired:
            verdict = f"hang: no answer within {TIMEOUT:g} s"
        _record(cmd, argv, verdict, time.perf_counter() - start)
        if not COUNT_ONLY:
            assert verdict is None, f"policyopt {' '.join(argv)}: {verdict}"


@pytest.mark.parametrize("cmd", sorted(SUBCOMMANDS))
def test_cli_contract_holds_for_generated_inputs(cmd):
    """Every generated argument vector ends in exit 0 + strict JSON or exit 2 + one line (see the module doc)."""

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, print_blob=True,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def run(data):
        _check(cmd, data)

    run()


def test_every_registered_command_is_fuzzed():
    from policyopt.cli.main import COMMANDS

    assert len(SUBCOMMANDS) >= len(COMMANDS) >= 5
    assert {"schedule", "tpl", "tpl-budget", "discounted", "fran", "sweep"} <= set(SUBCOMMANDS)


# ------------------------------------------------------------------------------------------------ Ctrl-C
@pytest.mark.parametrize("argv", [
    ["tpl-budget", "--alpha", "1", "--horizon", "24", "--method", "optimal", "--json"],
    ["schedule", "--max-age", "3000", "--max-interval", "3000", "--json"],
])
def test_ctrl_c_prints_one_line_and_exits_130(argv, tmp_path):
    proc = subprocess.Popen([str(PROGRAM), *argv], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=default_sigint)
    time.sleep(3.0)
    assert proc.poll() is None, "the command finished before it could be interrupted; pick a longer one"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.decode().splitlines() == ["policyopt: interrupted"], err
    assert out == b""
