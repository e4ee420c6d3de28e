"""Crash-safe JSONL for trajectories: atomic appends, fsync, and resume.

Each record is written with ONE ``os.write`` on an ``O_APPEND`` descriptor and then
fsync'ed, so a record is either wholly in the file or (after a crash mid-write) a partial
last line, which :func:`open_for_resume` cuts off before appending again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Self

from .._errors import ConfigError
from ._types import Trajectory


def read_trajectories(path: str | os.PathLike[str], *, strict: bool = False,
                      latest: bool = True) -> list[Trajectory]:
    """Every complete record in a JSONL file, in file order. A partial or corrupt line is
    skipped (or a ConfigError naming its line number when ``strict``). With ``latest``, an
    episode id written more than once (a retried infra error) keeps only its last record."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"no trajectory file at {str(p)!r}", where=str(p),
                          fix="check the path (written by run_episodes(out=...))")
    out: list[Trajectory] = []
    with p.open("rb") as f:
        for i, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                if strict:
                    raise ConfigError("the last line is incomplete", where=f"{p}:{i}",
                                      fix="resume the run to complete it")
                break
            try:
                out.append(Trajectory.from_json(raw.decode()))
            except (ValueError, TypeError, KeyError) as e:
                if strict:
                    raise ConfigError(f"not a trajectory record ({e})", where=f"{p}:{i}",
                                      fix="remove the line or use another file") from None
    if latest:
        last = {t.episode_id: i for i, t in enumerate(out)}
        out = [t for i, t in enumerate(out) if last[t.episode_id] == i]
    return out


class JsonlWriter:
    """Append-only, fsync'ed writer (one writer per file; not for concurrent processes)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._cut_partial_tail()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _cut_partial_tail(self) -> None:
        if not self.path.is_file():
            return
        data_len = self.path.stat().st_size
        if data_len == 0:
            return
        with self.path.open("rb+") as f:
            f.seek(max(0, data_len - 1))
            if f.read(1) == b"\n":
                return
            # walk back to the last newline and cut the partial record after it
            pos = data_len
            chunk = 4096
            while pos > 0:
                start = max(0, pos - chunk)
                f.seek(start)
                buf = f.read(pos - start)
                k = buf.rfind(b"\n")
                if k != -1:
                    f.truncate(start + k + 1)
                    return
                pos = start
            f.truncate(0)

    def write(self, traj: Trajectory) -> None:
        view = memoryview((traj.to_json() + "\n").encode())
        while view:  # a regular file takes it in one write; loop only on a short write
            n = os.write(self._fd, view)
            view = view[n:]
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

