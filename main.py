"""NewsStudio entry point: `python main.py` opens the studio; subcommands run headless (see README.md)."""

import sys

from studio.cli import main

if __name__ == "__main__":
    sys.exit(main())
