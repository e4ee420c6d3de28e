"""The subject server and the plain-data wire format (stdlib only).

Two roles in one file, so there is one implementation of the encoding:

- **Wire format** (:func:`encode`, :func:`decode`, :func:`dumps`, :func:`loads`): JSON lines
  where ``null``/``true``/``false``/int/finite float/str/list are themselves, and everything
  else is a tagged object ``{"t": TAG, "v": ...}`` with TAG one of ``tuple``, ``bytes``
  (base64), ``set``, ``frozenset``, ``dict`` (a list of ``[key, value]`` pairs, so keys of
  any plain type survive), ``float`` (``"nan"``, ``"inf"``, ``"-inf"``) and ``remote`` (a
  callback id). :func:`loads` is the grader's boundary: it accepts ONLY these shapes (bare
  JSON objects, unknown tags, ``NaN`` literals, unhashable set members or keys are errors),
  caps the text size (:data:`MAX_BYTES`) and the nesting depth (:data:`MAX_DEPTH`), and
  returns exact builtin types, so no object the workspace made reaches an assertion.
  :func:`encode` accepts exact builtin types only (a subclass of ``int`` or ``str`` is
  refused), so the subject cannot smuggle a lying ``__eq__`` even by accident.
- **Server** (run as ``python -I -c SOURCE SOCKET_PATH``, as the agent uid inside the
  grading sandbox): binds a Unix socket, forks (the parent exits once the socket listens, so
  the caller knows it is ready), puts the workspace first on ``sys.path`` and serves one
  client at a time. Requests (one JSON line each): ``{"op": "call", "target":
  "pkg.mod:attr.sub", "args": [...], "kwargs": {...}}``, ``{"op": "define", "source": str}``
  (exec'd as module ``__ceiling__``), ``{"op": "ping"}``, each with a random ``id``. Replies: ``{"ok": value, "id": id}`` or
  ``{"error": {"type", "message", "traceback"}, "id": id}``; the grader drops the subject
  on a reply whose ``id`` is not the request's (replies written ahead by workspace code). While a call runs, an argument tagged
  ``remote`` is a callable that sends ``{"remote": id, "args": [...]}`` and waits for
  ``{"ok": value}`` / ``{"error": {...}}`` from the grader.

Nothing here is trusted by the grader: the workspace's code runs in this process and may
rewrite any of it. The grader only ever decodes what arrives with :func:`loads`.
"""

from __future__ import annotations

import base64
import json
import math
import os
import socket
import sys
import traceback
import types
from typing import Any

MAX_BYTES = 64 << 20
MAX_DEPTH = 64
TAGS = ("tuple", "bytes", "set", "frozenset", "dict", "float", "remote")


class WireError(ValueError):
    """A value cannot be encoded, or received text is not the plain-data format."""


class Remote:
    """Marks a grader-side callable passed to the subject (see ``subject.remote``)."""

    __slots__ = ("fn", "id")

    def __init__(self, fn: Any, rid: int) -> None:
        self.fn, self.id = fn, rid


def encode(x: Any, depth: int = 0) -> Any:
    """A JSON-ready form of plain data (exact builtin types only)."""
    if depth > MAX_DEPTH:
        raise WireError(f"value nested deeper than {MAX_DEPTH}")
    t = type(x)
    if x is None or t is bool or t is int or t is str:
        return x
    if t is float:
        if math.isfinite(x):
            return x
        return {"t": "float", "v": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}
    if t is list:
        return [encode(i, depth + 1) for i in x]
    if t is tuple or t is set or t is frozenset:
        return {"t": t.__name__, "v": [encode(i, depth + 1) for i in x]}
    if t is bytes:
        return {"t": "bytes", "v": base64.b64encode(x).decode()}
    if t is dict:
        return {"t": "dict", "v": [[encode(k, depth + 1), encode(v, depth + 1)]
                                   for k, v in x.items()]}
    if t is Remote:
        return {"t": "remote", "v": x.id}
    raise WireError(f"cannot send a {t.__module__}.{t.__qualname__}: only None, bool, int, "
                    "float, str, bytes, list, tuple, dict, set and frozenset cross the boundary")


def _reject_constant(name: str) -> Any:
    raise WireError(f"bare {name} is not plain data (non-finite floats are tagged)")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return dict(pairs)


def decode(x: Any, remotes: Any = None, depth: int = 0) -> Any:
    """The value a JSON-decoded form stands for; raises :class:`WireError` on any other
    shape. ``remotes(id)`` makes the callable for a ``remote`` tag (None: refused)."""
    if depth > MAX_DEPTH:
        raise WireError(f"value nested deeper than {MAX_DEPTH}")
    t = type(x)
    if x is None or t is bool or t is int or t is str or t is float:
        return x
    if t is list:
        return [decode(i, remotes, depth + 1) for i in x]
    if t is not dict or set(x) != {"t", "v"}:
        raise WireError(f"unexpected {t.__name__} in plain data")
    tag, v = x["t"], x["v"]
    if tag in ("tuple", "set", "frozenset"):
        if type(v) is not list:
            raise WireError(f"{tag} needs a list")
        items = [decode(i, remotes, depth + 1) for i in v]
        try:
            return tuple(items) if tag == "tuple" else set(items) if tag == "set" \
                else frozenset(items)
        except TypeError as e:
            raise WireError(f"{tag} member: {e}") from None
    if tag == "bytes":
        if type(v) is not str:
            raise WireError("bytes needs base64 text")
        try:
            return base64.b64decode(v, validate=True)
        except ValueError as e:
            raise WireError(f"bytes: {e}") from None
    if tag == "dict":
        if type(v) is not list:
            raise WireError("dict needs a list of pairs")
        out = {}
        for pair in v:
            if type(pair) is not list or len(pair) != 2:
                raise WireError("dict item is not a [key, value] pair")
            try:
                out[decode(pair[0], remotes, depth + 1)] = decode(pair[1], remotes, depth + 1)
            except TypeError as e:
                raise WireError(f"dict key: {e}") from None
        return out
    if tag == "float":
        if v not in ("nan", "inf", "-inf"):
            raise WireError(f"unknown float {v!r}")
        return float(v)
    if tag == "remote" and remotes is not None and type(v) is int:
        return remotes(v)
    raise WireError(f"unknown tag {tag!r}")


def dumps(msg: dict[str, Any]) -> bytes:
    """One protocol line. ``msg``'s own keys are protocol fields; values are pre-encoded."""
    return json.dumps(msg, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def loads(line: bytes) -> dict[str, Any]:
    """Parse one protocol line (a JSON object of protocol fields); size-capped, no NaN."""
    if len(line) > MAX_BYTES:
        raise WireError(f"message larger than {MAX_BYTES} bytes")
    try:
        msg = json.loads(line, parse_constant=_reject_constant, object_pairs_hook=_pairs)
    except (ValueError, RecursionError) as e:
        raise WireError(f"not a protocol line: {str(e)[:200]}") from None
    if type(msg) is not dict:
        raise WireError("a protocol line must be a JSON object")
    return msg


def read_line(f: Any) -> bytes:
    """One line from a binary file object, at most :data:`MAX_BYTES` (EOF: b"")."""
    line = f.readline(MAX_BYTES + 1)
    if len(line) > MAX_BYTES:
        raise WireError(f"message larger than {MAX_BYTES} bytes")
    return line  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------- server side
def _err(e: BaseException) -> dict[str, str]:
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    try:
        msg = str(e)
    except Exception:  # noqa: BLE001 - a workspace exception whose __str__ raises
        msg = "<unprintable>"
    return {"type": type(e).__name__, "message": msg[-4000:], "traceback": tb[-8000:]}


def _resolve(target: str) -> Any:
    mod, _, attr = target.partition(":")
    if not mod or not attr:
        raise ValueError(f"target {target!r} must look like 'package.module:function'")
    import importlib

    obj: Any = sys.modules["__ceiling__"] if mod == "__ceiling__" else \
        importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _serve(conn: socket.socket) -> None:
    rf, wf = conn.makefile("rb"), conn.makefile("wb")

    def send(msg: dict[str, Any]) -> None:
        wf.write(dumps(msg))
        wf.flush()

    def recv() -> dict[str, Any] | None:
        line = read_line(rf)
        return loads(line) if line else None

    def remote(rid: int) -> Any:
        def call(*args: Any) -> Any:
            send({"remote": rid, "args": encode(list(args))})
            msg = recv()
            if msg is None:
                raise SystemExit(0)
            if "error" in msg:
                e = msg["error"]
                raise RuntimeError(f"remote callback raised {e.get('type')}: {e.get('message')}")
            return decode(msg.get("ok"), remote)
        return call

    while True:
        req = recv()
        if req is None:
            return
        op, rid = req.get("op"), req.get("id")
        try:
            if op == "ping":
                out: Any = os.getpid()
            elif op == "define":
                mod = types.ModuleType("__ceiling__")
                sys.modules["__ceiling__"] = mod
                exec(compile(req["source"], "<subject.define>", "exec"), mod.__dict__)  # noqa: S102
                out = None
            elif op == "call":
                fn = _resolve(req["target"])
                args = decode(req.get("args", {"t": "tuple", "v": []}), remote)
                kwargs = decode(req.get("kwargs", {"t": "dict", "v": []}), remote)
                out = fn(*args, **kwargs)
            else:
                raise ValueError(f"unknown op {op!r}")
            try:
                data = encode(out)
            except (WireError, RecursionError) as e:
                send({"error": _err(e), "id": rid})
                continue
            send({"ok": data, "id": rid})
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            send({"error": _err(e), "id": rid})


def main(path: str, workspace: str) -> None:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    try:
        srv.bind(path)
    finally:
        os.umask(old)
    srv.listen(4)
    if os.fork():
        os._exit(0)  # the caller's exec returns: the socket is listening
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    sys.path.insert(0, workspace)
    try:
        os.chdir(workspace)
    except OSError:
        pass
    while True:
        conn, _ = srv.accept()
        try:
            _serve(conn)
        except (OSError, WireError):
            pass
        finally:
            conn.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "/workspace")
