"""``python -m hotjoin.cli``: the ``hotjoin`` command (``hotjoin.cli.main``)."""

import sys

from hotjoin.cli.main import main

sys.exit(main())
