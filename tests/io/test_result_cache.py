"""policyopt.io.result_cache: stored results are the computed ones, keys follow inputs and code, bad folders are refused."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from _cli import run_any, strict_json, without_times

from policyopt.io import result_cache
from policyopt.errors import InvalidInputError


#: The real lookup, taken when the module is imported (the suite's autouse fixture replaces it in each test).
_REAL_CACHE_FOLDER = result_cache.cache_folder


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The real cache folder lookup (the suite turns it off in process), on a fresh folder."""
    monkeypatch.setattr(result_cache, "cache_folder", _REAL_CACHE_FOLDER)
    monkeypatch.setenv(result_cache.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _counting():
    calls = []

    @result_cache.cached("test-square")
    def square(x, *, scale=1.0):
        calls.append(x)
        return np.asarray(x, dtype=float) ** 2 * scale

    return square, calls


def test_a_stored_result_is_returned_and_equals_the_computed_one(folder):
    square, calls = _counting()
    first = square(np.arange(4), scale=2.0)
    second = square(np.arange(4), scale=2.0)
    assert len(calls) == 1  # computed once
    np.testing.assert_array_equal(first, [0.0, 2.0, 8.0, 18.0])
    np.testing.assert_array_equal(second, first)
    (stored,) = (folder / "test-square").glob("*.pickle")
    with open(stored, "rb") as fh:
        np.testing.assert_array_equal(pickle.load(fh), first)
    mask = os.umask(0)
    os.umask(mask)
    assert stored.stat().st_mode & 0o777 == 0o666 & ~mask  # readable by whoever may read a new file (a shared cache)


def test_other_arguments_or_other_code_give_another_key(folder, monkeypatch):
    square, calls = _counting()
    square(np.arange(4))
    square(np.arange(4), scale=3.0)  # another keyword value
    square(np.arange(5))  # another array
    square(np.arange(4).astype(np.int32))  # another dtype
    assert len(calls) == 4
    monkeypatch.setattr(result_cache, "_code_version", lambda: b"another build")
    square(np.arange(4))
    assert len(calls) == 5
    assert len(list((folder / "test-square").glob("*.pickle"))) == 5


def test_unset_or_empty_stores_nothing(folder, monkeypatch):
    square, calls = _counting()
    monkeypatch.setenv(result_cache.CACHE_ENV, "")
    square(1)
    square(1)
    assert len(calls) == 2 and not folder.exists()


def test_an_argument_that_cannot_be_pickled_is_computed_not_stored(folder):
    calls = []

    @result_cache.cached("test-callable")
    def apply(f, x):
        calls.append(x)
        return f(x)

    assert apply(lambda v: v + 1, 1) == 2 and apply(lambda v: v + 1, 1) == 2
    assert len(calls) == 2 and not (folder / "test-callable").exists()


def test_an_unreadable_stored_file_is_computed_again_and_replaced(folder):
    square, calls = _counting()
    square(3)
    (stored,) = (folder / "test-square").glob("*.pickle")
    stored.write_bytes(b"\x80\x05 cut short")  # a run killed while writing cannot leave this (rename), a disk can
    assert float(square(3)) == 9.0 and len(calls) == 2
    with open(stored, "rb") as fh:
        assert float(pickle.load(fh)) == 9.0
    assert [p.name for p in (folder / "test-square").iterdir() if p.name.startswith(".tmp-")] == []


def test_a_folder_that_cannot_be_created_is_refused_naming_the_variable(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv(result_cache.CACHE_ENV, str(blocker / "sub"))
    with pytest.raises(InvalidInputError, match=r"`POLICYOPT_CACHE_DIR` must name a folder policyopt can create, got .*a-file/sub"):
        _REAL_CACHE_FOLDER()


def test_the_code_version_changes_with_any_source_file(tmp_path, monkeypatch):
    pkg = tmp_path / "rc_probe_pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "kernel.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(result_cache, "_PACKAGES", ("rc_probe_pkg",))
    digests = []
    for text in ("X = 1\n", "X = 2\n", "X = 1\n"):
        (pkg / "sub" / "kernel.py").write_text(text)
        result_cache._code_version.cache_clear()
        digests.append(result_cache._code_version())
    result_cache._code_version.cache_clear()
    assert digests[0] != digests[1] and digests[0] == digests[2]


def test_cli_refuses_a_bad_cache_folder_in_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    env = dict(os.environ, POLICYOPT_CACHE_DIR=str(blocker / "sub"))
    from _warm_cli import run

    res = run(["tpl", "--epsilon", "0.1", "--horizon", "24"], env=env, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "POLICYOPT_CACHE_DIR" in lines[0] and str(blocker) in lines[0], res.stderr


def test_a_cached_run_prints_what_an_uncached_run_prints(tmp_path):
    """``make demo``'s command — the bundled homes' held-out check, the PLD accounting, the bootstrap of the readings'
    MSE band and the backtest's held-out Δ(t) comparison: computed (folder unset), stored (first run with it), read
    back (second run): the same JSON, wall times aside."""
    from _warm_cli import run

    args = ["schedule", "--privacy", "model-free", "--max-rmse", "0.19", "--max-age", "24", "--max-interval", "24",
            "--backtest", "0.5"]
    cache = tmp_path / "cache"
    outs = []
    for value in ("", str(cache), str(cache)):
        res = run([*args, "--json"], env=dict(os.environ, POLICYOPT_CACHE_DIR=value), cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        outs.append(without_times(strict_json(res.stdout)))
        if value:
            assert len(list((cache / "markov-check").glob("*.pickle"))) == 1
            assert len(list((cache / "pld-epsilon").glob("*.pickle"))) >= 1
            assert len(list((cache / "readings-bootstrap").glob("*.pickle"))) >= 1
            assert len(list((cache / "backtest-max-tv").glob("*.pickle"))) == 1
    assert outs[0] == outs[1] == outs[2]
    assert outs[0]["model_check"]["refuted"] is True  # the bundled homes' chains: the check ran and refutes them


def test_a_folder_that_cannot_be_written_is_read_and_the_run_goes_on(folder, monkeypatch):
    square, calls = _counting()
    square(2)  # stored while writable

    def refuse(path, result):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(result_cache, "_store", refuse)  # as a folder shared read-only behaves for its readers
    assert float(square(2)) == 4.0 and len(calls) == 1  # found: read
    assert float(square(5)) == 25.0 and len(calls) == 2  # not found: computed, not stored, no error
    assert len(list((folder / "test-square").glob("*.pickle"))) == 1
