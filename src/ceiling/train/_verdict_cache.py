"""Reusing verdicts for identical episodes (training and demo evaluation on CPU).

Grading runs the hidden tests in a fresh pytest process — by far the dearest part of a
short episode. In a GRPO group many samples do exactly the same thing, so a verdict is
reused when everything it depends on is the same:

    (card content id, reward spec, how the episode ended, the actions taken,
     the final workspace: every path, kind, mode, symlink target and byte)

Only cards graded from files (``acceptance.runner == "files"``) are cached: their hidden
tests read the final files and nothing else. ``sandbox``-runner cards, infra errors and
verifier crashes are always graded afresh. A reused verdict is a copy marked
``detail["cached"] = True``; the first one was computed by the real verifier.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..cards import TaskCard
from ..verify import Outcome, RewardSpec, Verdict, Verifier


def tree_digest(root: Path) -> str:
    """SHA-256 over a folder: relative paths, kinds, modes, link targets and file bytes."""
    h = hashlib.sha256()
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(
                os.path.join(dirpath, d))]):
            p = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            st = os.lstat(p)
            if os.path.islink(p):
                h.update(f"L|{rel}|{os.readlink(p)}\n".encode())
                continue
            h.update(f"F|{rel}|{st.st_mode:o}|{st.st_size}\n".encode())
            if not stat.S_ISREG(st.st_mode):  # FIFO, socket, device: never opened (no hang)
                continue
            try:  # no-follow and non-blocking: a file swapped for a link or a FIFO since lstat
                fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                with os.fdopen(fd, "rb") as fh:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        raise OSError(21, "not a regular file")
                    h.update(hashlib.sha256(fh.read()).digest())
            except OSError as e:  # unreadable: its mode and size stand in for the bytes
                h.update(f"unreadable:{e.errno}".encode())
        for d in dirnames:
            st = os.lstat(os.path.join(dirpath, d))
            h.update(f"D|{os.path.normpath(os.path.join(rel_dir, d))}|{st.st_mode:o}\n".encode())
    return h.hexdigest()


class VerdictCache:
    """A thread-safe map from episode key to verdict, with hit/miss counts."""

    def __init__(self) -> None:
        self._d: dict[str, Verdict] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Verdict | None:
        with self._lock:
            v = self._d.get(key)
            if v is None:
                self.misses += 1
                return None
            self.hits += 1
        out = v.model_copy(deep=True)
        out.detail["cached"] = True
        return out

    def put(self, key: str, v: Verdict) -> None:
        with self._lock:
            self._d[key] = v.model_copy(deep=True)

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "entries": len(self._d)}


class CachedVerifier(Verifier):
    """A :class:`Verifier` that reuses verdicts through a shared :class:`VerdictCache`."""

    def __init__(self, spec: RewardSpec | None, cache: VerdictCache) -> None:
        super().__init__(spec)
        self.cache = cache

    def key(self, card: TaskCard, sandbox: Any, ended: str,
            history: Sequence[tuple[Any, str]]) -> str | None:
        if card.acceptance.runner != "files":
            return None
        try:
            ws = tree_digest(Path(sandbox.host_path()))
        except OSError:
            return None
        acts = [a.to_json() if hasattr(a, "to_json") else repr(a) for a, _ in history]
        blob = json.dumps([card.content_id(), self.spec.model_dump(mode="json"), ended, acts, ws],
                          sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def verify(self, card: TaskCard, sandbox: Any, *, ended: Any = "submit",
               history: Sequence[tuple[Any, str]] = ()) -> Verdict:
        k = self.key(card, sandbox, ended, history)
        if k is not None:
            hit = self.cache.get(k)
            if hit is not None:
                return hit
        v = super().verify(card, sandbox, ended=ended, history=history)
        if k is not None and v.outcome != Outcome.INFRA_ERROR:
            self.cache.put(k, v)
        return v


def cached_env_factory(cache: VerdictCache) -> Any:
    """An ``env_factory`` for ``run_episodes`` whose environments share ``cache``."""
    from ..env import TaskEnv

    def factory(card: TaskCard, *, backend: str = "namespace",
                reward_spec: RewardSpec | None = None, limits: Any = None) -> Any:
        return TaskEnv(card, backend=backend, reward_spec=reward_spec, limits=limits,
                       verifier=CachedVerifier(reward_spec, cache))

    return factory
