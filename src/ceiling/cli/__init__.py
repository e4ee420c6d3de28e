"""The ``ceiling`` command. User mistakes print one line (no traceback) and exit 2."""

from __future__ import annotations

import importlib
import os
import sys

from .._errors import CeilingError
from ._app import app

_MODULES = ("sandbox_cmds", "envs_cmds", "mix_cmds", "verify_cmds", "rollout_cmds",
            "eval_cmds", "train_cmds", "bench_train_cmds", "harness_cmds",
            "study_cmds", "diagnose_cmds", "import_cmds", "synth_cmds")


def _load() -> None:
    for name in _MODULES:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    _load()
    try:
        rc = app(args=argv, standalone_mode=False)
    except CeilingError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except SystemExit:
        raise
    except Exception as e:  # click usage errors arrive here with standalone_mode=False
        import click

        if isinstance(e, click.exceptions.ClickException):
            e.show()
            sys.exit(e.exit_code)
        if isinstance(e, click.exceptions.Abort):
            sys.exit(1)
        raise
    sys.exit(rc if isinstance(rc, int) else 0)


__all__ = ["app", "main"]
