"""The subject API (runner: subject): plain data across the process boundary, errors,
timeouts, crashes, remote callbacks, run/read/exists/define, and the strict wire decoder."""

from __future__ import annotations

import math

import pytest

from ceiling.cards import Acceptance, TaskCard
from ceiling.check import run_plan
from ceiling.sandbox import namespaces_available
from ceiling.tools import Action
from ceiling.verify import Outcome, ScriptPlan, oracle_plan
from ceiling.verify import _subject_server as wire

APP = '''import os
import time


class Liar:
    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


class Sneaky(int):
    def __eq__(self, other):
        return True


def ident(x):
    return x


def add(a, b):
    return a - b


def liar():
    return Liar()


def sneaky_int():
    return Sneaky(3)


def boom(msg):
    raise KeyError(msg)


def sleep(s):
    time.sleep(s)
    return s


def die():
    os._exit(3)


def apply(fn, xs):
    return [fn(x) for x in xs]


def pid():
    return os.getpid()
'''

HIDDEN = r'''import math
import os
import pathlib

import pytest

VALUES = [None, True, False, 0, -7, 2**80, 1.5, "héllo\x00", b"\x00\xff", [1, [2]], (1, (2,)),
          {"a": 1}, {1: "x", (2, 3): [4], None: b"y", frozenset({1}): 2.5}, {1, "2", (3,)},
          frozenset({b"z"}), [], (), {}, set(), frozenset()]


def test_roundtrip(subject):
    for v in VALUES:
        got = subject.call("app:ident", v)
        assert got == v and type(got) is type(v), v
    assert math.isnan(subject.call("app:ident", float("nan")))
    assert subject.call("app:ident", float("-inf")) == float("-inf")
    assert subject.call("app:ident", x=(1, 2)) == (1, 2)


def test_add(subject):
    assert subject.call("app:add", 2, 3) == 5


def test_liar_cannot_come_back(subject):
    with pytest.raises(subject.Error) as e:
        subject.call("app:liar")
    assert "cannot send" in e.value.message
    with pytest.raises(subject.Error):
        subject.call("app:sneaky_int")


def test_exception_is_data(subject):
    with pytest.raises(subject.Error) as e:
        subject.call("app:boom", "nope")
    assert e.value.type == "KeyError" and "nope" in e.value.message
    assert "boom" in e.value.traceback
    assert isinstance(e.value, subject.Failure)


def test_timeout_then_fresh(subject):
    subject.timeout = 1.0
    first = subject.call("app:pid")
    with pytest.raises(subject.Timeout):
        subject.call("app:sleep", 5)
    subject.timeout = 20.0
    assert subject.call("app:sleep", 0) == 0
    assert subject.call("app:pid") != first


def test_crash_then_fresh(subject):
    with pytest.raises(subject.Crashed):
        subject.call("app:die")
    assert subject.call("app:ident", 1) == 1


def test_remote_counts(subject):
    seen = []

    def count(x):
        seen.append(x)
        return x * 2

    assert subject.call("app:apply", subject.remote(count), [1, 2, 3]) == [2, 4, 6]
    assert seen == [1, 2, 3]


def test_define(subject):
    subject.define("def twice(f, x):\n    return f(f(x))\n")
    assert subject.call("__ceiling__:twice", subject.remote(lambda v: v + 1), 1) == 3


def test_run_read_exists(subject):
    r = subject.run(["python3", "-c", "import app, sys; print(app.ident(4)); "
                     "sys.stderr.write('e')"])
    assert (r.returncode, r.stdout, r.stderr, r.timed_out) == (0, "4\n", "e", False)
    r = subject.run("cat > x.txt; echo done", input=b"data")
    assert r.stdout == "done\n"
    assert subject.read("x.txt") == b"data"
    assert subject.read_text("app.py").startswith("import os")
    assert subject.exists("app.py") and not subject.exists("nope.txt")
    assert subject.run("sleep 5", timeout=0.5).timed_out


def test_workspace_is_a_copy(subject):
    ws = pathlib.Path(os.environ["WORKSPACE"])
    assert subject.workspace == str(ws)
    assert (ws / "app.py").read_text().startswith("import os")


def test_restart(subject):
    a = subject.call("app:pid")
    subject.restart()
    assert subject.call("app:pid") != a
'''

IDS = ["test_roundtrip", "test_add", "test_liar_cannot_come_back", "test_exception_is_data",
       "test_timeout_then_fresh", "test_crash_then_fresh", "test_remote_counts", "test_define",
       "test_run_read_exists", "test_workspace_is_a_copy", "test_restart"]


def subject_card() -> TaskCard:
    acc = Acceptance(tests=[f"test_subject_api.py::{i}" for i in IDS], test_timeout_s=60)
    card = TaskCard(id="demo/subject-api-v1", type="repo_refactor", horizon="short",
                    instruction="Fix add() in app.py.", acceptance=acc).with_files(
        workspace={"app.py": APP}, tests={"test_subject_api.py": HIDDEN})
    card.solution = "sed -i 's/return a - b/return a + b/' app.py\n"
    return card


def test_subject_api_end_to_end(backend: str) -> None:
    card = subject_card()
    assert card.acceptance.runner == "subject"  # the default
    v, _ = run_plan(card, oracle_plan(), backend=backend)
    bad = {t.id: t.message for t in v.tests if t.status != "passed"}
    assert v.outcome is Outcome.SOLVED, (bad, v.evidence, v.detail.get("stderr"))
    assert v.detail["grading"] == "host"
    # the null plan fails only the add test: everything else is the API itself
    v, _ = run_plan(card, ScriptPlan("null"), backend=backend)
    failed = [t.id.split("::")[1] for t in v.tests if t.status != "passed"]
    assert failed == ["test_add"] and v.outcome is Outcome.FAILED


def test_hidden_tests_cannot_import_workspace_code(backend: str) -> None:
    """A subject card whose hidden test imports workspace code on the host gets an
    ImportError, never the workspace module (which would run agent code in the grader)."""
    tests = ("import os, sys\nsys.path.insert(0, os.environ['WORKSPACE'])\n\n\n"
             "def test_import():\n    import app\n    assert app.add(1, 1) == 2\n")
    acc = Acceptance(tests=["test_imp.py::test_import"])
    card = TaskCard(id="demo/import-v1", type="repo_refactor", horizon="short",
                    instruction="x", acceptance=acc).with_files(
        workspace={"app.py": "def add(a, b):\n    return a + b\n"},
        tests={"test_imp.py": tests})
    v, _ = run_plan(card, ScriptPlan("null"), backend=backend)
    assert v.outcome is Outcome.FAILED
    assert "may not import workspace code" in v.tests[0].message


# ---------------------------------------------------------------------------- wire format
@pytest.mark.parametrize("value", [
    None, True, 0, -1, 2**100, 0.5, "", "x\udcff"[:1], b"", b"\x00", [1, "a"], (1,), {"a": [1]},
    {(1, 2): {3}}, {1, 2}, frozenset({(1,)}), [[[[]]]], {None: None}, float("inf")])
def test_wire_roundtrip(value: object) -> None:
    back = wire.decode(wire.loads(wire.dumps({"ok": wire.encode(value)}))["ok"])
    assert back == value and type(back) is type(value)


def test_wire_nan() -> None:
    assert math.isnan(wire.decode(wire.encode(float("nan"))))


@pytest.mark.parametrize("text", [
    b'{"ok": {"a": 1}}',  # a bare JSON object is not plain data (dicts are tagged)
    b'{"ok": {"t": "pickle", "v": "x"}}',  # unknown tag
    b'{"ok": NaN}',  # non-finite literal
    b'{"ok": {"t": "set", "v": [[1]]}}',  # unhashable set member
    b'{"ok": {"t": "dict", "v": [[[1], 2]]}}',  # unhashable key
    b'{"ok": {"t": "bytes", "v": "!!"}}',  # not base64
    b'{"ok": {"t": "remote", "v": 1}}',  # the subject cannot send callables
    b'{"ok": {"t": "float", "v": "1e999"}}',
    b'{"ok": {"t": "tuple", "v": [], "x": 1}}',
])
def test_wire_decoder_rejects(text: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.decode(wire.loads(text)["ok"])


def test_wire_caps() -> None:
    deep: object = []
    for _ in range(wire.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(wire.WireError):
        wire.encode(deep)
    with pytest.raises(wire.WireError):
        wire.decode(wire.loads(("[" * 200 + "]" * 200).encode().join([b'{"ok":', b"}"]))["ok"])
    with pytest.raises(wire.WireError):
        wire.loads(b" " * (wire.MAX_BYTES + 1))


def test_wire_refuses_subclasses_and_objects() -> None:
    class MyInt(int):
        pass

    for bad in (MyInt(1), object(), Action("run"), {1: object()}):
        with pytest.raises(wire.WireError):
            wire.encode(bad)


SERVICE_TESTS = '''def test_service(subject):
    svc = subject.service({"srv.py": SRV}, ["python3", "srv.py"], port=8123)
    assert svc.url == "http://127.0.0.1:8123"
    r = subject.run(["python3", "-c", "import urllib.request as u; "
                     "print(u.urlopen('http://127.0.0.1:8123/x').read().decode())"])
    assert r.stdout == "secret-body /x\\n", r
    # the service's files live in its own sandbox: the subject cannot read them
    assert not subject.exists("srv.py")
    assert "secret-body" not in subject.run("cat /workspace/srv.py /srv.py 2>&1; ls /tmp").stdout


SRV = """
import http.server


class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("secret-body " + self.path).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


http.server.HTTPServer(("127.0.0.1", 8123), H).serve_forever()
"""
'''


@pytest.mark.skipif(namespaces_available() is not None, reason="needs the namespace backend")
def test_service_shares_the_network_not_the_files(backend: str) -> None:
    acc = Acceptance(tests=["test_svc.py::test_service"])
    card = TaskCard(id="demo/service-v1", type="security_audit", horizon="short",
                    instruction="x", acceptance=acc).with_files(
        workspace={"app.py": "x = 1\n"}, tests={"test_svc.py": SERVICE_TESTS})
    v, _ = run_plan(card, ScriptPlan("null"), backend=backend)
    assert v.outcome is Outcome.SOLVED, [t.message for t in v.tests]
