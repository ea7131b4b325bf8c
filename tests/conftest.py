"""Shared fixtures for the policyopt tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from policyopt.models.markov import MarkovChain


@pytest.fixture
def nonreversible3():
    """A 3-state chain that is not reversible (cyclic drift)."""
    return MarkovChain([[0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.6, 0.2, 0.2]], state_values=[0.0, 1.0, 3.0])


def pytest_configure(config):
    """Two session-wide folders, made by the process that starts the session and named in the environment, which the
    xdist workers it starts (and the commands, notebooks and scripts they run) inherit; removed at the end:

    * the run-once store of pure CLI commands (``tests/_cli.memo_run``); ``POLICYOPT_TEST_CLI_MEMO=`` (set and empty)
      runs every command;
    * policyopt's own result cache (``POLICYOPT_CACHE_DIR``, :mod:`policyopt.io.result_cache`): the held-out model checks
      and PLD accountings that many commands repeat on the bundled homes are computed once per session.  Set
      ``POLICYOPT_CACHE_DIR=`` (empty) to compute every one.  Tests running in the pytest process itself never use
      it (:func:`_no_result_cache_in_process`): a test of a check computes it."""
    from _cli import MEMO_ENV

    from policyopt.io.result_cache import CACHE_ENV

    made = []
    for env, prefix in ((MEMO_ENV, "policyopt-cli-memo-"), (CACHE_ENV, "policyopt-result-cache-")):
        if env not in os.environ:
            folder = Path(tempfile.mkdtemp(prefix=prefix))
            os.environ[env] = str(folder)
            made.append((env, folder))
    config._policyopt_folders = made


def pytest_unconfigure(config):
    """Remove the folders (by the process that made them)."""
    for env, folder in getattr(config, "_policyopt_folders", ()):
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(env, None)


@pytest.fixture(autouse=True)
def _no_result_cache_in_process(monkeypatch):
    """In the test process, :mod:`policyopt.io.result_cache` stores and reads nothing (the commands it starts still
    share the session's folder through the environment).  A test of the cache sets its own folder with
    ``monkeypatch.setattr(result_cache, "cache_folder", ...)``."""
    from policyopt.io import result_cache

    monkeypatch.setattr(result_cache, "cache_folder", lambda: None)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under ``--dist loadgroup`` (``make test``), the tests of a file that use a module- or class-scoped fixture are
    one xdist group: the fixture is then built once, by one worker, not once by each worker that gets a test of the
    file.  Tests that name their own ``xdist_group`` keep it.  Runs before pytest-xdist reads the marks."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info is not None else ()
        if any(d and d[-1].scope in ("module", "class") for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


#: Set on a pytest-xdist worker whose ``--dist loadgroup`` groups are lost (:func:`pytest_collection_finish`).
_UNGROUPED: list = []


def pytest_collection_finish(session):
    """On a pytest-xdist worker under ``--dist loadgroup``: check that each test with an ``xdist_group`` mark got the
    group in its id, which is how pytest-xdist tells its scheduler the group.  pytest 9.2 with pytest-xdist 3.8 drops
    it silently (pytest-xdist issue #1386): the groups' tests are then spread over both workers, each worker builds a
    module's fixture and runs a docs page's earlier examples again (``pyproject.toml`` pins ``pytest < 9.2``).  Where
    that happens every test fails at set-up with the reason (:func:`pytest_runtest_setup`); an error raised here would
    only end the worker without a word."""
    config = session.config
    if not hasattr(config, "workerinput") or not config.getoption("loadgroup", False):
        return
    for item in session.items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and not item.nodeid.endswith("@" + "_".join(names)):
            _UNGROUPED.append(f"--dist loadgroup lost the group of {item.nodeid!r} (xdist_group {names}): this pytest / "
                              "pytest-xdist pair ignores xdist_group (pytest-xdist issue #1386); install pytest < 9.2")
            return


def pytest_runtest_setup(item):
    """Fail every test of a worker whose groups are lost (:func:`pytest_collection_finish`)."""
    if _UNGROUPED:
        pytest.fail(_UNGROUPED[0], pytrace=False)


@pytest.fixture
def ram_path(tmp_path):
    """A scratch folder in memory (``/dev/shm``) when the system has one, else `tmp_path`.

    For a test of what thousands of releases *say*, not of their durability: each release's ledger commit, checkpoint
    and ``--out`` line are synced to disk (``fsync``), which on the test machines' disk took more than the publishing
    itself (42 s against 15 s for 1,458 releases; 31 s of 45 s for 3,000); in memory the same calls return at once
    and the run is the same.  Tests whose limits depend on the sync (``test_publish_sparse_stream_is_fast``) keep
    ``tmp_path``."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    d = Path(tempfile.mkdtemp(prefix="policyopt-test-", dir=shm))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
