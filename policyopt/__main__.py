"""``python -m policyopt`` runs the command-line interface."""

import sys

from .cli.main import main

sys.exit(main())
