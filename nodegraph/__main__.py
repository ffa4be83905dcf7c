"""`python -m nodegraph ...` is the same as the `nodegraph` command (torchrun uses this form)."""

import sys

from nodegraph.cli.main import main

sys.exit(main())
