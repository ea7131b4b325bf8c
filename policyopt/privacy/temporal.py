"""Temporal privacy leakage (Cao et al. 2019): the public names, gathered from the modules that define them."""

from policyopt.privacy.tpl_loss import *  # noqa: F401,F403
from policyopt.privacy.tpl_loss import __all__  # noqa: F401
from policyopt.privacy.tpl_loss import scalar_piecewise  # noqa: F401
