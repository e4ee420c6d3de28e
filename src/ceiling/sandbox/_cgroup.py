"""Per-sandbox cgroups: the ``pids`` and ``memory`` limits that stop fork and memory bombs,
and the freezer that stops every process of a sandbox while its state is copied.

cgroup v2 (``/sys/fs/cgroup/cgroup.controllers`` present) or v1 (``/sys/fs/cgroup/pids`` and
``/sys/fs/cgroup/memory``, plus ``/sys/fs/cgroup/freezer`` when present; v2 freezes with
``cgroup.freeze``). Groups are named ``ceiling/<host pid>-<n>``; groups left by a
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
            got = {"pids": False, "memory": False, "freezer": False}  # freezer: freeze()
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
                elif ctl == "memory":
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

    # -- freeze()/thaw(): owned by the freeze path (checkpoint, fork, the verifier's freeze) --
    def _freezer(self) -> tuple[Path, bool] | None:
        """The group that can freeze this sandbox and whether it is cgroup v2, or None."""
        for d in self.dirs:
            if (d / "cgroup.freeze").is_file():
                return d, True
            if (d / "freezer.state").is_file():
                return d, False
        return None

    @property
    def can_freeze(self) -> bool:
        return self._freezer() is not None

    def freeze(self, timeout_s: float = 2.0) -> bool:
        """Stop every process of the sandbox (the kernel's cgroup freezer: invisible to them,
        unlike SIGSTOP) and wait until all are frozen. True when they are; False when no
        freezer exists here or the kernel did not finish in ``timeout_s`` (the group is then
        thawed again, so the caller never leaves a half-frozen sandbox behind)."""
        fz = self._freezer()
        if fz is None:
            return False
        d, v2 = fz
        try:
            return self._freeze(d, v2, timeout_s)
        except OSError as e:  # the group vanished (ENOENT/ENODEV): its PID 1 removed it
            log.warning("cgroup %s cannot be frozen: %s", d, e)
            return False

    def _freeze(self, d: Path, v2: bool, timeout_s: float) -> bool:
        _write(d / "cgroup.freeze" if v2 else d / "freezer.state", "1" if v2 else "FROZEN")
        deadline = time.monotonic() + timeout_s
        pause = 0.0001
        while True:
            if v2:
                with open(d / "cgroup.events") as f:
                    done = "frozen 1" in f.read()
            else:
                with open(d / "freezer.state") as f:
                    done = f.read().strip() == "FROZEN"
            if done:
                return True
            if time.monotonic() > deadline:
                log.warning("cgroup %s did not freeze in %.1f s; thawed", d, timeout_s)
                self.thaw()
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.01)

    def thaw(self) -> None:
        """Let the processes stopped by :meth:`freeze` run again (no-op without a freezer)."""
        fz = self._freezer()
        if fz is not None:
            d, v2 = fz
            _write(d / "cgroup.freeze" if v2 else d / "freezer.state", "0" if v2 else "THAWED")

    def add(self, pid: int) -> None:
        for d in self.dirs:
            _write(d / "cgroup.procs", str(pid))

    # -- kill-all (owner: the holder's lifecycle; PID 1 is never in these groups) -----------
    @property
    def memory_dir(self) -> Path | None:
        """The group that holds the memory limit (the spawner enters it only to spawn)."""
        if not self.memory:
            return None
        for d in self.dirs:
            if (d / "memory.max").exists() or (d / "memory.limit_in_bytes").exists():
                return d
        return None

    def procs(self) -> set[int]:
        """Host pids of every process in the sandbox's groups (the spawner and commands)."""
        out: set[int] = set()
        for d in self.dirs:
            try:
                out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return out

    def kill_all(self, wait_s: float = 5.0) -> bool:
        """SIGKILL every process in the groups until none is left (``cgroup.kill`` on v2, a
        kill loop over ``cgroup.procs`` on v1, which also catches processes forked while it
        runs); thaws first, since frozen v1 tasks do not die. True when the groups are
        empty within ``wait_s``."""
        try:
            self.thaw()
        except OSError:
            pass
        for d in self.dirs:
            if (d / "cgroup.kill").exists():
                try:
                    _write(d / "cgroup.kill", "1")
                except OSError:
                    pass
        deadline = time.monotonic() + wait_s
        while True:
            left = self.procs()
            if not left:
                return True
            for pid in left:
                try:
                    os.kill(pid, 9)
                except (ProcessLookupError, PermissionError):
                    pass
            if time.monotonic() > deadline:
                log.warning("cgroup %s: processes %s survived SIGKILL", self.dirs, sorted(left))
                return False
            time.sleep(0.002)

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
