"""The farm's terminal progress: one updating line on a terminal (a line per change otherwise)."""

from __future__ import annotations

import sys

from studio.farm.driver import FarmProgress


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    s = int(round(seconds))
    return f"{s // 60:02d}:{s % 60:02d}"


def progress_line(p: FarmProgress, width: int = 24) -> str:
    fill = int(width * p.done / p.total) if p.total else width
    bar = "#" * fill + "-" * (width - fill)
    nodes = " ".join(f"{node}:{n}" for node, n in sorted(p.per_node.items()))
    failed = f" {p.failed} not made" if p.failed else ""
    return (f"[{bar}] {p.done}/{p.total} segments{failed}, {p.running} in flight, elapsed {_clock(p.elapsed_s)}, "
            f"ETA {_clock(p.eta_s)}" + (f" | {nodes}" if nodes else ""))


class ConsoleProgress:
    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last_key: tuple = ()
        self.last_message = ""

    def show(self, p: FarmProgress) -> None:
        line = progress_line(p)
        if p.message and p.message != self.last_message:
            self.last_message = p.message
            self.stream.write(("\r\033[K" if self.tty else "") + p.message + "\n")
        key = (p.done, p.failed, p.total)  # off a terminal: a line when a segment is in, not every second
        if self.tty:
            self.stream.write("\r\033[K" + line)
        elif key != self.last_key:
            self.stream.write(line + "\n")
        self.last_key = key
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
