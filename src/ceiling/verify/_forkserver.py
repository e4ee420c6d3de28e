"""The grader's fork server: pytest imported once, one forked child per grading.

Started by :mod:`._host` as ``python -I _forkserver.py`` with its control socket's fd number as argument;
stdlib + pytest only, single-threaded (forking a threaded process is unsafe). It imports
pytest and its built-in plugins, loads :mod:`._plugin` and the wire format by path, then
serves requests: one datagram ``{"root", "workspace", "args", "env"}`` with two file
descriptors (the results pipe's write end, the channel to the verifier). For each it forks a
child that starts a new session, changes to ``root`` (the hidden grader folder), replaces the
environment, installs the workspace-import guard and runs ``pytest.main(args)`` with the
recorder and the subject plugin, then ``os._exit``. The server answers ``{"pid": N}`` at once;
the verifier waits on the results pipe (EOF = the child is gone) and kills the child's
process group on timeout. Zombies are reaped with SIGCHLD ignored in the server (reset to
the default in the child, which runs subprocesses).

The guard: hidden tests of a ``subject``/``files`` card must never run workspace code on the
host. An import whose module file lies under the workspace copy raises ImportError, and a
subprocess whose program or script lies there raises PermissionError (audit hook), each
saying to use ``subject.call`` / ``subject.run`` or ``runner: inprocess``.
"""

import importlib.util
import json
import os
import signal
import socket
import sys


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


HERE = os.path.dirname(os.path.abspath(__file__))
_load("ceiling_subject_wire", os.path.join(HERE, "_subject_server.py"))
PLUGIN = _load("ceiling_grader_plugin", os.path.join(HERE, "_plugin.py"))

import _pytest.config
import pytest
from _pytest.config import default_plugins

for _name in default_plugins:  # what pytest.main would import in every child
    try:
        __import__("_pytest." + _name)
    except ImportError:
        pass
import _pytest.assertion.rewrite
import _pytest.python
import _pytest.raises

sys.dont_write_bytecode = True


def _warm_up():
    """One throw-away ``pytest.main`` in the server, so every child starts with pytest's
    lazy imports, compiled patterns and caches already in memory; then freeze the heap so
    the children's garbage collections skip it (and its pages stay shared)."""
    import gc
    import tempfile

    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    with tempfile.TemporaryDirectory(prefix="ceiling-warm-") as d:
        os.mkdir(os.path.join(d, "tests"))
        with open(os.path.join(d, "tests", "test_ceiling_warm.py"), "w") as f:
            f.write("import pytest\n\n\n@pytest.mark.parametrize('x', [1, 2])\n"
                    "def test_w(x, tmp_path):\n    assert [x] == [x]\n\n\n"
                    "def test_f():\n    assert {'a': 1} == {'a': 2}\n")
        with open(os.path.join(d, "grader.ini"), "w") as f:
            f.write("[pytest]\nxfail_strict = true\n")
        null = os.open(os.devnull, os.O_WRONLY)
        saved = os.dup(1), os.dup(2)
        os.dup2(null, 1)
        os.dup2(null, 2)
        try:
            pytest.main(["-p", "no:cacheprovider", "--noconftest", "-q", "-c",
                         os.path.join(d, "grader.ini"), "--rootdir", os.path.join(d, "tests"),
                         "--basetemp", os.path.join(d, "tmp"), os.path.join(d, "tests")])
        except BaseException:  # noqa: BLE001, S110 - a failed warm-up only costs speed
            pass
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in (null, *saved):
                os.close(fd)
    sys.modules.pop("test_ceiling_warm", None)
    os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    gc.collect()
    gc.freeze()


class _NoWorkspaceImports:
    """A meta-path finder that refuses modules found under the workspace copy."""

    def __init__(self, root):
        self.root = root.rstrip("/") + "/"

    def find_spec(self, name, path=None, target=None):
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        origin = getattr(spec, "origin", None) or ""
        locs = list(getattr(spec, "submodule_search_locations", None) or [])
        if spec is not None and any(os.path.realpath(p).startswith(self.root)
                                    for p in [origin, *locs] if p):
            raise ImportError(f"hidden tests of a runner 'subject'/'files' card may not import "
                              f"workspace code ({name}); use subject.call('{name}:...') or "
                              "acceptance.runner: inprocess")


def _guard(workspace):
    root = os.path.realpath(workspace).rstrip("/") + "/"
    sys.meta_path.insert(0, _NoWorkspaceImports(root))

    def under(p):
        try:
            return os.path.realpath(os.fsdecode(p)).startswith(root)
        except (TypeError, ValueError):
            return False

    def hook(event, args):
        if event in ("subprocess.Popen", "os.posix_spawn", "os.exec"):
            exe, argv = args[0], args[1]
            argv = list(argv) if isinstance(argv, (list, tuple)) else [argv]
            first = [exe, *argv[:1]]
            interp = any(os.path.basename(os.fsdecode(a or "")).startswith(("python", "sh",
                                                                          "bash", "dash"))
                         for a in first if isinstance(a, (str, bytes)))
            cand = first + (list(argv[1:3]) if interp else [])
            if any(isinstance(a, (str, bytes, os.PathLike)) and under(a) for a in cand if a):
                raise PermissionError("hidden tests of a runner 'subject'/'files' card may not "
                                      "execute workspace files on the host; use subject.run")
    sys.addaudithook(hook)


def _prepare(root, ini):
    """In a fresh child: the grader folder and pytest's parsed configuration, ahead of time."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.chdir(root)
    out = os.open("output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    rec = PLUGIN.Recorder(-1)
    config = _pytest.config._prepareconfig(list(ARGS), plugins=[rec, PLUGIN])
    return rec, config


def _run(rec, config, results_fd, channel_fd):
    """The request arrived: wait for the verifier's go (tests written), then run."""
    os.set_inheritable(results_fd, False)
    os.set_inheritable(channel_fd, False)
    with os.fdopen(os.dup(channel_fd), "rb") as f:
        go = json.loads(f.readline(1 << 20) or b"{}")
    if not go:
        return
    os.environ.clear()
    os.environ.update(go["env"])
    import tempfile

    tempfile.tempdir = None  # the warm-up cached /tmp: tmp_path must follow this TMPDIR
    PLUGIN.configure(channel_fd, go["workspace"])
    rec.fd = results_fd
    rec.emit(event="start")
    _guard(go["workspace"])
    try:
        rc = config.hook.pytest_cmdline_main(config=config)
    finally:
        rec.emit(event="end", rc=-1)
    sys.stdout.flush()
    sys.stderr.flush()
    return rc


def _ready_child(ini):
    """Fork a child that prepares a grading and waits for its request; (pid, root, sock)."""
    import tempfile

    root = tempfile.mkdtemp(prefix="ceiling-grade-")
    os.mkdir(os.path.join(root, "tests"), 0o700)
    os.mkdir(os.path.join(root, "tmp"), 0o700)
    with open(os.path.join(root, "grader.ini"), "w") as f:
        f.write(ini)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            mine.close()
            rec, config = _prepare(root, ini)
            _data, fds, _f, _a = socket.recv_fds(theirs, 16, 4)
            theirs.close()
            if len(fds) == 2:
                _run(rec, config, fds[0], fds[1])
            else:
                import shutil

                shutil.rmtree(root, ignore_errors=True)
        except BaseException:  # noqa: BLE001 - the child must never return into the loop
            code = 70
        finally:
            os._exit(code)
    theirs.close()
    return pid, root, mine


ARGS: list[str] = []


def main():
    ctl = socket.socket(fileno=int(sys.argv[1]))
    boot = json.loads(sys.argv[2])
    ARGS.extend(boot["args"])
    _warm_up()
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    ready = _ready_child(boot["ini"])
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(ctl, 1 << 20, 4)
        except InterruptedError:
            continue
        if not data:
            return
        pid, root, sock = ready
        try:
            socket.send_fds(sock, [b"go"], fds)
        except OSError:
            pid = -1
        sock.close()
        for fd in fds:
            os.close(fd)
        ctl.send(json.dumps({"pid": pid, "root": root}).encode())
        ready = _ready_child(boot["ini"])


if __name__ == "__main__":
    main()
