"""A rich progress bar on stderr: episodes done, episodes/s and the running pass rate."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from ._types import Trajectory


class RunProgress:
    """``advance(traj)`` per finished episode; disabled -> does nothing."""

    def __init__(self, total: int, done: Iterable[Trajectory] = (), *, enabled: bool = True,
                 label: str = "episodes") -> None:
        prior = list(done)
        self.passed = sum(t.passed for t in prior)
        self.count = len(prior)
        self.new = 0
        self.t0 = time.monotonic()
        self._progress: Any = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]} ep/s"), TextColumn("pass {task.fields[pass]}"),
            TimeElapsedColumn(), console=Console(stderr=True), transient=False,
        )
        self._progress.start()
        self._task = self._progress.add_task(label, total=total, completed=self.count,
                                             rate="-", **{"pass": self._pass_text()})

    def _pass_text(self) -> str:
        return f"{self.passed / self.count:.2f}" if self.count else "-"

    def advance(self, traj: Trajectory) -> None:
        self.count += 1
        self.new += 1
        self.passed += int(traj.passed)
        if self._progress is None:
            return
        dt = max(time.monotonic() - self.t0, 1e-9)
        self._progress.update(self._task, advance=1, rate=f"{self.new / dt:.2f}",
                              **{"pass": self._pass_text()})

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
