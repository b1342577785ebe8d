"""``python -m odradek.controller``: the same as ``odradek controller``."""

import sys

from odradek.startup import skip_dev_only_imports

skip_dev_only_imports()
from .cli import main  # noqa: E402

sys.exit(main())
