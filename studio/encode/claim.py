"""One command per output path: a command that writes ``NAME.mp4`` claims it from its start to its end.

The claim is a lock file beside the output, ``.NAME.mp4.lock``, holding an exclusive ``flock`` and the claimant's
process id. A second command that wants the same path while the first runs is refused at once, in one line, before
any work; a claim whose process died (``kill -9``, a power cut) is no claim: the kernel dropped its lock, so the
stale file is taken over. The file is removed when the claim is released.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from studio.errors import OutputPathError


def lock_path_for(path: Path | str) -> Path:
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


class OutputClaim:
    """A held claim on ``path`` (see the module docstring); ``release()`` ends it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.lock_path = lock_path_for(path)
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            self.lock_path.unlink(missing_ok=True)  # while still locked: nobody else holds this file now
        except OSError:
            pass
        os.close(fd)

    def __enter__(self) -> OutputClaim:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _holder(lock: Path) -> str:
    try:
        pid = lock.read_text().strip()
    except OSError:
        return ""
    return f" (process {pid})" if pid.isdigit() else ""


def claim_output(path: Path | str, flag: str = "--out") -> OutputClaim:
    """Claim ``path`` for this process; raises OutputPathError when another running command holds it."""
    import fcntl

    path = Path(path)
    lock = lock_path_for(path)
    for _ in range(10):  # the holder may remove the file between our open and our lock: try the new one
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            raise OutputPathError(f"Cannot write beside {path} ({exc.strerror}): choose another {flag}.") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise OutputPathError(f"Another command is writing {path} right now{_holder(lock)}: wait for it "
                                      f"to finish or choose another {flag}.") from exc
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return OutputClaim(path, fd)
        os.close(fd)
    raise OutputPathError(f"Cannot claim {path}: other commands keep taking it; choose another {flag}.")
