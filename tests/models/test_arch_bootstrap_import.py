"""``policyopt.models.arch_bootstrap``: ``arch.bootstrap`` without ``arch``'s initialiser, and ``arch`` whole after it.

Each check runs in a fresh interpreter (the test process may have imported ``arch`` already)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_bootstrap_loads_without_statsmodels_and_matplotlib():
    got = _run(
        "import json, sys\n"
        "from policyopt.models.arch_bootstrap import arch_bootstrap\n"
        "b = arch_bootstrap()\n"
        "print(json.dumps({'name': b.__name__, 'cbb': hasattr(b, 'CircularBlockBootstrap'),\n"
        "                  'obl': hasattr(b, 'optimal_block_length'),\n"
        "                  'heavy': sorted(m for m in ('statsmodels', 'matplotlib', 'arch.univariate') if m in sys.modules)}))"
    )
    assert got == {"name": "arch.bootstrap", "cbb": True, "obl": True, "heavy": []}


def test_arch_is_whole_for_code_that_imports_it_afterwards():
    got = _run(
        "import json\n"
        "from policyopt.models.arch_bootstrap import arch_bootstrap\n"
        "b = arch_bootstrap()\n"
        "import arch\n"
        "from arch import arch_model\n"
        "from arch.univariate import GARCH\n"
        "import importlib.metadata as md\n"
        "print(json.dumps({'version': arch.__version__ == md.version('arch'), 'model': arch_model is arch.arch_model,\n"
        "                  'same': arch.bootstrap is b, 'garch': GARCH.__name__,\n"
        "                  'missing': not hasattr(arch, 'no_such_name')}))"
    )
    assert got == {"version": True, "model": True, "same": True, "garch": "GARCH", "missing": True}


def test_arch_imported_first_is_left_alone():
    got = _run(
        "import json, sys\n"
        "import arch\n"
        "first = sys.modules['arch']\n"
        "from policyopt.models.arch_bootstrap import arch_bootstrap\n"
        "b = arch_bootstrap()\n"
        "print(json.dumps({'same': sys.modules['arch'] is first, 'type': type(first).__name__,\n"
        "                  'bootstrap': b is sys.modules['arch.bootstrap']}))"
    )
    assert got == {"same": True, "type": "module", "bootstrap": True}


def test_the_block_bootstrap_draws_what_arch_draws():
    """The same replicates through the placeholder as through ``import arch.bootstrap`` (seeded, simulation only)."""
    code = (
        "import json, numpy as np\n"
        "{imp}\n"
        "x = np.sin(np.arange(200) / 7.0) + np.random.default_rng(3).normal(size=200)\n"
        "bs = CBB(5, x, seed=np.random.default_rng(11))\n"
        "means = [float(d[0][0].mean()) for d in bs.bootstrap(4)]\n"
        "print(json.dumps({{'means': means, 'b': float(obl(x)['circular'].iloc[0])}}))"
    )
    lazy = _run(code.format(imp="from policyopt.models.arch_bootstrap import arch_bootstrap\n"
                                "CBB = arch_bootstrap().CircularBlockBootstrap\n"
                                "obl = arch_bootstrap().optimal_block_length"))
    full = _run(code.format(imp="from arch.bootstrap import CircularBlockBootstrap as CBB, optimal_block_length as obl"))
    assert lazy == full and len(lazy["means"]) == 4


def test_the_mean_interval_of_a_series_without_spread_is_archs_without_importing_it():
    """``mean_interval``: a constant series (the error of a fresh schedule, A = 0 and S̄ = 1) gives its mean at both
    ends — what arch's percentile interval gives bit for bit — and leaves ``arch`` unimported; a series with spread is
    arch's interval."""
    got = _run(
        "import json, sys\n"
        "import numpy as np\n"
        "from policyopt.models.arch_bootstrap import arch_bootstrap, mean_interval\n"
        "x = np.full(4380, 0.1 + 0.2)\n"
        "lone = mean_interval(x, 24, reps=399, level=0.95, seed=0)\n"
        "before = 'arch.bootstrap' in sys.modules\n"
        "bs = arch_bootstrap().CircularBlockBootstrap(24, x, seed=np.random.default_rng(0))\n"
        "ci = bs.conf_int(np.mean, reps=399, method='percentile', size=0.95)\n"
        "y = np.random.default_rng(3).normal(size=500)\n"
        "spread = mean_interval(y, 7, reps=199, level=0.9, seed=5)\n"
        "ci2 = arch_bootstrap().CircularBlockBootstrap(7, y, seed=np.random.default_rng(5)).conf_int(\n"
        "    np.mean, reps=199, method='percentile', size=0.9)\n"
        "print(json.dumps({'lone': lone, 'arch': [ci[0, 0], ci[1, 0]], 'before': before, 'spread': spread,\n"
        "                  'arch2': [ci2[0, 0], ci2[1, 0]]}))"
    )
    assert got["before"] is False
    assert got["lone"] == got["arch"] == [float(np.mean(np.full(4380, 0.1 + 0.2)))] * 2
    assert got["spread"] == got["arch2"] and got["spread"][0] < got["spread"][1]
