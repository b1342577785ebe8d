import sys

from odradek.startup import skip_dev_only_imports

skip_dev_only_imports()
from odradek.broker.cli import main  # noqa: E402

sys.exit(main())
