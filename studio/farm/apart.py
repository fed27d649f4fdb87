"""``run_farm`` in a process of its own, for a caller that must not hold Ray (the studio).

Ray's driver is process-wide state: ``ray.init`` starts the cluster's servers as children of the calling process,
installs handlers and threads, and a failure of it can end that process. The studio's window must outlive all of
that, so its FARM tab runs the driver here, in a freshly spawned process (no Qt, no CUDA, no threads inherited), and
reads the same ``FarmProgress`` / ``FarmResult`` back through a bounded queue. Cancel is an event the driver polls
between tasks, exactly as in-process; if the process ends without a result, the caller gets one clear line.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import queue as queue_mod
from collections.abc import Callable, Generator
from pathlib import Path

from studio.errors import StudioError
from studio.farm.driver import FarmProgress, FarmResult
from studio.farm.settings import FarmSettings

log = logging.getLogger(__name__)

POLL_S = 0.2  # how often the caller looks at its abort flag while waiting for the driver
JOIN_S = 60.0  # how long a cancelled driver gets to stop its segments and shut its cluster down


def _drive(settings: FarmSettings, rundowns: list[Path], anchor_pack, out: mp.Queue, stop) -> None:
    """The child: run the farm, send ("progress", p)..., then ("done", result) or ("failed", message)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from studio.farm.driver import run_farm

    try:
        job = run_farm(settings, rundowns, abort=stop.is_set, anchor_pack=anchor_pack)
        while True:
            try:
                out.put(("progress", next(job)))
            except StopIteration as finished:
                out.put(("done", finished.value))
                return
    except StudioError as exc:
        out.put(("failed", str(exc)))
    except Exception as exc:  # one line for the caller; the traceback goes to this process's log
        log.exception("farm driver failed")
        out.put(("failed", f"The farm stopped: {type(exc).__name__}: {exc}"))


def run_farm_apart(settings: FarmSettings, rundowns: list[Path], abort: Callable[[], bool] = lambda: False,
                   anchor_pack=None) -> Generator[FarmProgress, None, FarmResult]:
    """As ``studio.farm.driver.run_farm``, with the driver in a spawned process; raises ``StudioError`` with the
    driver's message when it failed."""
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue(maxsize=64)
    stop = ctx.Event()
    child = ctx.Process(target=_drive, args=(settings, list(rundowns), anchor_pack, out, stop),
                        name="newsstudio-farm", daemon=True)
    child.start()
    try:
        while True:
            if abort():
                stop.set()
            try:
                kind, value = out.get(timeout=POLL_S)
            except queue_mod.Empty:
                if child.is_alive():
                    continue
                try:  # it may have sent its last word just before it ended
                    kind, value = out.get(timeout=1.0)
                except queue_mod.Empty:
                    raise StudioError(f"The farm's driver process ended without a result (exit code "
                                      f"{child.exitcode}): see the log; run again to resume from the finished "
                                      "segments.") from None
            if kind == "progress":
                yield value
            elif kind == "done":
                return value
            else:
                raise StudioError(value)
    finally:
        stop.set()
        child.join(JOIN_S)
        if child.is_alive():
            child.terminate()
            child.join(5)
        out.close()
