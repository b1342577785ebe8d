import sys

from odradek.broker.cli import main

sys.exit(main())
