"""Logging to a rotating file in the user's data folder (and warnings to stderr)."""

from __future__ import annotations

import logging
import logging.handlers

from studio.paths import data_dir

_CONFIGURED = False


def setup_logging(verbose: bool = False) -> None:
    """Configure the root logger once: DEBUG to ``<data>/logs/studio.log`` (rotating), WARNING+ to stderr."""
    global _CONFIGURED
    if _CONFIGURED:
        return
    _CONFIGURED = True
    log_dir = data_dir() / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    root.setLevel(logging.DEBUG)
    file_handler = logging.handlers.RotatingFileHandler(
        log_dir / "studio.log", maxBytes=2_000_000, backupCount=3, encoding="utf-8"
    )
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
    root.addHandler(file_handler)
    console = logging.StreamHandler()
    console.setLevel(logging.DEBUG if verbose else logging.WARNING)
    console.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    root.addHandler(console)
