"""The host grader's pytest plugin: the ``subject`` fixture and the result recorder.

Loaded by path in the grader's fork server (:mod:`._forkserver`), never imported from the
workspace and never importing ceiling: it needs the stdlib, pytest and the wire format of
:mod:`._subject_server` (loaded next to it as module ``ceiling_subject_wire``).

Card authors use it like this (the hidden test imports nothing)::

    def test_sum(subject):
        assert subject.call("app.calc:add", 2, 3) == 5            # runs in the subject
        with pytest.raises(subject.Error) as e:
            subject.call("app.calc:add", "x", 1)
        assert e.value.type == "TypeError"
        r = subject.run(["python3", "tool.py", "--check"], input=b"1 2\\n")
        assert (r.returncode, r.stdout) == (0, "ok\\n")
        assert subject.read_text("out/report.txt").startswith("total")
        assert subject.git("log", "--format=%s", "-1").stdout == "fix: add\\n"

Contracts (see docs/verifier.md): values crossing to and from the subject are plain data
(exact builtin types come back); ``call`` raises :class:`SubjectError` (the workspace raised;
``.type``, ``.message``, ``.traceback``), :class:`SubjectTimeout` (no answer within
``subject.timeout`` seconds, 20 by default; the next call starts a fresh subject) or
:class:`SubjectCrashed` (the subject died or sent something that is not plain data; the next
call starts a fresh one). ``run``/``read``/``exists``/``git``/``service`` are served by the
verifier process over an inherited socket (fresh processes in the grading sandbox).

The recorder writes one JSON line per event to an inherited pipe: ``start``, ``collected``,
``collect_error``, ``test`` (per phase) and ``end``; the verifier reads it to EOF.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import stat
import sys
import time
from dataclasses import dataclass
from typing import Any

import pytest

_wire: Any = sys.modules.get("ceiling_subject_wire")
if _wire is None:  # imported normally (tests of this module): load the sibling file
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "ceiling_subject_wire", os.path.join(os.path.dirname(__file__), "_subject_server.py"))
    assert _spec is not None and _spec.loader is not None
    _wire = importlib.util.module_from_spec(_spec)
    sys.modules["ceiling_subject_wire"] = _wire
    _spec.loader.exec_module(_wire)

WireError = _wire.WireError


class SubjectFailure(Exception):
    """Base of everything a subject call can raise."""


class SubjectError(SubjectFailure):
    """The workspace code raised: ``type`` (class name), ``message``, ``traceback``."""

    def __init__(self, type: str, message: str, traceback: str = "") -> None:
        super().__init__(f"{type}: {message}")
        self.type, self.message, self.traceback = type, message, traceback


class SubjectTimeout(SubjectFailure):
    """The subject did not answer in time (it is replaced at the next call)."""


class SubjectCrashed(SubjectFailure):
    """The subject (or the grading sandbox) died, or answered with something that is not
    plain data."""


@dataclass(frozen=True)
class RunResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


@dataclass(frozen=True)
class Service:
    url: str
    port: int


def _s(x: Any, limit: int = 8000) -> str:
    return x[-limit:] if type(x) is str else ""


# ---------------------------------------------------------------------------- channel
class _Channel:
    """Requests to the verifier process (run, read, exists, git, service, subject)."""

    def __init__(self, fd: int) -> None:
        self.sock = socket.socket(fileno=fd)
        self.rf, self.wf = self.sock.makefile("rb"), self.sock.makefile("wb")

    def ask(self, op: str, **kw: Any) -> Any:
        self.wf.write(_wire.dumps({"op": op, "a": _wire.encode(kw)}))
        self.wf.flush()
        line = _wire.read_line(self.rf)
        if not line:
            raise SubjectCrashed("the verifier closed the grading channel")
        msg = _wire.loads(line)
        if "error" in msg:
            e = msg["error"]
            cls = SubjectCrashed if e.get("type") == "SubjectCrashed" else SubjectError
            if cls is SubjectCrashed:
                raise SubjectCrashed(_s(e.get("message")))
            raise SubjectError(_s(e.get("type"), 200), _s(e.get("message")))
        return _wire.decode(msg.get("ok"))


_STATE: dict[str, Any] = {"channel": None, "conn": None, "workspace": "", "dead": False}


def configure(channel_fd: int | None, workspace: str) -> None:
    """Called once in the grading child before ``pytest.main``."""
    _STATE["channel"] = _Channel(channel_fd) if channel_fd is not None else None
    _STATE["workspace"] = workspace


def _channel() -> _Channel:
    ch = _STATE["channel"]
    if ch is None:
        raise RuntimeError("the subject fixture needs the ceiling grader (runner: subject)")
    return ch  # type: ignore[no-any-return]


def _connect(host_dir: str, name: str, timeout: float) -> socket.socket:
    """Connect to the subject's socket without following a symlink planted in its place."""
    dfd = os.open(host_dir, os.O_PATH | os.O_DIRECTORY)
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=dfd)
    finally:
        os.close(dfd)
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise SubjectCrashed(f"{name} is not the subject's socket")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(f"/proc/self/fd/{fd}")
        return s
    finally:
        os.close(fd)


class _Conn:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.rf, self.wf = sock.makefile("rb"), sock.makefile("wb")

    def close(self) -> None:
        for f in (self.rf, self.wf, self.sock):
            try:
                f.close()
            except OSError:
                pass


class Subject:
    """The handle a hidden test gets as the ``subject`` fixture (see module docstring)."""

    Failure = SubjectFailure
    Error = SubjectError
    Timeout = SubjectTimeout
    Crashed = SubjectCrashed
    Result = RunResult

    def __init__(self) -> None:
        self.timeout = 20.0
        self._remotes: dict[int, Any] = {}

    # -- the subject process ------------------------------------------------------------
    @property
    def workspace(self) -> str:
        return str(_STATE["workspace"])

    def _conn(self) -> _Conn:
        c = _STATE["conn"]
        if c is None or _STATE["dead"]:
            self._drop()
            info = _channel().ask("subject", restart=_STATE["dead"])
            try:
                c = _Conn(_connect(info["dir"], info["name"], 10.0))
            except OSError as e:
                raise SubjectCrashed(f"could not reach the subject: {e}") from None
            _STATE["conn"], _STATE["dead"] = c, False
        return c  # type: ignore[no-any-return]

    @staticmethod
    def _drop() -> None:
        c = _STATE["conn"]
        if c is not None:
            c.close()
        _STATE["conn"] = None

    def restart(self) -> None:
        """A fresh subject process for the next call."""
        self._drop()
        _STATE["dead"] = True

    def _request(self, msg: dict[str, Any]) -> Any:
        c = self._conn()
        rid = msg["id"] = secrets.token_hex(8)  # a reply written ahead cannot carry it
        deadline = time.monotonic() + self.timeout
        try:
            c.sock.settimeout(self.timeout)
            c.wf.write(_wire.dumps(msg))
            c.wf.flush()
            while True:
                c.sock.settimeout(max(0.001, deadline - time.monotonic()))
                line = _wire.read_line(c.rf)
                if not line:
                    raise SubjectCrashed("the subject process died (or closed its socket)")
                rep = _wire.loads(line)
                if "remote" in rep:
                    self._answer_remote(c, rep)
                    continue
                if rep.get("id") != rid:
                    raise SubjectCrashed("a reply that does not answer this call")
                if "error" in rep:
                    e = rep["error"]
                    if type(e) is not dict:
                        raise SubjectCrashed("malformed error from the subject")
                    raise SubjectError(_s(e.get("type"), 200) or "?", _s(e.get("message")),
                                       _s(e.get("traceback")))
                if set(rep) != {"ok", "id"}:
                    raise SubjectCrashed("malformed reply from the subject")
                return _wire.decode(rep["ok"])
        except TimeoutError:
            _STATE["dead"] = True
            raise SubjectTimeout(f"the subject did not answer within {self.timeout:g}s") \
                from None
        except (WireError, OSError, ValueError) as e:
            _STATE["dead"] = True
            raise SubjectCrashed(f"bad answer from the subject: {e}") from None
        except SubjectCrashed:
            _STATE["dead"] = True
            raise

    def _answer_remote(self, c: _Conn, rep: dict[str, Any]) -> None:
        fn = self._remotes.get(rep.get("remote"))  # type: ignore[arg-type]
        if fn is None:
            raise SubjectCrashed("the subject called an unknown remote")
        args = _wire.decode(rep.get("args"))
        if type(args) is not list:
            raise SubjectCrashed("remote arguments are not a list")
        try:
            out = {"ok": _wire.encode(fn(*args))}
        except Exception as e:  # noqa: BLE001 - reported to the subject as data
            out = {"error": {"type": type(e).__name__, "message": str(e)}}
        c.wf.write(_wire.dumps(out))
        c.wf.flush()

    def remote(self, fn: Any) -> Any:
        """A marker for an argument: in the subject it is a callable that runs ``fn`` here."""
        rid = len(self._remotes) + 1
        self._remotes[rid] = fn
        return _wire.Remote(fn, rid)

    def call(self, target: str, *args: Any, **kwargs: Any) -> Any:
        """``pkg.mod:attr`` called in the subject with plain-data arguments."""
        return self._request({"op": "call", "target": str(target),
                              "args": _wire.encode(args), "kwargs": _wire.encode(kwargs)})

    def define(self, source: str) -> None:
        """Exec trusted helper source in the subject as module ``__ceiling__``."""
        self._request({"op": "define", "source": str(source)})

    # -- served by the verifier -----------------------------------------------------------
    def run(self, cmd: str | list[str], *, input: bytes | str = b"",
            timeout: float = 30, env: dict[str, str] | None = None,
            cwd: str | None = None) -> RunResult:
        """A fresh process in the grading sandbox (agent uid). ``cmd``: sh -c text or argv."""
        data = input.encode() if isinstance(input, str) else bytes(input)
        r = _channel().ask("run", cmd=cmd if isinstance(cmd, str) else [str(a) for a in cmd],
                           input=data, timeout=float(timeout), env=dict(env or {}),
                           cwd=cwd)
        return RunResult(int(r["returncode"]), str(r["stdout"]), str(r["stderr"]),
                         bool(r["timed_out"]))

    def read(self, path: str) -> bytes:
        """Bytes of a file in the grading sandbox (workspace-relative or under /tmp)."""
        out = _channel().ask("read", path=str(path))
        if type(out) is not bytes:
            raise FileNotFoundError(path)
        return out

    def read_text(self, path: str) -> str:
        return self.read(path).decode()

    def exists(self, path: str) -> bool:
        return bool(_channel().ask("exists", path=str(path)))

    def git(self, *args: str, timeout: float = 30) -> RunResult:
        """git over a sanitised copy of the workspace repository (no config from the box)."""
        r = _channel().ask("git", args=[str(a) for a in args], timeout=float(timeout))
        return RunResult(int(r["returncode"]), str(r["stdout"]), str(r["stderr"]),
                         bool(r["timed_out"]))

    def service(self, files: dict[str, str | bytes], argv: list[str], *,
                env: dict[str, str] | None = None, port: int = 8000) -> Service:
        """Start a trusted service (files from the test) next to the subject's network."""
        enc = {str(k): (v.encode() if isinstance(v, str) else bytes(v)) for k, v in files.items()}
        r = _channel().ask("service", files=enc, argv=[str(a) for a in argv],
                           env=dict(env or {}), port=int(port))
        return Service(str(r["url"]), int(r["port"]))


@pytest.fixture
def subject() -> Subject:
    """A handle on the grading's subject process (see :class:`Subject`)."""
    return Subject()


# ---------------------------------------------------------------------------- recorder
def _msg(report: Any) -> str:
    try:
        text = str(report.longrepr) if report.longrepr is not None else ""
    except Exception as e:  # noqa: BLE001
        text = f"<unprintable: {type(e).__name__}>"
    return text[-1500:]


class Recorder:
    """Writes one JSON line per event to ``fd`` (an inherited pipe)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def emit(self, **rec: Any) -> None:
        rec["t"] = round(time.monotonic(), 6)  # for the verifier's phase timings
        data = (json.dumps(rec) + "\n").encode()
        while data:
            n = os.write(self.fd, data)
            data = data[n:]

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.emit(event="collect_error", nodeid=report.nodeid, message=_msg(report))

    def pytest_collection_finish(self, session: Any) -> None:
        self.emit(event="collected", ids=[i.nodeid for i in session.items])

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: Any) -> None:
        """Every result is in: the verifier stops reading here (pytest's own clean-up after
        this point, garbage collections included, is not waited for)."""
        self.emit(event="end", rc=int(session.exitstatus))

    def pytest_runtest_logreport(self, report: Any) -> None:
        if "subtest" in type(report).__name__.lower():  # unittest subTest / subtests fixture
            self.emit(event="subtest", nodeid=report.nodeid, outcome=report.outcome,
                      message=_msg(report) if report.outcome == "failed" else "")
            return
        self.emit(event="test", nodeid=report.nodeid, when=report.when, outcome=report.outcome,
                  xfail=hasattr(report, "wasxfail"),
                  message=_msg(report) if report.outcome != "passed" else "")


__all__ = ["Recorder", "RunResult", "Service", "Subject", "SubjectCrashed", "SubjectError",
           "SubjectFailure", "SubjectTimeout", "configure", "subject"]
