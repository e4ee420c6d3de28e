"""Where ceiling keeps its state: ``$CEILING_HOME`` (default ``~/.ceiling``).

A floor module, so every package finds the folder the same way. Under it: ``layers/`` (the
sandbox layer store), ``images/``, ``runtime/``, ``store.sqlite`` (results), ``runs/``,
``cache/``, ``bases/`` and ``secret``. The variable is read on every call (tests give each
test its own folder); nothing is created here.
"""

from __future__ import annotations

import os
from pathlib import Path


def ceiling_home() -> Path:
    """``$CEILING_HOME`` when set, else ``~/.ceiling`` (not created)."""
    return Path(os.environ.get("CEILING_HOME", Path.home() / ".ceiling"))
