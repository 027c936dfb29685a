"""The ``lazylab`` console script: quiet on a Ctrl-C from its first instant.

Importing the command line (click, rich, the commands) takes about a second; a Ctrl-C then would
print Python's traceback. This module imports nothing heavy: it sets a SIGINT handler that leaves
at once with status 130 and one line (nothing has been computed yet), then imports the command
line, whose ``main`` installs its own handler (every finished run is kept in the memo).
"""

from __future__ import annotations

import os
import signal


def main() -> None:
    """Run ``lazylab.cli.main`` on ``sys.argv``, interrupts before it starts ending in one line and exit 130."""
    # Not when SIGINT is ignored (a background job in a script): keep ignoring it.
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_before_start)
    from lazylab.cli import main as run

    run()


def _interrupted_before_start(signum, frame) -> None:
    os.write(2, b"interrupted: nothing was computed\n")
    os._exit(130)
