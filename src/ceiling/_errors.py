"""Errors a user can act on.

Every error ceiling raises for bad input is a :class:`CeilingError`: it says *what* went
wrong, *where* (file and field when there is one) and *how to fix it*. The command line
prints ``str(err)`` as one line, with no traceback.
"""

from __future__ import annotations


class CeilingError(Exception):
    """A user-facing error: ``what`` happened, optionally ``where`` and a ``fix``."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.where = where
        self.fix = fix
        super().__init__(self.__str__())

    def __str__(self) -> str:
        head = f"{self.where}: {self.what}" if self.where else self.what
        return f"{head} (fix: {self.fix})" if self.fix else head


class CardError(CeilingError):
    """A task card on disk or in memory is malformed (names file, field and fix)."""


class ConfigError(CeilingError):
    """A configuration file or command-line value is invalid."""


class SandboxError(CeilingError):
    """The sandbox could not be created or used (infrastructure, never the model's fault)."""


class SandboxUnavailable(SandboxError):
    """The requested sandbox backend cannot run on this machine."""


class StateRejected(SandboxError):
    """A sandbox's state cannot be frozen (``checkpoint``/``fork``/the verifier's freeze) for a
    reason the *workspace* holds: more file data than ``limits.disk_mb`` (counted as apparent
    size, so sparse files count in full), a FIFO, socket or device file, or folders nested
    too deep. Nothing was written to the layer store. ``reason`` is a short machine-readable
    cause (``"too_big"``, ``"special_file"``, ``"too_deep"``) and ``path`` the offending
    workspace path when there is one. The verifier treats it as the agent's failure (or
    tampering), never as an infrastructure error."""

    def __init__(self, what: str, *, reason: str, path: str | None = None,
                 fix: str | None = None) -> None:
        self.reason = reason
        self.path = path
        super().__init__(what, where=path, fix=fix)


class PolicyError(CeilingError):
    """A policy could not be loaded or failed to answer (an endpoint down, a bad path)."""


def nearest(name: str, choices: list[str] | tuple[str, ...] | set[str]) -> str | None:
    """The closest of ``choices`` to ``name`` for "Did you mean …?" hints, or None."""
    import difflib

    hits = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.5)
    return hits[0] if hits else None
