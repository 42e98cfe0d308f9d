"""``python -m airlock.daemon.signed_commit``."""

import sys

from airlock.daemon.signed_commit.commit import main

sys.exit(main())
