import sys

from odradek.gateway.cli import main

sys.exit(main())
