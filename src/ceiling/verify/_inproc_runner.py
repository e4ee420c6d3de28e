"""The in-process runner (``runner: inprocess`` / ``sandbox``): pytest inside the grading
sandbox, importing workspace code, hardened. Shipped as a file and run as
``python -I run.py ROOT -- PYTEST_ARGS`` by the verifier, with stdout as the results channel.

Before anything of the workspace can run:

1. **Results channel.** fd 1 (a memfd the host holds) is duplicated to a random high,
   close-on-exec descriptor; fd 1 becomes stderr. Every record is one JSON line with a
   sequence number (``seq``) and an HMAC-SHA256 (``mac``) under a key the host sends on
   stdin (read, then stdin closed, before any workspace code runs), so the host rejects
   duplicated, reordered or foreign lines even when they are written to the right
   descriptor with the right sequence number.
   The runner makes itself non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``) first: a program
   that workspace code starts (a fresh interpreter, free of the audit hook) cannot open
   the runner's ``/proc/PID/mem`` to read the key or rewrite its memory.
2. **Bytecode.** From the session start (before collection imports anything of the
   workspace) ``sys.pycache_prefix`` points at a fresh folder: ``__pycache__`` folders in
   the workspace are never read (a planted ``.pyc`` of a protected test would otherwise
   replace its source).
3. **Audit hook** (PEP 578; cannot be removed): blocks and records ``sys.settrace``,
   ``sys.setprofile``, ``sys._current_frames``, ``gc.get_objects/get_referrers/
   get_referents``, every ``ctypes.*`` event (loading native code), listing or opening
   ``/proc/*/fd``, ``/dev/fd``, ``/proc/*/mem`` and ``/proc/*/environ``, signals to this
   process or its group (``os.kill``, ``os.killpg``, ``signal.pthread_kill``), and frame
   access through ``tb_frame``/``gi_frame``/``cr_frame``/``f_code`` from workspace code into
   frames of pytest, pluggy or this runner.
4. **Identity snapshot** of every function and class (and class attribute) in pytest's,
   pluggy's and this runner's modules, and of the registered plugins and hook
   implementations; checked after every test and at the end. A difference is recorded.

Records: ``start``, ``collected``, ``collect_error``, ``test``, ``eq_hack`` (an object whose
``==`` answers for anything, defined in the workspace, met in an assertion), ``tamper``
(``what``), ``end``. The host treats any ``tamper`` record, a broken sequence or a missing
``end`` together with missing tests as evidence.

What this does **not** guarantee: workspace code runs in this process, so code written
against this runner specifically (walking frames through ``f_back``, which no audit event
reports, and mutating objects in place without replacing them) can still forge results; see
docs/verifier.md. Cards that need a guarantee use ``runner: subject``.
"""

import os
import sys


def _main():
    import ctypes
    import hashlib
    import hmac
    import json
    import random

    # not dumpable: no other process of the sandbox uid (a program that workspace code
    # starts, free of this audit hook) can open /proc/<this pid>/mem, fd or environ
    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise SystemExit("ceiling in-process grader: prctl(PR_SET_DUMPABLE, 0) failed")
    root = sys.argv[1]
    args = sys.argv[sys.argv.index("--") + 1:]
    # the record key arrives on stdin (never in argv or the environment) before anything of
    # the workspace runs; stdin is then closed
    key = sys.stdin.buffer.readline().strip()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    out_fd = os.dup(1)
    high = random.randrange(300, 900)
    os.dup2(out_fd, high)
    os.close(out_fd)
    os.set_inheritable(high, False)
    os.dup2(2, 1)
    sys.dont_write_bytecode = True
    me = os.getpid()
    pgid = os.getpgid(0)
    state = {"seq": 0, "flags": set(), "current": "", "ws": ""}
    ws = os.path.realpath(os.environ.get("WORKSPACE", "/workspace")).rstrip("/") + "/"
    state["ws"] = ws

    def emit(**rec):
        rec["seq"] = state["seq"]
        state["seq"] += 1
        body = json.dumps(rec, sort_keys=True)
        rec["mac"] = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
        data = (json.dumps(rec) + "\n").encode()
        while data:
            data = data[os.write(high, data):]

    def flag(what):
        if what not in state["flags"]:
            state["flags"].add(what)
            try:
                emit(event="tamper", what=what, nodeid=state["current"])
            except Exception:  # noqa: BLE001, S110 - a broken channel shows as missing records
                pass

    here = os.path.realpath(__file__)

    def machinery(filename):
        f = filename or ""
        return ("/_pytest/" in f or "/pluggy/" in f or "/pytest/" in f
                or f == here)

    def workspace_caller():
        """Whether the code that raised the event (two frames up: this hook's caller is
        ``hook``) is the workspace's, directly or through ``inspect``/``traceback``, whose
        helpers hand frames back to their caller."""
        f = sys._getframe(2)
        while f is not None and os.path.basename(f.f_code.co_filename) in (
                "inspect.py", "traceback.py"):
            f = f.f_back
        return f is not None and f.f_code.co_filename.startswith(state["ws"])

    fd_paths = ("/proc/self/fd", "/dev/fd", "/proc/thread-self/fd", f"/proc/{me}/fd")
    frame_attrs = ("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_code")
    active = [False]

    def hook(event, a):
        if active[0]:
            return
        active[0] = True
        try:
            bad = None
            if event in ("sys.settrace", "sys.setprofile", "sys._current_frames",
                         "gc.get_objects", "gc.get_referrers", "gc.get_referents") \
                    or event.startswith("ctypes."):
                bad = event
            elif event in ("os.listdir", "os.scandir", "open"):
                p = a[0] if a else ""
                if isinstance(p, int):
                    p = ""
                p = os.fsdecode(p) if isinstance(p, (str, bytes)) else ""
                if p.startswith(fd_paths) or (p.startswith("/proc/") and p.rstrip("/").endswith(
                        ("/mem", "/environ", "/fd"))) or "/fd/" in p and p.startswith("/proc/"):
                    bad = f"{event} {p}"
            elif event in ("os.kill", "os.killpg", "signal.pthread_kill"):
                target = a[0] if a else None
                if target in (me, 0, -1, -me, pgid) or (
                        event == "signal.pthread_kill"):
                    bad = f"{event} {target}"
            elif event == "object.__setattr__" and len(a) >= 2 and a[1] == "__code__" \
                    and workspace_caller():
                bad = "code of a function replaced (__code__)"
            elif event == "sys._getframe" and a and workspace_caller() and machinery(
                    getattr(getattr(a[0], "f_code", None), "co_filename", "")):
                bad = "frame access sys._getframe"
            elif event == "object.__getattr__" and len(a) >= 2 and a[1] in frame_attrs:
                target = a[0] if a[1] == "f_code" else getattr(a[0], a[1], None)
                code = getattr(target, "f_code", None)
                caller = sys._getframe(1).f_code.co_filename
                if caller.startswith(state["ws"]) and code is not None and machinery(
                        getattr(code, "co_filename", "")):
                    bad = f"frame access {a[1]}"
            if bad:
                flag(bad)
                raise RuntimeError(f"ceiling in-process grader: {bad} is not allowed while "
                                   "the hidden tests run")
        finally:
            active[0] = False

    sys.addaudithook(hook)
    emit(event="start")

    import _pytest.assertion.rewrite as _ar
    import _pytest.config
    import pytest
    for _n in _pytest.config.default_plugins:
        try:
            __import__("_pytest." + _n)
        except ImportError:
            pass
    import unittest  # noqa: F401 - watched below: a project's TestCase tests run through it

    import pluggy
    from _pytest.unittest import TestCaseFunction

    watched = [m for n, m in list(sys.modules.items())
               if m is not None and (n in ("pytest", "unittest") or n.startswith(
                   ("_pytest", "pluggy", "unittest.")))]

    def snapshot():
        snap = {}
        for m in watched:
            for k, v in list(vars(m).items()):
                if callable(v):
                    snap[(m.__name__, k)] = id(v)
                    if isinstance(v, type) and getattr(v, "__module__", "") == m.__name__:
                        for ck, cv in list(vars(v).items()):
                            snap[(m.__name__, k, ck)] = id(cv)
        return snap

    base = {}
    hooks_base = {}

    def hook_ids(config):
        out = {}
        for name in ("pytest_runtest_makereport", "pytest_runtest_logreport",
                     "pytest_runtest_protocol", "pytest_runtest_call", "pytest_report_teststatus",
                     "pytest_runtest_setup", "pytest_runtest_teardown", "pytest_pyfunc_call",
                     "pytest_collectreport", "pytest_collection_modifyitems"):
            hc = getattr(config.hook, name, None)
            if hc is not None:
                out[name] = tuple(id(i.function) for i in hc.get_hookimpls())
        out["plugins"] = tuple(sorted(id(p) for p in config.pluginmanager.get_plugins()))
        return out

    tests_dir = os.path.realpath(os.path.join(root, "tests")) + "/"
    test_globals = {}  # (module, name) -> id of the value, for the hidden test modules

    def snapshot_tests():
        for n, m in list(sys.modules.items()):
            f = getattr(m, "__file__", None) or ""
            if m is not None and os.path.realpath(f).startswith(tests_dir):
                for k, v in list(vars(m).items()):  # its own functions and classes
                    if callable(v) and getattr(v, "__module__", None) == n:
                        test_globals[(n, k)] = id(v)

    def workspace_object(v):
        f = getattr(getattr(v, "__code__", None), "co_filename", None)
        if f is None:
            mod = sys.modules.get(getattr(type(v), "__module__", "") or "")
            f = getattr(mod, "__file__", None) or ""
        return os.path.realpath(f).startswith(state["ws"])

    def check(config):
        if not base:
            return
        now = snapshot()
        changed = [k for k, v in base.items() if now.get(k) != v]
        if changed:
            flag("test machinery replaced: " + ", ".join(".".join(map(str, k))
                                                         for k in changed[:5]))
        # a hidden test module's own function or class (a helper, a reference
        # implementation) rebound to something the workspace made
        for (n, k), i in list(test_globals.items()):
            v = getattr(sys.modules.get(n), k, None)
            if v is not None and id(v) != i and workspace_object(v):
                flag(f"hidden test module {n} had {k!r} replaced by workspace code")
                test_globals[(n, k)] = id(v)
        if hooks_base and config is not None and hook_ids(config) != hooks_base:
            flag("pytest hooks or plugins changed while the tests ran")

    sentinel = object()

    def agent_class(cls):
        mod = sys.modules.get(getattr(cls, "__module__", "") or "")
        f = getattr(mod, "__file__", None) if mod is not None else None
        if f is None:
            return getattr(cls, "__module__", "") not in ("builtins",) and mod is None
        return os.path.realpath(f).startswith(state["ws"])

    def agent_impl(obj, name):
        for cls in type(obj).__mro__:
            if name in vars(cls):
                return agent_class(cls)
        return False

    def probe(op, a, b):
        try:
            if op == "==":
                if bool(a == sentinel) or bool(b == sentinel):
                    return True
                return type(a) is not type(b) and (agent_impl(a, "__eq__")
                                                   or agent_impl(b, "__eq__"))
            if op == "!=":
                if not bool(a != sentinel) or not bool(b != sentinel):
                    return True
                return type(a) is not type(b) and (agent_impl(a, "__ne__")
                                                   or agent_impl(b, "__ne__"))
            if op in ("in", "not in"):
                return (op == "in" and bool(sentinel in b)) or agent_impl(b, "__contains__")
        except Exception:  # noqa: BLE001
            return False
        return False

    flagged_eq = set()
    orig_rc = _ar._call_reprcompare

    def call_reprcompare(ops, results, expls, each_obj):
        try:
            for i, op in enumerate(ops):
                if state["current"] not in flagged_eq and probe(op, each_obj[i], each_obj[i + 1]):
                    flagged_eq.add(state["current"])
                    emit(event="eq_hack", nodeid=state["current"], op=op)
        except Exception:  # noqa: BLE001, S110
            pass
        return orig_rc(ops, results, expls, each_obj)

    _ar._call_reprcompare = call_reprcompare

    # unittest's assertions compare inside unittest (``if not first == second``), where
    # pytest's assertion rewriting never looks: their arguments are probed too, with the
    # sentinel only (an object of a workspace class that equals, or contains, a fresh
    # object() answers anything). Library classes with their own __eq__/__contains__ are
    # what repo cards test, so the cross-type rule of ``probe`` does not apply here.
    import unittest as _ut

    def answers_anything(obj, dunder):
        return agent_impl(obj, dunder) and (
            bool(obj == sentinel) if dunder == "__eq__" else
            not bool(obj != sentinel) if dunder == "__ne__" else bool(sentinel in obj))

    def probe_strict(op, a, b):
        try:
            if op == "==":
                return answers_anything(a, "__eq__") or answers_anything(b, "__eq__")
            if op == "!=":
                return answers_anything(a, "__ne__") or answers_anything(b, "__ne__")
            if op == "in":
                return answers_anything(b, "__contains__")
        except Exception:  # noqa: BLE001
            return False
        return False

    def watch_assert(name, op):
        orig = getattr(_ut.TestCase, name, None)
        if orig is None:
            return

        def checked(self, first, second, *a, **k):
            try:
                if state["current"] not in flagged_eq and probe_strict(op, first, second):
                    flagged_eq.add(state["current"])
                    emit(event="eq_hack", nodeid=state["current"], op=f"{op} ({name})")
            except Exception:  # noqa: BLE001, S110
                pass
            return orig(self, first, second, *a, **k)

        checked.__name__ = checked.__qualname__ = name
        checked.__doc__ = orig.__doc__
        setattr(_ut.TestCase, name, checked)

    for _name in ("assertEqual", "assertEquals", "assertAlmostEqual", "assertCountEqual",
                  "assertSequenceEqual", "assertListEqual", "assertTupleEqual",
                  "assertDictEqual", "assertSetEqual", "assertMultiLineEqual"):
        watch_assert(_name, "==")
    for _name in ("assertNotEqual", "assertNotAlmostEqual"):
        watch_assert(_name, "!=")
    watch_assert("assertIn", "in")

    def msg(report):
        try:
            text = str(report.longrepr) if report.longrepr is not None else ""
        except Exception as e:  # noqa: BLE001
            text = f"<unprintable: {type(e).__name__}>"
        return text[-1500:]

    def sub_label(report):
        ctx = getattr(report, "context", None)
        try:
            return f"{getattr(ctx, 'msg', None) or ''} {dict(getattr(ctx, 'kwargs', {}) or {})}"[:200]
        except Exception as e:  # noqa: BLE001
            return f"<unprintable: {type(e).__name__}>"

    cfg = [None]

    class Recorder:
        @pytest.hookimpl(tryfirst=True)
        def pytest_sessionstart(self, session):
            cfg[0] = session.config
            base.update(snapshot())  # configured, nothing of the workspace imported yet
            # from here on bytecode comes only from a fresh folder: a __pycache__ planted in
            # the workspace is never read (what pytest imported so far kept its caches)
            sys.pycache_prefix = os.path.join(root, "pyc")

        def pytest_assertion_pass(self, item, lineno, orig, expl):
            pass  # its presence makes pytest evaluate comparisons of passing asserts

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_pyfunc_call(self, pyfuncitem):
            # the second record: whether the test function itself raised, taken around the
            # call before any report exists; the host checks every passing report against it
            outcome = yield
            exc = outcome.excinfo
            emit(event="ran", nodeid=pyfuncitem.nodeid, raised=exc is not None,
                 error=exc[0].__name__ if exc is not None else "")

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_runtest_call(self, item):
            # the second record for a unittest TestCase method (pytest_pyfunc_call never
            # sees those): the method itself is wrapped, so the record says whether it ran
            # and raised, whatever unittest's result object later reports
            if not isinstance(item, TestCaseFunction):
                yield
                return
            rec = {"ran": False, "error": ""}
            method = item.obj

            def recorded(*a, **k):
                rec["ran"] = True
                try:
                    return method(*a, **k)
                except BaseException as e:
                    rec["error"] = type(e).__name__
                    raise

            item.obj = recorded
            outcome = yield
            pending = getattr(item, "_excinfo", None) or []
            error = rec["error"] or (outcome.excinfo[0].__name__ if outcome.excinfo else "") \
                or ("not run" if not rec["ran"] else "") or (
                    pending[0].typename if pending else "")
            emit(event="ran", nodeid=item.nodeid, raised=bool(error), error=error)

        def pytest_runtest_logstart(self, nodeid, location):
            state["current"] = nodeid

        def pytest_collectreport(self, report):
            if report.failed:
                emit(event="collect_error", nodeid=report.nodeid, message=msg(report))

        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(self, session):
            hooks_base.update(hook_ids(session.config))
            snapshot_tests()
            emit(event="collected", ids=[i.nodeid for i in session.items])

        @pytest.hookimpl(tryfirst=True)
        def pytest_sessionfinish(self, session):
            check(session.config)  # before unconfigure undoes pytest's own patches

        def pytest_runtest_logreport(self, report):
            if "subtest" in type(report).__name__.lower():  # unittest subTest / subtests
                emit(event="subtest", nodeid=report.nodeid, outcome=report.outcome,
                     label=sub_label(report),
                     message=msg(report) if report.outcome == "failed" else "")
                return
            emit(event="test", nodeid=report.nodeid, when=report.when, outcome=report.outcome,
                 xfail=hasattr(report, "wasxfail"),
                 message=msg(report) if report.outcome != "passed" else "")
            if report.when == "teardown":
                check(cfg[0])

    del pluggy
    rc = pytest.main(args, plugins=[Recorder()])
    emit(event="end", rc=int(rc))


if __name__ == "__main__":
    _main()
