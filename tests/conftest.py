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
    """The session's run-once store of pure CLI commands (``tests/_cli.memo_run``): one folder made by the process
    that starts the session and named in the environment, which the xdist workers it starts inherit; removed at the
    end.  ``POLICYOPT_TEST_CLI_MEMO=`` (set and empty) runs every command."""
    from _cli import MEMO_ENV

    if MEMO_ENV in os.environ:
        return
    folder = Path(tempfile.mkdtemp(prefix="policyopt-cli-memo-"))
    os.environ[MEMO_ENV] = str(folder)
    config._policyopt_memo = folder


def pytest_unconfigure(config):
    """Remove the store (by the process that made it)."""
    folder = getattr(config, "_policyopt_memo", None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("POLICYOPT_TEST_CLI_MEMO", None)
