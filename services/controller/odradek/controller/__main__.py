"""``python -m odradek.controller``: the same as ``odradek controller``."""

import sys

from .cli import main

sys.exit(main())
