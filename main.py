"""NewsStudio entry point: `python main.py` opens the studio; subcommands run headless (see README.md)."""

import sys

from studio import startup

startup.mark()
startup.keep_freed_memory()

from studio.cli import main  # noqa: E402  (after the start is marked)

if __name__ == "__main__":
    sys.exit(main(leave=True))
