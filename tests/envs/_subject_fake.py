"""A stand-in for the grader's ``subject`` fixture, to run generated hidden tests fast.

Only for these generator tests: workspace code (the generators' own oracle output) is
imported into the test process, which the real grader never does. It follows the documented
API (``call``, ``define``, ``remote``, ``run``, ``git``, ``read``) closely enough to check that
the hidden tests a generator writes are right: the oracle passes them, the untouched
workspace fails them. What it does not reproduce: the process boundary (results are checked
to be plain data instead), timeouts, and the sandbox.
"""

from __future__ import annotations

import importlib
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PLAIN = (type(None), bool, int, float, str, bytes)


class SubjectFailure(Exception):
    pass


class SubjectError(SubjectFailure):
    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.type, self.message, self.traceback = type(exc).__name__, str(exc), ""


class SubjectTimeout(SubjectFailure):
    pass


class SubjectCrashed(SubjectFailure):
    pass


@dataclass
class RunResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


def _plain(v: Any) -> Any:
    if type(v) in PLAIN:
        return v
    if type(v) in (list, tuple, set, frozenset):
        return type(v)(_plain(x) for x in v)
    if type(v) is dict:
        return {_plain(k): _plain(x) for k, x in v.items()}
    raise SubjectError(TypeError(f"not plain data: {type(v).__name__}"))


class FakeSubject:
    Error, Timeout, Crashed, Failure = SubjectError, SubjectTimeout, SubjectCrashed, SubjectFailure

    def __init__(self, ws: Path) -> None:
        self.workspace = str(ws)
        self._tops = {p.name.removesuffix(".py") for p in ws.iterdir()}
        self._purge()
        sys.path.insert(0, self.workspace)
        importlib.invalidate_caches()

    def _purge(self) -> None:
        for k in [k for k in sys.modules if k.split(".")[0] in self._tops | {"__ceiling__"}]:
            del sys.modules[k]

    def close(self) -> None:
        self._purge()
        while self.workspace in sys.path:
            sys.path.remove(self.workspace)

    def remote(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *a: _plain(fn(*_plain(a)))

    def define(self, source: str) -> None:
        mod = type(sys)("__ceiling__")
        exec(compile(source, "<__ceiling__>", "exec"), mod.__dict__)  # noqa: S102
        sys.modules["__ceiling__"] = mod

    def call(self, target: str, *args: Any, **kwargs: Any) -> Any:
        mod, _, attr = target.partition(":")
        try:
            obj: Any = importlib.import_module(mod)
            for part in attr.split("."):
                obj = getattr(obj, part)
            out = obj(*args, **kwargs)
        except Exception as e:  # noqa: BLE001
            raise SubjectError(e) from None
        return _plain(out)

    def run(self, cmd: str | list[str], *, input: bytes = b"", timeout: float = 30,
            env: dict[str, str] | None = None, cwd: str | None = None) -> RunResult:
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        try:
            p = subprocess.run(argv, input=input, capture_output=True, timeout=timeout,
                               cwd=cwd or self.workspace, check=False,
                               env={"PATH": os.environ["PATH"], "HOME": self.workspace,
                                    "LANG": "C.UTF-8", **(env or {})})
        except subprocess.TimeoutExpired:
            return RunResult(-9, "", "", True)
        return RunResult(p.returncode, p.stdout.decode(errors="replace"),
                         p.stderr.decode(errors="replace"))

    def git(self, *args: str) -> RunResult:
        """git as the grader runs it: a copy of HEAD, refs, packed-refs, index and objects
        with a fresh config, the workspace as work tree, no system or global config."""
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = Path(self.workspace) / ".git", Path(tmp) / "git"
            dst.mkdir()
            for name in ("objects", "refs"):
                if (src / name).is_dir() and not (src / name).is_symlink():
                    shutil.copytree(src / name, dst / name, symlinks=True)
            for name in ("HEAD", "packed-refs", "index"):
                if (src / name).is_file() and not (src / name).is_symlink():
                    shutil.copy(src / name, dst / name)
            shutil.rmtree(dst / "objects" / "info", ignore_errors=True)
            (dst / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = false\n")
            p = subprocess.run(["git", "-c", "core.hooksPath=/dev/null", "-c",
                                "core.fsmonitor=false", "-c", "safe.directory=*", *args],
                               capture_output=True, check=False, cwd=self.workspace,
                               env={"PATH": os.environ["PATH"], "HOME": tmp,
                                    "GIT_DIR": str(dst), "GIT_WORK_TREE": self.workspace,
                                    "GIT_CONFIG_NOSYSTEM": "1", "GIT_NO_LAZY_FETCH": "1",
                                    "GIT_CONFIG_GLOBAL": os.devnull})
        return RunResult(p.returncode, p.stdout.decode(errors="replace"),
                         p.stderr.decode(errors="replace"))

    def exists(self, path: str) -> bool:
        return (Path(self.workspace) / path).exists()

    def read(self, path: str) -> bytes:
        return (Path(self.workspace) / path).read_bytes()


def run_hidden(sources: dict[str, bytes], ws: Path) -> dict[str, bool]:
    """Run every ``test_*`` function of the hidden files against ``ws``; node id -> passed.
    Functions that take ``subject`` get a :class:`FakeSubject`."""
    results: dict[str, bool] = {}
    old = os.environ.get("WORKSPACE")
    os.environ["WORKSPACE"] = str(ws)
    cwd = os.getcwd()
    try:
        for fname, data in sources.items():
            ns: dict[str, Any] = {"__name__": f"hidden_{fname[:-3]}"}
            exec(compile(data.decode(), fname, "exec"), ns)  # noqa: S102 (generated tests)
            for name, fn in list(ns.items()):
                if not (name.startswith("test_") and callable(fn)):
                    continue
                subject = FakeSubject(ws)
                try:
                    fn(subject) if "subject" in inspect.signature(fn).parameters else fn()
                    results[f"{fname}::{name}"] = True
                except Exception:  # noqa: BLE001 (any error fails the test)
                    results[f"{fname}::{name}"] = False
                finally:
                    subject.close()
    finally:
        os.chdir(cwd)
        if old is None:
            os.environ.pop("WORKSPACE", None)
        else:
            os.environ["WORKSPACE"] = old
    return results
