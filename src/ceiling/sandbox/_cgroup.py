"""Per-sandbox cgroups: the ``pids`` and ``memory`` limits that stop fork and memory bombs.

cgroup v2 (``/sys/fs/cgroup/cgroup.controllers`` present) or v1 (``/sys/fs/cgroup/pids`` and
``/sys/fs/cgroup/memory``). Groups are named ``ceiling/<host pid>-<n>``; groups left by a
process that died without cleaning up are swept the first time this process creates one.
Where the hierarchy is not writable, :meth:`Cgroup.create` returns None (or a group with
only the controllers that worked) and logs why; the caller falls back to rlimits.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from pathlib import Path

from ._types import Limits

log = logging.getLogger("ceiling.sandbox")
ROOT = Path("/sys/fs/cgroup")
_seq = itertools.count()
_swept = False
_warned = False


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep(parents: list[Path]) -> None:
    for parent in parents:
        if not parent.is_dir():
            continue
        for d in parent.iterdir():
            pid = d.name.split("-", 1)[0]
            if d.is_dir() and pid.isdigit() and not _alive(int(pid)):
                try:
                    d.rmdir()
                except OSError:
                    pass


class Cgroup:
    """One sandbox's groups: ``pids``/``memory`` say which limits are enforced by the kernel."""

    def __init__(self, dirs: list[Path], pids: bool, memory: bool) -> None:
        self.dirs, self.pids, self.memory = dirs, pids, memory

    @classmethod
    def create(cls, limits: Limits) -> Cgroup | None:
        global _swept, _warned
        name = f"{os.getpid()}-{next(_seq)}"
        mem = limits.memory_mb << 20
        v2 = (ROOT / "cgroup.controllers").is_file()
        try:
            if v2:
                parent = ROOT / "ceiling"
                if not _swept:
                    _sweep([parent])
                    _swept = True
                parent.mkdir(exist_ok=True)
                for p in (ROOT, parent):
                    _write(p / "cgroup.subtree_control", "+pids +memory")
                d = parent / name
                d.mkdir()
                _write(d / "pids.max", str(limits.max_processes))
                _write(d / "memory.max", str(mem))
                if (d / "memory.swap.max").exists():
                    _write(d / "memory.swap.max", "0")
                return cls([d], True, True)
            dirs: list[Path] = []
            got = {"pids": False, "memory": False}
            parents = [ROOT / c / "ceiling" for c in got]
            if not _swept:
                _sweep(parents)
                _swept = True
            for ctl, parent in zip(got, parents, strict=True):
                if not (ROOT / ctl).is_dir():
                    continue
                try:
                    parent.mkdir(exist_ok=True)
                    d = parent / name
                    d.mkdir()
                except OSError:
                    continue
                dirs.append(d)
                if ctl == "pids":
                    _write(d / "pids.max", str(limits.max_processes))
                else:
                    _write(d / "memory.limit_in_bytes", str(mem))
                    if (d / "memory.memsw.limit_in_bytes").exists():
                        try:
                            _write(d / "memory.memsw.limit_in_bytes", str(mem))
                        except OSError:
                            pass
                got[ctl] = True
            if not dirs:
                raise OSError("no writable pids or memory cgroup hierarchy")
            return cls(dirs, got["pids"], got["memory"])
        except OSError as e:
            if not _warned:
                log.warning("sandbox cgroups unavailable (%s): falling back to RLIMIT_NPROC "
                            "(shared by all sandboxes) and RLIMIT_AS", e)
                _warned = True
            return None

    def add(self, pid: int) -> None:
        for d in self.dirs:
            _write(d / "cgroup.procs", str(pid))

    def remove(self, wait_s: float = 5.0) -> None:
        """Remove the groups once their processes are gone (the kernel reaps them async)."""
        deadline = time.monotonic() + wait_s
        for d in self.dirs:
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        log.warning("cgroup %s still busy; left behind", d)
                        break
                    time.sleep(0.001)
