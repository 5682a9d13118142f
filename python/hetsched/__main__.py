"""``python -m hetsched`` is the ``hetsched`` command."""

import sys

from .cli import main

sys.exit(main())
