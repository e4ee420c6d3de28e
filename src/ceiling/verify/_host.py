"""The host grader (``runner: subject`` and ``files``): pytest outside every sandbox.

Per grading:

1. ``copy_nofollow`` copies the frozen workspace to a host folder (fd-relative, ``O_NOFOLLOW``;
   symlinks stay symlinks, FIFOs/sockets/devices are skipped, modes kept): that copy is
   ``WORKSPACE`` for the hidden tests, plain data. The scan reads the same copy.
2. The hidden tests, two canaries and ``grader.ini`` are written to a fresh 0700 temp folder.
3. The fork server (:mod:`._forkserver`, one per verifier process, pytest pre-imported)
   forks a child that runs ``pytest.main`` there, with the recorder writing to a pipe this
   process holds the read end of, and one end of a socket pair over which this process
   serves ``run``/``read``/``exists``/``git``/``service``/``subject`` requests in a thread
   against the grading sandbox (:class:`GradingChannel`).
4. Results are read to EOF (or the timeout, which kills the child's process group).

The subject server (:mod:`._subject_server`) runs in the grading sandbox as the agent uid,
started with ``sandbox.python -I -c SOURCE``; the child connects to its Unix socket in the
sandbox's ``/tmp`` through ``/proc/<holder>/root/tmp`` (namespace backend) or the local
sandbox's tmp folder, opening the socket ``O_PATH|O_NOFOLLOW`` so a symlink planted in its
place is refused. One subject is started in the background when grading begins (``subject``
cards), so its start-up overlaps pytest's.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ..cards import FileEntry, write_tree
from ..sandbox import runtime
from . import _subject_server as wire
from ._grader import INI, GradeResult, _canary_file, _combine, _parse, sandbox_dirs

HERE = Path(__file__).resolve().parent
SERVER_SOURCE = (HERE / "_subject_server.py").read_text()
MAX_COPY_BYTES = 2 << 30


# ---------------------------------------------------------------------------- workspace copy
class CopyLimit(Exception):
    """The workspace holds more data than the grader copies (the agent's doing)."""


def copy_nofollow(src: Path, dst: Path, *, max_bytes: int = MAX_COPY_BYTES) -> list[str]:
    """Copy the tree at ``src`` into the new folder ``dst`` without following any symlink.

    Regular files (content and mode), folders (mode, applied after their content) and
    symlinks (as symlinks) are copied; anything else is skipped and its relative path
    returned. Raises :class:`CopyLimit` past ``max_bytes`` of file data."""
    skipped: list[str] = []
    total = [0]
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    top = os.open(src, flags | os.O_DIRECTORY)
    os.mkdir(dst, 0o700)

    def walk(dfd: int, out: str, rel: str) -> None:
        with os.scandir(dfd) as it:
            entries = list(it)
        for e in entries:
            name, r = e.name, f"{rel}{e.name}"
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue
            target = os.path.join(out, name)
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(name, dir_fd=dfd), target)
            elif stat.S_ISDIR(st.st_mode):
                try:
                    sub = os.open(name, flags | os.O_DIRECTORY, dir_fd=dfd)
                except OSError:
                    skipped.append(r)
                    continue
                try:
                    os.mkdir(target, 0o700)
                    walk(sub, target, r + "/")
                    os.chmod(target, stat.S_IMODE(st.st_mode))
                finally:
                    os.close(sub)
            elif stat.S_ISREG(st.st_mode):
                total[0] += st.st_size
                if total[0] > max_bytes:
                    raise CopyLimit(f"the workspace holds more than {max_bytes >> 20} MiB")
                try:
                    fd = os.open(name, flags | os.O_NONBLOCK, dir_fd=dfd)
                except OSError:
                    skipped.append(r)
                    continue
                try:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        skipped.append(r)
                        continue
                    wfd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                                  0o600)
                    try:
                        while os.sendfile(wfd, fd, None, 1 << 24):
                            pass
                    finally:
                        os.close(wfd)
                    os.chmod(target, stat.S_IMODE(st.st_mode))
                finally:
                    os.close(fd)
            else:
                skipped.append(r)

    try:
        walk(top, str(dst), "")
    finally:
        os.close(top)
    return skipped


# ---------------------------------------------------------------------------- fork server
#: pytest plugins a grading never needs (each costs registration time in every child);
#: unraisable/thread-exception hooks would also force garbage collections at exit.
_NO_PLUGINS = [a for p in ("cacheprovider", "unraisableexception", "threadexception",
                           "pastebin", "junitxml", "doctest", "setuponly", "setupplan",
                           "stepwise", "debugging") for a in ("-p", f"no:{p}")]
#: pytest's arguments, relative to the grader folder (the fork server parses them ahead).
GRADER_ARGS = [*_NO_PLUGINS, "--noconftest", "-o", "addopts=", "-q", "-c", "grader.ini",
               "--rootdir", "tests", "tests"]
class ForkServer:
    """One ``python -I _forkserver.py`` per verifier process (see :mod:`._forkserver`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._pid = os.getpid()  # a forked verifier starts its own server

    def _start(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        os.set_inheritable(theirs.fileno(), True)
        env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}
        boot = json.dumps({"args": GRADER_ARGS, "ini": INI})
        self._proc = subprocess.Popen(
            [sys.executable, "-I", str(HERE / "_forkserver.py"), str(theirs.fileno()), boot],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, pass_fds=(theirs.fileno(),))
        theirs.close()
        self._sock = mine

    def spawn(self, fds: list[int]) -> tuple[int, Path]:
        """Hand the prepared grading child its results pipe and channel; returns its pid and
        its grader folder (write the tests there, then send the go line on the channel)."""
        with self._lock:
            for attempt in (0, 1):
                if self._pid != os.getpid():
                    self._proc, self._sock, self._pid = None, None, os.getpid()
                if self._proc is None or self._proc.poll() is not None:
                    self._start()
                assert self._sock is not None
                try:
                    socket.send_fds(self._sock, [b"grade"], fds)
                    self._sock.settimeout(120)
                    data = self._sock.recv(4096)
                    if data:
                        rep = json.loads(data)
                        if int(rep["pid"]) > 0:
                            return int(rep["pid"]), Path(rep["root"])
                except OSError:
                    pass
                self.stop()
                if attempt:
                    break
            raise RuntimeError("the grader's fork server died (see its stderr)")

    def stop(self) -> None:
        if self._proc is not None:
            try:
                self._proc.kill()
                self._proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self._sock is not None:
            self._sock.close()
        self._proc, self._sock = None, None


FORK_SERVER = ForkServer()
atexit.register(FORK_SERVER.stop)


def _no_pyc(sb: Any = None) -> str:
    """The bytecode cache prefix for code the agent wrote: cached ``.pyc`` files beside the
    workspace's sources (``__pycache__``) are never read, so the code that runs is the
    source the scans and checks read. In a namespace sandbox running the runtime's python:
    the runtime's trusted, read-only bytecode tree (the stdlib loads compiled; the
    workspace's modules miss there and compile from source). Elsewhere (the local backend,
    a card's own interpreter): a random folder that never exists, so nothing the agent
    left in /tmp can be it."""
    if sb is not None and getattr(sb, "backend", "") == "namespace" and \
            str(getattr(sb, "python", "")) == runtime.PYTHON:
        return runtime.PYCACHE
    return f"/tmp/.ceiling-nopyc-{secrets.token_hex(8)}"


def _python(sb: Any) -> list[str]:
    return [str(sb.python), "-X", f"pycache_prefix={_no_pyc(sb)}"]


# ---------------------------------------------------------------------------- channel
class GradingChannel:
    """Serves the grading child's requests against ``sandbox`` (one thread per grading).

    Faults of the grading sandbox while serving (it died: the agent's code exhausted its
    memory, killed its holder...) are answered as ``SubjectCrashed`` to the test, so they
    become test failures; ``sandbox_dead`` records them for the verdict."""

    def __init__(self, sandbox: Any, sock: socket.socket, prestart: bool) -> None:
        self.sb, self.sock = sandbox, sock
        self.inner_tmp, self.host_tmp, self.inner_ws = sandbox_dirs(sandbox)
        self.sandbox_dead = ""
        self.start_error = ""  # the first subject did not start: nothing of the agent ran yet
        self.services: list[Any] = []
        self.service_s: list[float] = []  # seconds each service took to listen
        self.requests: dict[str, int] = {}
        self._git_dir: str | None = None
        self._pre: Future[dict[str, str]] | None = None
        if prestart:
            self._pre = Future()
            threading.Thread(target=self._prestart, daemon=True).start()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _prestart(self) -> None:
        assert self._pre is not None
        try:
            self._pre.set_result(self.start_subject())
        except BaseException as e:  # noqa: BLE001 - delivered to whoever asks
            self.start_error = f"{type(e).__name__}: {e}"[-500:]
            self._pre.set_exception(e)

    def start_subject(self) -> dict[str, str]:
        name = f".ceiling-subject-{secrets.token_hex(8)}.sock"
        argv = [*_python(self.sb), "-I", "-c", SERVER_SOURCE, f"{self.inner_tmp}/{name}",
                self.inner_ws]
        r = self.sb.exec(argv, timeout=60)
        if r.exit_code != 0:
            raise RuntimeError(f"the subject did not start (exit {r.exit_code}): "
                               f"{r.stderr.strip()[-500:]}")
        return {"dir": str(self.host_tmp), "name": name}

    def _serve(self) -> None:
        rf, wf = self.sock.makefile("rb"), self.sock.makefile("wb")
        try:
            while True:
                line = wire.read_line(rf)
                if not line:
                    return
                try:
                    msg = wire.loads(line)
                    op, args = str(msg.get("op")), wire.decode(msg.get("a"))
                    self.requests[op] = self.requests.get(op, 0) + 1
                    out: dict[str, Any] = {"ok": wire.encode(self.handle(op, args))}
                except _Dead as e:
                    out = {"error": {"type": "SubjectCrashed", "message": str(e)}}
                except Exception as e:  # noqa: BLE001 - reported to the test
                    out = {"error": {"type": type(e).__name__, "message": str(e)[-2000:]}}
                wf.write(wire.dumps(out))
                wf.flush()
        except (OSError, wire.WireError):
            return
        finally:
            self.sock.close()

    def _sandbox(self, fn: Any, *a: Any, **kw: Any) -> Any:
        try:
            return fn(*a, **kw)
        except (FileNotFoundError, IsADirectoryError, PermissionError, NotADirectoryError):
            raise
        except Exception as e:
            from .._errors import SandboxError

            if isinstance(e, SandboxError):
                self.sandbox_dead = f"{type(e).__name__}: {e}"
                raise _Dead(f"the grading sandbox failed: {e}") from None
            raise

    def handle(self, op: str, a: dict[str, Any]) -> Any:
        if op == "subject":
            pre, self._pre = self._pre, None
            try:
                return pre.result(60) if pre is not None and not a.get("restart") else \
                    self._sandbox(self.start_subject)
            except RuntimeError as e:
                raise _Dead(str(e)) from None
        if op == "run":
            return self.run(a["cmd"], a.get("input", b""), a.get("timeout", 30.0),
                            a.get("env") or {}, a.get("cwd"))
        if op == "read":
            try:
                return self._sandbox(self.sb.read, a["path"])
            except (FileNotFoundError, IsADirectoryError, PermissionError, NotADirectoryError):
                return None
        if op == "exists":
            try:
                self._sandbox(self.sb.read, a["path"])
                return True
            except IsADirectoryError:
                return True
            except (FileNotFoundError, PermissionError, NotADirectoryError):
                return False
        if op == "git":
            return self.git(a["args"], a.get("timeout", 30.0))
        if op == "service":
            return self.service(a["files"], a["argv"], a.get("env") or {}, int(a["port"]))
        raise ValueError(f"unknown request {op!r}")

    def run(self, cmd: Any, data: bytes, timeout: float, env: Mapping[str, str],
            cwd: str | None, sb: Any = None) -> dict[str, Any]:
        sb = sb or self.sb
        if isinstance(cmd, list) and cmd and cmd[0] in ("python", "python3"):
            cmd = [*_python(sb), *cmd[1:]]
        r = self._sandbox(sb.exec, cmd, timeout=timeout, stdin=data or None,
                          env={"PYTHONPYCACHEPREFIX": _no_pyc(sb), **env}, cwd=cwd)
        return {"returncode": r.exit_code, "stdout": r.stdout, "stderr": r.stderr,
                "timed_out": r.timed_out}

    def git(self, args: list[str], timeout: float) -> dict[str, Any]:
        """git over a sanitised copy: HEAD, refs, packed-refs, index and objects (minus
        ``objects/info``) copied into this grading's /tmp with a fresh config; git runs
        with no system/global config, no hooks, fsmonitor, replace objects or lazy fetch."""
        if self._git_dir is None:
            d = f"{self.inner_tmp}/.ceiling-git-{secrets.token_hex(6)}"
            script = (f"set -e; umask 077; d={d}; s={self.inner_ws}/.git; mkdir -p $d/refs; "
                      "[ -d $s ] || exit 0; "
                      "for f in HEAD packed-refs index; do "
                      "[ -f $s/$f ] && [ ! -L $s/$f ] && cp -P $s/$f $d/$f; done; "
                      "[ -d $s/refs ] && [ ! -L $s/refs ] && cp -RP $s/refs/. $d/refs/; "
                      "[ -d $s/objects ] && [ ! -L $s/objects ] && cp -RP $s/objects $d/; "
                      "rm -rf $d/objects/info; "
                      "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n'"
                      " > $d/config")
            r = self._sandbox(self.sb.exec, ["/bin/sh", "-c", script], timeout=60)
            if r.exit_code != 0:
                return {"returncode": 128, "stdout": "", "stderr": "ceiling: could not copy "
                        f"the repository: {r.stderr[-500:]}", "timed_out": False}
            self._git_dir = d
        env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
               "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent",
               "GIT_TERMINAL_PROMPT": "0", "GIT_NO_LAZY_FETCH": "1",
               "GIT_NO_REPLACE_OBJECTS": "1", "GIT_ATTR_NOSYSTEM": "1", "GIT_PAGER": "cat",
               "PAGER": "cat", "GIT_ALLOW_PROTOCOL": "none", "GIT_ASKPASS": "/bin/false",
               "GIT_EDITOR": "/bin/false", "GIT_DIR": self._git_dir,
               "GIT_WORK_TREE": self.inner_ws, "GIT_CEILING_DIRECTORIES": "/"}
        argv = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
                "-c", "safe.directory=*", "-c", "protocol.allow=never",
                "-c", "core.sshCommand=/bin/false", *args]
        return self.run(argv, b"", timeout, env, None)  # cwd: the workspace

    def service(self, files: dict[str, bytes], argv: list[str], env: dict[str, str],
                port: int) -> dict[str, Any]:
        """Start a trusted service in its own sandbox on the grading sandbox's network."""
        from ..sandbox import open_sandbox

        tree = {k: FileEntry(v) for k, v in files.items()}
        # its own mount and PID namespaces and uid; the grading sandbox's loopback (the local
        # backend shares the host's network anyway)
        svc = open_sandbox([tree], backend=self.sb.backend, limits=self.sb.limits,
                           network_of=self.sb if self.sb.backend == "namespace" else None)
        self.services.append(svc)
        if argv and argv[0] in ("python", "python3"):
            argv = [*_python(svc), *argv[1:]]
        cmd = " ".join(_q(a) for a in argv)
        r = self._sandbox(svc.exec, f"({cmd}) >/tmp/.service.log 2>&1 &",
                          env={"PYTHONPYCACHEPREFIX": _no_pyc(svc), **env},
                          timeout=30)
        if r.exit_code != 0:
            raise RuntimeError(f"the service did not start: {r.stderr[-300:]}")
        t_svc = time.perf_counter()
        probe = ("import socket, sys, time\n"
                 "for _ in range(2000):\n"
                 "    try:\n"
                 f"        socket.create_connection(('127.0.0.1', {port}), 0.2).close()\n"
                 "        sys.exit(0)\n"
                 "    except OSError:\n"
                 "        time.sleep(0.005)\n"
                 "sys.exit(1)\n")
        r = self._sandbox(svc.exec, [*_python(svc), "-I", "-c", probe], timeout=15)
        if r.exit_code != 0:
            log = ""
            try:
                log = svc.read("/tmp/.service.log").decode(errors="replace")[-500:]
            except OSError:
                pass
            raise RuntimeError(f"the service did not listen on port {port}: {log}")
        self.service_s.append(round(time.perf_counter() - t_svc, 4))
        return {"url": f"http://127.0.0.1:{port}", "port": port}

    def close(self) -> None:
        for svc in self.services:
            try:
                svc.close()
            except Exception:  # noqa: BLE001, S110 - best effort at the end of grading
                pass
        self.services.clear()


class _Dead(Exception):
    pass


def _q(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


# ---------------------------------------------------------------------------- grading
def _read_until_eof(fd: int, deadline: float) -> tuple[bytes, bool]:
    buf = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return bytes(buf), True
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            return bytes(buf), True
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return bytes(buf), False
        buf += chunk
        if b'"event": "end"' in chunk or b'"event": "end"' in buf[-len(chunk) - 20:]:
            return bytes(buf), False
        if len(buf) > 64 << 20:
            return bytes(buf), False


def _phases(data: bytes, m0: float, m1: float) -> dict[str, float]:
    """Milliseconds from the go line to the child's start, its collection and its end."""
    out: dict[str, float] = {}
    for ev in _parse(data.decode(errors="replace")):
        if ev.get("event") in ("start", "collected", "end") and isinstance(ev.get("t"), float):
            out.setdefault(str(ev["event"]), round((ev["t"] - m0) * 1000, 1))
    out["read"] = round((m1 - m0) * 1000, 1)
    return out


def _kill_group(pid: int) -> None:
    for sig in (signal.SIGKILL,):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def grade_host(tests: Mapping[str, FileEntry], workspace: Path, sandbox: Any,
               timeout: float, *, prestart: bool = True,
               initial: Mapping[str, FileEntry] | None = None,
               reference: Path | None = None) -> tuple[GradeResult, dict[str, Any]]:
    """Run the hidden tests on the host against ``workspace`` (a host copy) with the subject
    in ``sandbox``. Returns the result and facts for the verdict (``sandbox_dead``,
    ``requests``). ``initial``: the card's initial workspace, written (regular files and
    folders only: a symlink from the card is never followed on the host) to a folder the
    tests find under ``$INITIAL``. ``reference``: a host folder (the reference run's
    workspace, copied without following links) the tests find under ``$REFERENCE``."""
    nonce = secrets.token_hex(4)
    name, body, cp, cf = _canary_file(nonce)
    res = GradeResult(canary_pass=cp, canary_fail=cf)
    files = dict(tests)
    files[name] = FileEntry(body.encode())
    facts: dict[str, Any] = {}
    rfd = wfd = -1
    chan: GradingChannel | None = None
    root: Path | None = None
    try:
        rfd, wfd = os.pipe2(os.O_CLOEXEC)
        mine, theirs = socket.socketpair()
        chan = GradingChannel(sandbox, mine, prestart)
        t0 = time.perf_counter()
        try:
            pid, root = FORK_SERVER.spawn([wfd, theirs.fileno()])
        finally:
            os.close(wfd)
            wfd = -1
            theirs.close()
        write_tree(files, root / "tests")
        env = {"PATH": os.environ.get("PATH", os.defpath), "WORKSPACE": str(workspace),
               "HOME": str(root), "TMPDIR": str(root / "tmp"), "LANG": "C.UTF-8",
               "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        if initial is not None:
            write_tree({p: e for p, e in initial.items() if e.kind in ("file", "dir")},
                       root / "initial")
            env["INITIAL"] = str(root / "initial")
        if reference is not None:
            env["REFERENCE"] = str(reference)
        mine.sendall((json.dumps({"workspace": str(workspace), "env": env}) + "\n").encode())
        m0 = time.monotonic()
        data, res.timed_out = _read_until_eof(rfd, time.monotonic() + timeout)
        m1 = time.monotonic()
        _kill_group(pid)
        res.duration_s = time.perf_counter() - t0
        chan.thread.join(5)
        out = root / "output.txt"
        res.stderr = out.read_text(errors="replace")[-2000:] if out.exists() else ""
        _combine(_parse(data.decode(errors="replace")), res)
        res.exit_code = 0 if res.ended else None
        facts = {"sandbox_dead": chan.sandbox_dead, "requests": dict(chan.requests),
                 "subject_start_error": chan.start_error,
                 "phases_ms": _phases(data, m0, m1), "service_s": chan.service_s}
        return res, facts
    finally:
        for fd in (rfd, wfd):
            if fd >= 0:
                os.close(fd)
        if chan is not None:
            chan.close()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


__all__ = ["FORK_SERVER", "CopyLimit", "ForkServer", "GradingChannel", "copy_nofollow",
           "grade_host", "sandbox_dirs"]
