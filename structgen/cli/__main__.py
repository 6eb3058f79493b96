"""``python -m structgen.cli ...``: the ``structgen`` command during development."""
import sys

from . import main

sys.exit(main())
