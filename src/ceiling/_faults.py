"""Fault injection for recovery variants (``TaskCard.faults``), applied at ``TaskEnv.reset``.

- ``transient``: a shim named after ``target`` sits first on PATH; the first ``times`` calls
  fail (exit 1, ``message`` on stderr), later calls run the real program. The counter lives
  in the sandbox's private /tmp (outside the workspace, so it never reaches the verifier);
  an agent that finds and deletes it gets more failures, never fewer.
- ``permission``: ``chmod 000`` on the workspace path ``target`` (recursive for folders is
  not applied: only the path itself). It binds only when commands in the sandbox do not run
  with CAP_DAC_OVERRIDE (the namespace backend drops it; the local backend as root does not).
- ``missing_tool``: PATH becomes one folder of symlinks to every program on the original
  PATH except ``target``. Absolute paths (``/usr/bin/tar``) still work: the fault removes
  the tool from PATH, it does not delete it.

Everything is built inside the sandbox with one shell command, so the paths are right for
every backend. :func:`inject` returns the environment variables later commands must use.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .cards import Fault
    from .sandbox import Sandbox

FAULT_DIR = ".ceiling-faults"


_SHIM = """#!/bin/sh
n=${0##*/}; d=${0%/*}/..; S="$d/state/$n"; c=0
[ -f "$S" ] && read c < "$S"
if [ "$c" -lt TIMES ]; then echo $((c+1)) > "$S"; echo MSG >&2; exit 1; fi
read r < "$d/real/$n"
exec "$r" "$@"
"""


def _script(faults: list[Fault]) -> str:
    missing = [f.target for f in faults if f.kind == "missing_tool"]
    transient = [f for f in faults if f.kind == "transient"]
    perms = [f.target for f in faults if f.kind == "permission"]
    lines = ["set -e", f'F="${{TMPDIR:-/tmp}}/{FAULT_DIR}"',
             'mkdir -p "$F/bin" "$F/state" "$F/real"', 'ORIG="$PATH"']
    for t in transient:  # resolve the real programs before PATH changes
        q = shlex.quote(t.target)
        lines.append(f'r=$(command -v {q} || true); case "$r" in /*) printf %s "$r" > "$F/real/"{q};; '
                     'esac')
    if missing:
        skip = " ".join(shlex.quote(m) for m in missing)
        lines += [
            'IFS=:; for d in $ORIG; do [ -d "$d" ] || continue; for p in "$d"/*; do',
            '  n=${p##*/}; [ -x "$p" ] && [ ! -d "$p" ] || continue',
            f'  case " {skip} " in *" $n "*) continue;; esac',
            '  [ -e "$F/bin/$n" ] || [ -L "$F/bin/$n" ] || ln -s "$p" "$F/bin/$n"',
            "done; done; unset IFS",
        ]
    for t in transient:
        q = shlex.quote(t.target)
        msg = t.message or f"{t.target}: temporary failure (resource busy), try again"
        shim = _SHIM.replace("TIMES", str(t.times)).replace("MSG", shlex.quote(msg))
        lines += [f'rm -f "$F/bin/"{q}',
                  (f'if [ -s "$F/real/"{q} ]; then printf %s {shlex.quote(shim)} > "$F/bin/"{q}; '
                   f'chmod 755 "$F/bin/"{q}; fi')]
    for p in perms:
        lines.append(f"chmod 000 {shlex.quote(p)} 2>/dev/null || true")
    if missing:
        lines.append('printf "%s" "$F/bin"')
    elif transient:
        lines.append('printf "%s" "$F/bin:$ORIG"')
    return "\n".join(lines) + "\n"


def inject(sandbox: Sandbox, faults: list[Fault]) -> dict[str, str]:
    """Apply ``faults`` to a freshly reset sandbox; return the env overrides (PATH) that every
    later command of the episode must get. Raises RuntimeError when the set-up fails."""
    if not faults:
        return {}
    res = sandbox.exec(_script(faults), timeout=60)
    if res.exit_code != 0:
        raise RuntimeError(f"fault injection failed: {res.stderr.strip()[:300]}")
    path = res.stdout.strip()
    return {"PATH": path} if path else {}


__all__ = ["FAULT_DIR", "inject"]
