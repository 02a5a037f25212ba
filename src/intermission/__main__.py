"""``python -m intermission``."""

import sys

from .cli import main

sys.exit(main())
