"""Wall-clock time of a chapter, shown in the chapter and in the book's timing table."""

from __future__ import annotations

import time


class Stopwatch:
    """Started when created; :meth:`seconds` reads the elapsed wall time."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self._start
