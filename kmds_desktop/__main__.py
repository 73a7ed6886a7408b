"""``python -m kmds_desktop`` is the same as the ``kmds-desktop`` command."""

import sys

from kmds_desktop.cli import main

sys.exit(main())
