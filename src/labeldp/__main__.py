"""``python -m labeldp ...`` (and ``torchrun ... -m labeldp train ...``): the ``labeldp`` command."""

import sys

from labeldp.cli import main

if __name__ == "__main__":
    sys.exit(main())
