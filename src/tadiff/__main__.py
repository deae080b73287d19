"""``python -m tadiff``: the ``tadiff`` command line (``demo``, ``derive``, ``--version``)."""

import sys

from tadiff.cli import main

if __name__ == "__main__":
    sys.exit(main())
