"""``python -m airlock.daemon.signed_commit``."""

import sys

from .commit import main

sys.exit(main())
