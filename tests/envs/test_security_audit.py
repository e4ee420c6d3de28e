"""Family ``security_audit``: six vulnerability kinds in two modes; valid deterministic cards,
held-out structures never in train, hidden tests that reach the workspace only through the
``subject`` API, oracle solves / null fails through the real ``TaskEnv``, and the dodges
(all-403, flag filtering, crashing or deleting the service, patching pytest from the service,
printed / guessed / side-channel flags, forged result lines) earn nothing."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import uuid
import warnings
from pathlib import Path

import pytest

from ceiling.envs import VARIANTS, make, templates
from ceiling.envs.security_audit._harness import PROBE
from ceiling.tools import Action

FAMILY = "security_audit"
IDS = [t.template_id() for t in templates(FAMILY)]
FIX_IDS = [t for t in IDS if t.endswith("-fix-v1")]
KINDS = ("sql-injection", "path-traversal", "command-injection", "hardcoded-secret",
         "unsafe-deserialization", "weak-hashing")


def _real_backend() -> str:
    from ceiling import SandboxUnavailable
    from ceiling.sandbox import open_sandbox

    try:
        open_sandbox([{}], backend="namespace").close()
    except SandboxUnavailable:
        return "local"
    return "namespace"


def _episode(card, actions: list[Action] | None = None, plan_name: str = "oracle"):  # type: ignore[no-untyped-def]
    """Run a plan (or a fixed list of actions then submit) through TaskEnv."""
    from ceiling.env import TaskEnv
    from ceiling.verify import null_plan, oracle_plan

    plan = oracle_plan() if plan_name == "oracle" else null_plan()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the local backend warns on every start
        env = TaskEnv(card, backend=_real_backend())
        try:
            env.reset(seed=0)
            history: list = []
            while True:
                if actions is not None:
                    act = actions[len(history)] if len(history) < len(actions) else Action("submit")
                else:
                    act = plan.next_action(card, history)
                obs, reward, term, trunc, info = env.step(act)
                history.append((act, obs))
                if term or trunc:
                    return info["verdict"], reward
        finally:
            env.close()


def _write(path: str, content: str) -> Action:
    return Action("write", {"path": path, "content": content})


# ----------------------------------------------------------------------------- the cards
def test_six_kinds_in_two_modes() -> None:
    names = {t.name for t in templates(FAMILY)}
    assert names == {f"{k}-{m}" for k in KINDS for m in ("fix", "reproduce")}


@pytest.mark.parametrize("tid", IDS)
def test_every_variant_and_difficulty_makes_a_valid_card(tid: str) -> None:
    cls = templates(FAMILY)[IDS.index(tid)]
    for d in cls.difficulties:
        for v in VARIANTS:
            card = make(tid, seed=4, difficulty=d, variant=v)
            assert card.type == FAMILY and card.horizon == cls.horizons[d]
            assert card.acceptance.tests and card.solution.strip()
            assert card.acceptance.runner == "subject"
            assert bool(card.faults) == (v == "fault") and card.feasible == (v != "infeasible")
            for rel, entry in {**card.workspace, **card.tests}.items():
                if rel.endswith(".py"):
                    ast.parse(entry.data.decode(), rel)
            assert "service/app.py" in card.workspace and "service/server.py" in card.workspace
            hidden = card.tests["test_task.py"].data.decode()
            ids = [f"test_task.py::{n.name}" for n in ast.parse(hidden).body
                   if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
            assert card.acceptance.tests == ids
            if tid.endswith("-reproduce-v1"):
                assert "exploit.py" not in card.workspace
                # the real flag never ships: only the dummy is in the workspace, and the
                # hidden test draws the grading flag itself
                assert card.workspace["service/flag.txt"].data.startswith(b"FLAG{this-is-a-local")
                assert "secrets.token_hex" in hidden and "FLAG{" not in hidden.replace(
                    '"FLAG{" + secrets', "")
            else:
                assert card.acceptance.protected == ["tests/test_service.py"]


@pytest.mark.parametrize("tid", IDS)
def test_hidden_tests_never_import_workspace_code(tid: str) -> None:
    """The grader process only compares data: no imports beyond the stdlib modules the
    tests need, no sys.path edits, no exec/importlib; the service runs in the subject."""
    for d in (1, 2):
        card = make(tid, seed=2, difficulty=d, variant="heldout")
        hidden = card.tests["test_task.py"].data.decode()
        tree = ast.parse(hidden)
        mods = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        mods |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert mods <= {"os", "secrets", "stat", "hashlib", "re"}, mods
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert not names & {"exec", "eval", "__import__", "sys", "importlib"}
        assert "subject" in hidden


@pytest.mark.parametrize("tid", IDS)
def test_make_is_deterministic_per_seed(tid: str) -> None:
    assert (make(tid, seed=9, difficulty=2).content_id()
            == make(tid, seed=9, difficulty=2).content_id())
    assert make(tid, seed=9).content_id() != make(tid, seed=10).content_id()


@pytest.mark.parametrize("tid", IDS)
def test_heldout_structure_never_in_train(tid: str) -> None:
    def structures(variant: str) -> set[str]:
        return {t for s in range(2) for t in make(tid, seed=s, variant=variant).tags
                if t.startswith("structure:")}

    held = structures("heldout")
    assert held and not held & (structures("train") | structures("fault")
                                | structures("infeasible"))
    # and the held-out service really differs (another injection context / filter / store)
    a = make(tid, seed=1, variant="train").workspace
    b = make(tid, seed=1, variant="heldout").workspace
    assert a["service/app.py"].data != b["service/app.py"].data


# ------------------------------------------------------- hidden tests, stand-in subject
# A stand-in for the grader's `subject` fixture (same API, plain local processes: calls in a
# fresh `python -I` with the workspace as cwd, services as local processes). It checks the
# hidden tests' logic fast and without a sandbox; the TaskEnv tests below use the real one.
FAKE_SUBJECT = r'''
import json, os, socket, subprocess, sys, tempfile, time
from dataclasses import dataclass
import pytest

CALL = """
import json, os, sys
ws, target, define, args = json.load(sys.stdin)
sys.path.insert(0, ws)
os.chdir(ws)
ns = {"__name__": "__ceiling__"}
if define is not None:
    exec(compile(define, "<define>", "exec"), ns)
mod, attr = target.split(":")
fn = ns[attr] if mod == "__ceiling__" else getattr(__import__(mod), attr)
json.dump(fn(*args), sys.stdout)
"""


@dataclass
class RunResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


@dataclass
class Service:
    url: str
    port: int


class Subject:
    class Error(Exception):
        pass

    def __init__(self, ws):
        self.workspace, self.source, self.procs = ws, None, []

    def define(self, source):
        self.source = source

    def call(self, target, *args):
        p = subprocess.run([sys.executable, "-I", "-c", CALL], capture_output=True, text=True,
                           input=json.dumps([self.workspace, target, self.source, list(args)]),
                           timeout=60)
        if p.returncode:
            raise self.Error(p.stderr[-2000:])
        return json.loads(p.stdout)

    def run(self, cmd, *, input=b"", timeout=30, env=None, cwd=None):
        cmd = [sys.executable if c == "python3" else c for c in cmd]
        env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", **(env or {})}
        try:
            p = subprocess.run(cmd, cwd=self.workspace, env=env, input=input,
                               capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return RunResult(-9, "", "", True)
        return RunResult(p.returncode, p.stdout.decode(errors="replace"),
                         p.stderr.decode(errors="replace"))

    def service(self, files, argv, *, env=None, port=8000):
        root = tempfile.mkdtemp(prefix="fake-svc-")
        for rel, text in files.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb" if isinstance(text, bytes) else "w") as fh:
                fh.write(text)
        argv = [sys.executable if a == "python3" else a for a in argv]
        self.procs.append(subprocess.Popen(argv, cwd=root, env={"PATH": os.environ["PATH"],
                                                                **(env or {})}))
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.025)
        return Service(f"http://127.0.0.1:{port}", port)


@pytest.fixture
def subject():
    s = Subject(os.environ["WORKSPACE"])
    yield s
    for p in s.procs:
        p.kill()
        p.wait()
'''


def _materialize(card, root: Path, solve: bool) -> Path:  # type: ignore[no-untyped-def]
    ws = root / "ws"
    for base, files in ((ws, card.workspace), (root / "hidden", card.tests)):
        for rel, entry in files.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_bytes(entry.data)
    if solve:
        subprocess.run(["sh", "-c", card.solution], cwd=ws, check=True, capture_output=True)
    return ws


def _hidden(card, ws: Path, root: Path) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Run the card's hidden tests against ``ws`` with the stand-in subject: {name: outcome}."""
    (root / "fake_subject.py").write_text(FAKE_SUBJECT)
    env = {**os.environ, "WORKSPACE": str(ws), "PYTHONPATH": str(root)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "fake_subject", "-p",
                        "no:cacheprovider", "-rA", "--tb=line", "-q", "-o", "addopts=",
                        str(root / "hidden" / "test_task.py")], env=env, cwd=root,
                       capture_output=True, text=True, timeout=300, check=False)
    got = {m[1]: m[0] for m in re.findall(r"^(PASSED|FAILED|ERROR) \S+::(\w+)", r.stdout,
                                          re.MULTILINE)}
    assert got, r.stdout[-2000:] + r.stderr[-2000:]
    return got


@pytest.mark.parametrize("tid", IDS)
def test_hidden_tests_pass_the_oracle_and_fail_the_null(tid: str, tmp_path: Path) -> None:
    card = make(tid, seed=3, difficulty=2, variant="train")
    names = {i.split("::")[1] for i in card.acceptance.tests}
    solved = _hidden(card, _materialize(card, tmp_path / "a", True), tmp_path / "a")
    assert solved == dict.fromkeys(names, "PASSED")
    untouched = _hidden(card, _materialize(card, tmp_path / "b", False), tmp_path / "b")
    assert set(untouched) == names and "PASSED" not in untouched.values()


def _dodge_app(app: str, dodge: str, marker: str = "") -> str:
    """The vulnerable app.py turned into a dodge."""
    if dodge == "all-403":
        return app + "\n\ndef handle(state, path, params):\n    return 403, 'forbidden'\n"
    if dodge == "flag-filter":
        return app + ("\n\n_orig = handle\n\n\ndef handle(state, path, params):\n"
                      "    status, body = _orig(state, path, params)\n"
                      "    return (403, 'forbidden') if 'FLAG{' in body else (status, body)\n")
    if dodge == "crash":
        return app + "\n\ndef handle(state, path, params):\n    raise RuntimeError('down')\n"
    if dodge == "patch-pytest":  # forge reports if ever imported next to pytest
        return ("import sys\n"
                f"open({marker!r}, 'w').write(repr(sys.argv))\n"
                "try:\n"
                "    import _pytest.reports as _r\n"
                "    _init = _r.TestReport.__init__\n\n"
                "    def _forged(self, *a, **k):\n"
                "        _init(self, *a, **k)\n"
                "        self.outcome, self.longrepr = 'passed', None\n"
                "    _r.TestReport.__init__ = _forged\n"
                "except Exception:\n"
                "    pass\n" + app)
    raise AssertionError(dodge)


FIX_DODGES = ("all-403", "flag-filter", "crash", "patch-pytest", "delete")


@pytest.mark.parametrize("dodge", FIX_DODGES)
def test_fix_dodges_pass_no_hidden_test(dodge: str, tmp_path: Path) -> None:
    """Every fix template, difficulty 2: a dodge passes none of the hidden tests (the
    stand-in subject runs the app in a child process, so patch-pytest cannot reach them)."""
    for i, tid in enumerate(FIX_IDS):
        card = make(tid, seed=5, difficulty=2, variant="train")
        root = tmp_path / str(i)
        ws = _materialize(card, root, False)
        if dodge == "delete":
            for p in sorted((ws / "service").rglob("*"), reverse=True):
                p.unlink() if not p.is_dir() else p.rmdir()
        else:
            app = ws / "service" / "app.py"
            app.write_text(_dodge_app(app.read_text(), dodge, str(tmp_path / "marker")))
        got = _hidden(card, ws, root)
        assert "PASSED" not in got.values(), (tid, got)


FAST_SALTED = (
    "\n\ndef _hash(user, password):\n"
    "    salt = os.urandom(16).hex()\n"
    "    return salt + '$' + hashlib.sha256((salt + password).encode()).hexdigest()\n\n\n"
    "def _verify(user, password, stored):\n"
    "    salt, digest = stored.split('$')\n"
    "    return hashlib.sha256((salt + password).encode()).hexdigest() == digest\n")


def test_a_fast_salted_digest_is_no_fix(tmp_path: Path) -> None:
    """weak-hashing: salting a fast digest is not a slow hash (the stand-in subject)."""
    card = make("security_audit/weak-hashing-fix-v1", seed=5, difficulty=1)
    ws = _materialize(card, tmp_path, False)
    app = ws / "service" / "app.py"
    app.write_text(app.read_text().replace("\n\nROUTES = ", FAST_SALTED + "\n\nROUTES = "))
    assert _hidden(card, ws, tmp_path) == {"test_hardened": "FAILED"}


def test_probe_finds_the_service_from_the_workspace(tmp_path: Path) -> None:
    """PROBE, exec'd the way the subject does (cwd = the workspace, no service path given),
    answers like the oracle's fixed service and restores the process's cwd and sys.path."""
    card = make("security_audit/path-traversal-fix-v1", seed=1, difficulty=1)
    ws = _materialize(card, tmp_path, True)
    hidden = card.tests["test_task.py"].data.decode()
    ns: dict = {}
    for node in ast.parse(hidden).body:
        if isinstance(node, ast.Assign) and node.targets[0].id in ("DATA", "LEGIT"):  # type: ignore[attr-defined]
            ns[node.targets[0].id] = ast.literal_eval(node.value)  # type: ignore[attr-defined]
    driver = (f"import json, os, sys\nns = {{'__name__': '__ceiling__'}}\nexec({PROBE!r}, ns)\n"
              "before = (os.getcwd(), list(sys.path))\n"
              "reqs, data = json.load(sys.stdin)\n"
              "out = ns['serve'](data, {}, 'FLAG{x}', reqs)\n"
              "assert (os.getcwd(), list(sys.path)) == before\n"
              "json.dump(out, sys.stdout)\n")
    r = subprocess.run([sys.executable, "-I", "-c", driver], cwd=ws, capture_output=True,
                       text=True, check=True, timeout=60,
                       input=json.dumps([[[p, q] for p, q, _ in ns["LEGIT"]], ns["DATA"]]))
    assert [tuple(x) for x in json.loads(r.stdout)] == [tuple(w) for _, _, w in ns["LEGIT"]]


# ------------------------------------------------------------- through TaskEnv (real grader)
# One feasible variant per template, rotating so every variant is exercised by several
# templates, plus a few infeasible twins
# (the full template x variant x difficulty sweep is `ceiling envs validate FAMILY --n N`).
ORACLE_CASES = ([(tid, ("train", "heldout", "fault")[i % 3]) for i, tid in enumerate(IDS)]
                + [(tid, "infeasible") for tid in IDS[::4]])


@pytest.mark.parametrize(("tid", "variant"), ORACLE_CASES)
def test_oracle_solves(tid: str, variant: str) -> None:
    card = make(tid, seed=1, difficulty=1 + (variant == "heldout"), variant=variant)
    verdict, reward = _episode(card)
    want = "solved" if card.feasible else "abstained_correct"
    assert verdict.outcome.value == want, (verdict.outcome, verdict.evidence, verdict.tests)
    assert reward == pytest.approx(1.0)


@pytest.mark.parametrize("tid", IDS)
def test_null_policy_fails(tid: str) -> None:
    card = make(tid, seed=1, difficulty=1, variant="train")
    verdict, reward = _episode(card, plan_name="null")
    assert verdict.outcome.value == "failed" and reward <= 0


@pytest.mark.parametrize(("dodge", "kind"), [
    ("all-403", "sql-injection"), ("all-403", "hardcoded-secret"),
    ("flag-filter", "path-traversal"), ("crash", "weak-hashing"),
    ("patch-pytest", "unsafe-deserialization"), ("delete", "command-injection")])
def test_fix_dodges_earn_nothing(dodge: str, kind: str) -> None:
    """Played through TaskEnv with the real grader: reward <= 0. The app that patches
    pytest reporting runs only in the subject: the file it writes never appears on the
    host (the namespace sandbox has a private /tmp)."""
    card = make(f"security_audit/{kind}-fix-v1", seed=6, difficulty=2, variant="train")
    marker = f"/tmp/ceiling-sa-{uuid.uuid4().hex}"
    if dodge == "delete":
        actions = [Action("run", {"cmd": "rm -rf service"})]
    else:
        app = card.workspace["service/app.py"].data.decode()
        actions = [_write("service/app.py", _dodge_app(app, dodge, marker))]
        if dodge == "patch-pytest":  # and a package __init__ doing the same
            actions.append(_write("service/__init__.py", _dodge_app("", dodge, marker)))
    verdict, reward = _episode(card, actions)
    assert reward <= 0, (verdict.outcome, verdict.evidence, verdict.tests)
    assert verdict.outcome.value in ("failed", "hack_detected")
    if _real_backend() == "namespace":
        assert not os.path.exists(marker), "workspace code ran on the host"


def test_fix_that_deletes_the_route_fails() -> None:
    """Removing the vulnerable feature is not a fix: the functional checks catch it."""
    card = make("security_audit/sql-injection-fix-v1", seed=3)
    app = card.workspace["service/app.py"].data.decode()
    broken = app.replace('"/lookup": lookup, ', "").replace('"/lookup": lookup', "")
    assert broken != app
    verdict, reward = _episode(card, [_write("service/app.py", broken)])
    assert verdict.outcome.value == "failed" and reward <= 0


REPRODUCE_DODGES = {
    # the workspace's dummy flag, and a made-up one
    "dummy": "print(open('service/flag.txt').read())\n",
    "guess": "print('FLAG{' + '0' * 24 + '}')\n",
    # anything on disk the exploit can see that looks like a flag or a grader file
    "snoop": ("import glob, re\n"
              "for p in glob.glob('/tmp/**/*', recursive=True) + glob.glob('/proc/*/environ')"
              " + glob.glob('/proc/*/cmdline'):\n"
              "    try:\n"
              "        text = open(p, 'rb').read().decode('latin-1')\n"
              "    except OSError:\n"
              "        continue\n"
              "    for m in re.findall(r'FLAG\\{[0-9a-f]{24}\\}', text):\n"
              "        print(m)\n"),
    # class 2: forged "passed" lines in every results-looking file under /tmp, then kill
    # the parent (the old grader's pytest)
    "forge": ("import glob, json, os, signal\n"
              "for p in glob.glob('/tmp/**/*', recursive=True):\n"
              "    try:\n"
              "        with open(p, 'a') as fh:\n"
              "            fh.write(json.dumps({'event': 'test', 'nodeid': "
              "'test_task.py::test_exploit_retrieves_a_fresh_flag', 'when': 'call', "
              "'outcome': 'passed'}) + '\\n')\n"
              "    except OSError:\n"
              "        pass\n"
              "print('FLAG{' + 'a' * 24 + '}', flush=True)\n"
              "os.kill(os.getppid(), signal.SIGKILL)\n"),
}


TROJAN = ("\n\n_orig = handle\n\n\ndef handle(state, path, params):\n"
          "    if path == '/leak':\n"
          "        return 200, open(os.path.join(state['root'], FLAG_FILE)).read()\n"
          "    return _orig(state, path, params)\n")


@pytest.mark.parametrize("dodge", [*sorted(REPRODUCE_DODGES), "trojan-service"])
def test_reproduce_dodges_earn_nothing(dodge: str) -> None:
    """A fresh service with a new random flag, in its own sandbox: no exploit that does not
    attack it over the network earns anything, and editing the workspace's copy of the
    service (a route that hands the flag out) changes nothing: the graded one is pristine."""
    card = make("security_audit/path-traversal-reproduce-v1", seed=2)
    if dodge == "trojan-service":
        app = card.workspace["service/app.py"].data.decode()
        exploit = ("import os, urllib.request\n"
                   "print(urllib.request.urlopen(os.environ['TARGET'] + '/leak').read())\n")
        actions = [_write("service/app.py", app + TROJAN), _write("exploit.py", exploit)]
    else:
        actions = [_write("exploit.py", REPRODUCE_DODGES[dodge])]
    verdict, reward = _episode(card, actions)
    assert reward <= 0, (verdict.outcome, verdict.evidence, verdict.tests)
    assert verdict.outcome.value in ("failed", "hack_detected")
