"""`python -m recon.cli ...`, the same as the `recon` command."""

import sys

from recon.cli import main

sys.exit(main())
