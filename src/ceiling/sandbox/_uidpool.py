"""One uid per live sandbox: a machine-wide pool of sandbox uids (gid = uid).

Every live namespace sandbox runs its commands as its own uid from
:data:`POOL_FIRST` .. :data:`POOL_FIRST` + :data:`POOL_SIZE` - 1 (61001..62000), so per-uid
kernel state is not shared between sandboxes: inotify instances and watches, POSIX message
queue bytes (``RLIMIT_MSGQUEUE``), the ``RLIMIT_NPROC`` fallback, pending signals, user
keyrings. A uid is *held* by an exclusive ``flock`` on ``<dir>/<uid>.lock`` (``dir`` =
``/run/ceiling-uids``, or ``/tmp/ceiling-uids`` where ``/run`` is not writable): the lock
belongs to the open file, which the host keeps and the holder processes inherit, so the uid
stays taken while the host *or* any holder process lives, and is free again the moment all
of them are gone (a crashed host included) - no stale state to sweep. Allocation starts at a
random place in the pool, so a uid just freed is rarely handed out again at once.

The layer store keeps files owned by the canonical :data:`~._layers.SANDBOX_UID` (61000);
the holder shows them as the pool uid through an id-mapped mount. Anything copied back from
a sandbox into the store must be owned by 61000 again: :func:`store_owner` maps ids.
"""

from __future__ import annotations

import fcntl
import os
import random
import threading
from pathlib import Path

from .._errors import SandboxUnavailable
from ._layers import SANDBOX_GID, SANDBOX_UID

POOL_FIRST = SANDBOX_UID + 1
POOL_SIZE = 1000
_DIRS = (Path("/run/ceiling-uids"), Path("/tmp/ceiling-uids"))
_lock = threading.Lock()
_dir: Path | None = None


def in_pool(uid: int) -> bool:
    """True for a uid (or gid) the pool hands out."""
    return POOL_FIRST <= uid < POOL_FIRST + POOL_SIZE


def store_owner(uid: int, gid: int) -> tuple[int, int]:
    """The owner a file frozen from a sandbox must have in the layer store: pool ids become
    the canonical :data:`SANDBOX_UID`/:data:`SANDBOX_GID` (so identical states frozen from two
    sandboxes hash and store the same); any other id (root's) is kept."""
    return (SANDBOX_UID if in_pool(uid) else uid, SANDBOX_GID if in_pool(gid) else gid)


def _lock_dir() -> Path:
    """The lock folder: root-owned, 0700, not a symlink (another user cannot plant it)."""
    global _dir
    if _dir is not None:
        return _dir
    errors = []
    for d in _DIRS:
        try:
            d.mkdir(mode=0o700, exist_ok=True)
            st = os.lstat(d)
            if st.st_uid != os.geteuid() or not os.path.isdir(d) or os.path.islink(d) \
                    or st.st_mode & 0o077:
                raise PermissionError(f"{d} is not a private folder of uid {os.geteuid()}")
            _dir = d
            return d
        except OSError as e:
            errors.append(f"{d}: {e}")
    raise SandboxUnavailable("no folder for the sandbox uid locks (" + "; ".join(errors) + ")",
                             fix="make /run or /tmp writable by root")


class UidLease:
    """One pool uid held by this process (and, once passed on, by a holder): ``fd`` is the
    locked file; :meth:`release` closes it (the uid is free when every copy is closed)."""

    def __init__(self, uid: int, fd: int) -> None:
        self.uid, self.gid, self.fd = uid, uid, fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __repr__(self) -> str:
        return f"UidLease(uid={self.uid}, fd={self.fd})"


def acquire() -> UidLease:
    """A free uid of the pool, locked. Raises :class:`SandboxUnavailable` when all
    :data:`POOL_SIZE` are live on this machine."""
    d = _lock_dir()
    start = random.randrange(POOL_SIZE)
    with _lock:  # one thread at a time scans (a same-process race would only cost a retry)
        for i in range(POOL_SIZE):
            uid = POOL_FIRST + (start + i) % POOL_SIZE
            fd = os.open(d / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                         0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return UidLease(uid, fd)
    raise SandboxUnavailable(f"all {POOL_SIZE} sandbox uids are in use on this machine",
                             fix="close sandboxes (or raise ceiling.sandbox._uidpool.POOL_SIZE)")


__all__ = ["POOL_FIRST", "POOL_SIZE", "UidLease", "acquire", "in_pool", "store_owner"]
