"""Logging to a rotating file in the user's data folder (and warnings to stderr), which can never fail loudly.

Levels: the studio's own loggers (``studio.*``) log at INFO; ``--verbose`` or ``NEWSSTUDIO_LOG_LEVEL=DEBUG`` (also
INFO, WARNING, ERROR) changes that (``--verbose`` also shows them on stderr). Every other library's loggers
(websockets, asyncio, PIL, matplotlib, numba, ray, ...) reach the file and the console at WARNING and above only, so
that a chatty library cannot rotate the studio's own history out of the log.

A log file that cannot be written (a full disk, a read-only or vanished data folder) must not disturb a run: the
standard library's handlers print a "--- Logging error ---" traceback for every record they fail to write. Here the
file handler says so once, in one line on stderr, and then drops file records (counted in ``dropped_records``) for
the rest of the run; the run itself goes on. A console that cannot be written (a closed pipe) is silent.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import threading
from pathlib import Path

from studio.paths import data_dir

_CONFIGURED = False
PROJECT_LOGGER = "studio"
LEVEL_ENV = "NEWSSTUDIO_LOG_LEVEL"
DEFAULT_LEVEL = logging.INFO
THIRD_PARTY_LEVEL = logging.WARNING
_LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING, "ERROR": logging.ERROR}
_FILE_FORMAT = "%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"
LOG_MAX_BYTES = 2_000_000
LOG_BACKUPS = 3


def _one_line(exc: BaseException | None) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}" if exc is not None else "unknown error"


class SafeFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log file that, on its first write failure, warns once on stderr and then drops records.

    ``failed`` is True after that failure; ``dropped_records`` counts the records not written. The file is opened
    lazily (``delay=True``), so a folder that cannot be created or written costs one warning, not a crash.
    """

    def __init__(self, path: Path, max_bytes: int = LOG_MAX_BYTES, backups: int = LOG_BACKUPS) -> None:
        super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8", delay=True)
        self.failed = False
        self.dropped_records = 0
        self._warn_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if self.failed:
            self.dropped_records += 1
            return
        super().emit(record)  # calls handleError on any failure

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        exc = sys.exc_info()[1]
        with self._warn_lock:
            self.dropped_records += 1
            if self.failed:
                return
            self.failed = True
        try:
            if self.stream is not None:
                self.stream.close()
        except (OSError, ValueError):
            pass  # the stream is already broken; closing it is best effort
        self.stream = None  # type: ignore[assignment]
        try:
            sys.stderr.write(
                f"warning: cannot write the log file {self.baseFilename} ({_one_line(exc)}); file logging is off for "
                "this run: free some space or set NEWSSTUDIO_HOME to a writable folder.\n"
            )
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass  # no console either: nothing left to tell


class QuietStreamHandler(logging.StreamHandler):
    """The console handler: a console that cannot be written (closed pipe, full disk) drops records silently."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        return


class ThirdPartyFilter(logging.Filter):
    """Passes the studio's records at any level and other libraries' records from ``THIRD_PARTY_LEVEL`` up (a library
    that sets its own logger's level, as ray does, is held back here too)."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        return (record.levelno >= THIRD_PARTY_LEVEL or name == PROJECT_LOGGER
                or name.startswith(PROJECT_LOGGER + "."))


def project_level(verbose: bool = False) -> tuple[int, str | None]:
    """The level of the studio's loggers, and a warning when ``NEWSSTUDIO_LOG_LEVEL`` cannot be read."""
    if verbose:
        return logging.DEBUG, None
    asked = os.environ.get(LEVEL_ENV, "").strip().upper()
    if not asked:
        return DEFAULT_LEVEL, None
    if asked in _LEVELS:
        return _LEVELS[asked], None
    return DEFAULT_LEVEL, (f"warning: {LEVEL_ENV}={asked!r} is not a level: use one of {', '.join(_LEVELS)}; "
                           "logging at INFO.\n")


def file_handler(path: Path) -> SafeFileHandler:
    """The log file handler for ``path`` with the studio's format."""
    handler = SafeFileHandler(path)
    handler.setFormatter(logging.Formatter(_FILE_FORMAT))
    return handler


def setup_logging(verbose: bool = False) -> SafeFileHandler | None:
    """Configure logging once (see the module docstring): the studio's records at INFO (DEBUG with ``verbose``) to
    ``<data>/logs/studio.log`` (rotating), WARNING+ to stderr (everything with ``verbose``).

    Returns the file handler (None where the log folder cannot be made: one warning on stderr, the run goes on).
    """
    global _CONFIGURED
    if _CONFIGURED:
        return None
    _CONFIGURED = True
    level, problem = project_level(verbose)
    if problem is not None:
        sys.stderr.write(problem)
    root = logging.getLogger()
    root.setLevel(THIRD_PARTY_LEVEL)
    logging.getLogger(PROJECT_LOGGER).setLevel(level)
    only_ours = ThirdPartyFilter()
    console = QuietStreamHandler()
    console.setLevel(logging.DEBUG if verbose else logging.WARNING)
    console.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    console.addFilter(only_ours)
    handler: SafeFileHandler | None = None
    try:
        log_dir = data_dir() / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        handler = file_handler(log_dir / "studio.log")
        handler.addFilter(only_ours)
        root.addHandler(handler)
    except OSError as exc:
        sys.stderr.write(f"warning: cannot create the log folder ({_one_line(exc)}); file logging is off for this "
                         "run: set NEWSSTUDIO_HOME to a writable folder.\n")
    root.addHandler(console)
    return handler
