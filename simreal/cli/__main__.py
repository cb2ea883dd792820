"""``python -m simreal.cli ...``: the ``simreal`` command (the deploy rehearsal's robot process and
the tests run it this way, with the interpreter they were given)."""

import sys

from simreal.cli import main

sys.exit(main())
