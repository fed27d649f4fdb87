"""The bounded queue between the core's stages (``studio.pipeline.core``)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable


class StageQueue:
    """A bounded blocking FIFO between two of the core's stages; records its deepest level. It blocks instead of
    dropping: a chunk carries program audio that no output may lose (``studio.pipeline.core``'s docstring)."""

    def __init__(self, maxsize: int) -> None:
        self._q: deque = deque()
        self._cv = threading.Condition()
        self.maxsize = maxsize
        self.max_depth = 0

    def put(self, item, stop: threading.Event | None = None) -> None:
        with self._cv:
            while len(self._q) >= self.maxsize:
                self._cv.wait(0.05)
            self._q.append(item)
            self.max_depth = max(self.max_depth, len(self._q))
            self._cv.notify_all()

    def get(self):
        with self._cv:
            while not self._q:
                self._cv.wait()
            item = self._q.popleft()
            self._cv.notify_all()
            return item

    def wait_empty(self, abort: Callable[[], bool]) -> None:
        """Block until the consumer has taken everything (or ``abort()`` is true)."""
        with self._cv:
            while self._q and not abort():
                self._cv.wait(0.05)

    @property
    def depth(self) -> int:
        with self._cv:
            return len(self._q)
