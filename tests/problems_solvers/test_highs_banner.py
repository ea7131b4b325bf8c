"""HiGHS' C-level banner never reaches stdout, also where ``sys.stdout.fileno()`` is not descriptor 1 (ipykernel).

Under ipykernel (the notebooks, ``make notebooks``) descriptor 1 is a pipe forwarded to the notebook while
``sys.stdout.fileno()`` is a copy of the original terminal; silencing the copy let the banner into the stored outputs
of notebooks/cao_fig8_budget_allocation.ipynb depending on thread timing.
"""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import os, sys
sys.stdout = os.fdopen(os.dup(1), "w")  # as under ipykernel: sys.stdout.fileno() is a copy, not descriptor 1
from policyopt.problems.tpl_budget import BudgetAllocationProblem
# source: Cao et al. (2019) Fig. 8 matrices, as in tests/problems_solvers/test_tpl_budget.py and the benchmark's quick topic
sol = BudgetAllocationProblem([[0.8, 0.2], [0.2, 0.8]], [[0.8, 0.2], [0.1, 0.9]], 1.0, 4).solve("optimal")
print("status", sol.status.value, flush=True)
"""


def test_no_highs_banner_on_stdout_when_sys_stdout_is_a_copy():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "status optimal\n"
