"""``python -m zkcoord.cli``: the ``zkcoord`` command, as the console script runs it."""

import sys

from zkcoord.cli import main

sys.exit(main())
