"""The LEADERBOARD panel: the talking-head engines ranked by measured time per output frame on this machine.

It shows the last ``python main.py bench --leaderboard`` of this machine (kept in the data folder, so it is there at
the next start) and runs a new one as a background process (the bench never runs inside the studio's process: it
loads every engine and would take the GPU and the CPU from the program). While it runs, the table is re-read as the
bench rewrites its file (every row from the start: waiting, the run it is at, measured, or why not), the bar counts
engines and the line under it says which run of which engine and the time left. Cancel asks the bench to stop (it
writes what it measured), and the rows measured so far stay. Timing twins (engines whose weights are not installed)
are labelled; engines too heavy for this device, or whose estimate did not fit the run's time budget, say why.
"""

from __future__ import annotations

import json
import math
import re
import sys

from PySide6.QtCore import QProcess, Qt, QTimer
from PySide6.QtWidgets import (QHBoxLayout, QHeaderView, QLabel, QProgressBar, QPushButton, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from studio.paths import REPO_ROOT
from studio.pipeline.telemetry import leaderboard_path

COLUMNS = ("#", "engine", "native", "backend", "precision", "plain ms", "optimized ms", "saved", "GPU MB", "measured")
_PROGRESS = re.compile(r"leaderboard \[(\d+)/(\d+)\] (.*?): (.*)")
_LEFT = re.compile(r"about (\d+) s left in this engine; (\d+) s elapsed(?: of a (\d+)-s budget)?")


def _fmt(v, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return f"{v:.{digits}f}"


class LeaderboardPanel(QWidget):
    """See the module docstring. ``device``: what a new run measures on ("cpu" or "cuda")."""

    def __init__(self, device: str = "cpu", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.device = device
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectRows)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.Stretch)
        # the "plain ms" column also starts the span that says why an engine was not measured: sized for its figures,
        # not for that sentence (elided there; the whole sentence in the tooltip)
        fm = self.table.fontMetrics()
        self.table.horizontalHeader().setSectionResizeMode(5, QHeaderView.Fixed)
        self.table.setColumnWidth(5, max(fm.horizontalAdvance("00000.00"), fm.horizontalAdvance(COLUMNS[5])) + 24)
        self.run_button = QPushButton("Run benchmark")
        self.run_button.setToolTip("Measure every engine that fits on this machine (minutes; the program keeps "
                                   "running, slower, meanwhile)")
        self.run_button.clicked.connect(self.toggle_run)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.status = QLabel("")
        self.status.setProperty("role", "muted")
        self.status.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.run_button)
        row.addWidget(self.progress, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        lay.addWidget(self.table, 1)
        lay.addLayout(row)
        lay.addWidget(self.status)
        self.proc: QProcess | None = None
        self._err = ""
        self._cancelled = False
        self.load()

    def load(self) -> bool:
        """Show the last leaderboard of this machine; False when there is none yet."""
        try:
            data = json.loads(leaderboard_path().read_text())
        except (OSError, ValueError):
            self.table.setRowCount(0)
            self.status.setText("No leaderboard on this machine yet: press Run benchmark.")
            return False
        self.show_result(data)
        return True

    def show_result(self, data: dict) -> None:
        rows = data.get("rows", [])
        self.table.clearSpans()
        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            measured = r.get("status") == "measured"
            state = r.get("status", "") + (f" ({r['progress']})" if r.get("progress") else "")
            cells = (str(r.get("rank", "")), r.get("label", r.get("engine", "?")), _native(r),
                     r.get("backend", "") if measured else state,
                     r.get("precision", "") if measured else "",
                     _fmt(r.get("ms_per_frame_plain")) if measured else r.get("reason", ""),
                     _fmt(r.get("ms_per_frame_best", r.get("ms_per_frame_optimized"))) if measured else "",
                     f"{100 * saved:.0f}%" if measured and (saved := r.get("compute_saved_best",
                                                                          r.get("compute_saved"))) is not None else "",
                     _fmt(r.get("gpu_mem_peak_mb"), 0) if measured else "", r.get("measured", ""))
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if j in (0, 2, 5, 6, 7, 8):
                    item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                if not measured:
                    item.setForeground(Qt.gray)
                if measured and j == 7:
                    item.setToolTip(_savings_text(r))
                elif measured and j == 6 and r.get("best_optimizations") is not None:
                    item.setToolTip(f"With the optimizations that helped this engine here: "
                                    f"{', '.join(r['best_optimizations']) or 'none'} (every one on: "
                                    f"{_fmt(r.get('ms_per_frame_optimized'))} ms).")
                elif r.get("twin"):
                    item.setToolTip("A timing twin: the engine's modules and shapes with random weights (its weights "
                                    "are not installed). Its time is real; it never goes on air.")
                if not measured and j == 5:  # why it was not measured, across the figures' columns
                    item.setTextAlignment(Qt.AlignLeft | Qt.AlignVCenter)
                    item.setToolTip(r.get("reason", ""))
                self.table.setItem(i, j, item)
            if not measured:
                self.table.setSpan(i, 5, 1, len(COLUMNS) - 5)
        m = data.get("machine", {})
        if data.get("complete", True) and data.get("finished"):
            when = f"finished {data['finished']}" + (f" in {_mmss(int(data['wall_s']))}" if data.get("wall_s") else "")
        elif self.proc is not None:
            when = f"measuring since {data.get('started', '?')}"
        else:
            when = f"cut short (started {data.get('started', '?')}; the engines marked measured were)"
        self.status.setText(f"{data.get('output', '')} on {m.get('gpu', 'the CPU')}, {when}: wall ms per output "
                            "frame, plain vs the optimizations that helped each engine here (hover for the list and the time "
                            "with every one on).")

    def toggle_run(self) -> None:
        if self.proc is not None:
            self._cancelled = True
            self.proc.terminate()  # the bench writes its rows and stops; killed if it has not in 10 s
            proc = self.proc
            QTimer.singleShot(10000, lambda: proc.kill() if self.proc is proc else None)
            self.status.setText("Cancelling: the engines measured so far stay…")
            return
        self._cancelled = False
        self.proc = QProcess(self)
        self.proc.setWorkingDirectory(str(REPO_ROOT))
        self.proc.setProcessChannelMode(QProcess.SeparateChannels)
        self.proc.readyReadStandardError.connect(self._read)
        self.proc.finished.connect(self._finished)
        self._err = ""
        self.progress.setRange(0, 0)
        self.progress.setVisible(True)
        self.run_button.setText("Cancel benchmark")
        self.status.setText("Benchmarking the engines…")
        self.proc.start(sys.executable, [str(REPO_ROOT / "main.py"), "bench", "--leaderboard", "--device",
                                         self.device])

    def _read(self) -> None:
        self.take_output(bytes(self.proc.readAllStandardError()).decode(errors="replace"))

    def take_output(self, text: str) -> None:
        """What the bench wrote to stderr: its progress lines move the bar, the line and the table."""
        self._err = (self._err + text)[-4000:]
        for line in text.splitlines():
            m = _PROGRESS.search(line)
            if m:
                i, n = int(m.group(1)), int(m.group(2))
                self.progress.setRange(0, n)
                self.progress.setValue(i - 1)
                self.load()  # the bench rewrote its file: the rows finished so far, and where it is
                self.status.setText(f"Engine {i} of {n}: {m.group(3)}: {_left_text(m.group(4))}")

    def _finished(self, code: int, status) -> None:
        proc, self.proc = self.proc, None
        self.progress.setVisible(False)
        self.run_button.setText("Run benchmark")
        if status == QProcess.NormalExit and code == 0:
            self.load()
        elif self._cancelled:
            self.load()
            self.status.setText("Benchmark cancelled: the engines measured so far are listed, the others say "
                                "they were cut short.")
        elif proc is not None and status == QProcess.NormalExit:
            last = [x for x in self._err.strip().splitlines() if x.startswith("error:")]
            self.status.setText(last[-1] if last else f"The benchmark stopped (exit {code}); the last results stay.")

    def shutdown(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.waitForFinished(3000)
            self.proc = None


def _savings_text(row: dict) -> str:
    """The "saved" cell's tooltip: each flag's share of the plain time (its all-but-one run), and the audio cache."""
    lines = []
    if row.get("best_optimizations") is not None:
        lines.append(f"Saved with the optimizations that helped: {', '.join(row['best_optimizations']) or 'none'}.")
    shares = {k: v for k, v in (row.get("saved_share") or {}).items() if v is not None and math.isfinite(v)}
    if shares:
        lines.append("Each flag's share of the plain time (the run with all but that flag):")
        lines += [f"  {name.replace('_', ' ')}: {100 * v:+.1f} %" for name, v in
                  sorted(shares.items(), key=lambda kv: -kv[1])]
    else:
        lines.append("Each flag's share: not measured for this row (its all-but-one runs come with "
                     "`bench --leaderboard --shares`).")
    cache = row.get("audio_cache") or {}
    if cache.get("hits") is not None:
        lines.append(f"Audio cache: {cache['hits']} hits, {cache.get('misses', 0)} misses on this program; an encoder "
                     f"call {_fmt(cache.get('encoder_ms_per_call'), 1)} ms.")
    return "\n".join(lines)


def _left_text(rest: str) -> str:
    """The bench's progress line in words for the status line: the run it is at and the time left."""
    m = _LEFT.search(rest)
    if not m:
        return rest
    run = rest[:m.start()].rstrip(", ")
    left, elapsed, budget = int(m.group(1)), int(m.group(2)), m.group(3)
    total = f"; {_mmss(elapsed)} so far" + (f", {_mmss(max(0, int(budget) - elapsed))} of the run's "
                                             f"{_mmss(int(budget))} budget left" if budget else "")
    return f"{run}, about {_mmss(left)} left for this engine{total}"


def _mmss(seconds: int) -> str:
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def _native(row: dict) -> str:
    """The engine's native size; the built-in warp engine has none (it renders at the output size)."""
    px = row.get("native_px")
    return f"{px} px" if px else "any"
