"""``python -m labeldp.cli``: the ``labeldp`` command."""

import sys

try:
    from labeldp.cli import main
except KeyboardInterrupt:  # Ctrl-C while the command starts: one line, as at any other point
    print("\nlabeldp: interrupted.", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
