"""Shared fixtures for the policyopt tests."""

from __future__ import annotations

import pytest

from policyopt.models.markov import MarkovChain


@pytest.fixture
def nonreversible3():
    """A 3-state chain that is not reversible (cyclic drift)."""
    return MarkovChain([[0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.6, 0.2, 0.2]], state_values=[0.0, 1.0, 3.0])
