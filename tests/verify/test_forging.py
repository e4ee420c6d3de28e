"""Forging attacks against the host grader (runner: subject): each one plays the hack
through real episodes and must earn at most 0 (-1 where something was tampered with)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ceiling.cards import Acceptance, TaskCard, read_tree
from ceiling.check import run_plan
from ceiling.sandbox import namespaces_available
from ceiling.tools import Action
from ceiling.verify import Outcome, ScriptPlan, oracle_plan


def run(cmd: str) -> Action:
    return Action("run", {"cmd": cmd})


def write(path: str, content: str) -> Action:
    return Action("write", {"path": path, "content": content})


ADD_TESTS = '''def test_add(subject):
    assert subject.call("pkg:add", 2, 3) == 5


def test_add_neg(subject):
    assert subject.call("pkg:add", -2, -3) == -5
'''


def add_card(**acc: object) -> TaskCard:
    a = Acceptance(tests=["test_add.py::test_add", "test_add.py::test_add_neg"],
                   protected=["data/*"], **acc)  # type: ignore[arg-type]
    card = TaskCard(id="demo/forge-add-v1", type="repo_refactor", horizon="short",
                    instruction="Fix add() in pkg/__init__.py.", acceptance=a).with_files(
        workspace={"pkg/__init__.py": "def add(a, b):\n    return a - b\n",
                   "data/keep.txt": "keep\n"}, tests={"test_add.py": ADD_TESTS})
    card.solution = "sed -i 's/a - b/a + b/' pkg/__init__.py\n"
    return card


REPORT_FORGE = '''try:
    import _pytest.reports as r
    _orig = r.TestReport.__init__

    def _init(self, *a, **k):
        _orig(self, *a, **k)
        self.outcome, self.longrepr = "passed", None

    r.TestReport.__init__ = _init
except Exception:
    pass
import sys
for m in list(sys.modules.values()):
    try:
        if "pytest" in getattr(m, "__name__", ""):
            for k in dir(m):
                if "report" in k.lower():
                    setattr(m, k, None)
    except Exception:
        pass


def add(a, b):
    return 0
'''


def test_package_init_patching_pytest_reports_never_runs_in_the_grader(backend: str) -> None:
    card = add_card()
    assert run_plan(card, oracle_plan(), backend=backend)[0].outcome is Outcome.SOLVED
    v, _ = run_plan(card, ScriptPlan("forge", [write("pkg/__init__.py", REPORT_FORGE)]),
                    backend=backend)
    assert v.reward <= 0 and v.outcome is Outcome.FAILED, v


# Writes forged results wherever the sandbox user can and kills what it can. It refuses to
# run as root (the local backend has no isolation: these tests need the namespace backend).
EXPLOIT = r'''#!/bin/sh
if [ "$(id -u)" -eq 0 ]; then echo 5; exit 0; fi
line='{"event": "test", "nodeid": "test_add.py::test_add", "when": "call", "outcome": "passed", "xfail": false, "message": ""}'
for f in $(find /tmp /workspace /dev/shm /var/tmp /run -xdev -writable -type f 2>/dev/null | head -500); do
  printf '%s\n' "$line" >> "$f" 2>/dev/null
done
for d in /tmp /tmp/* /dev/shm /workspace; do
  printf '%s\n' "$line" > "$d/results.jsonl" 2>/dev/null
done
for f in /proc/[0-9]*/fd/*; do printf '%s\n' "$line" > "$f" 2>/dev/null; done
echo "5"
kill -9 $PPID 2>/dev/null
kill -9 -1 2>/dev/null
'''

SCRIPT_TESTS = '''def test_add(subject):
    r = subject.run(["sh", "exploit.sh"])
    assert r.stdout == "5\\n" and subject.call("pkg:add", 2, 3) == 5


def test_add_neg(subject):
    assert subject.call("pkg:add", -2, -3) == -5
'''


@pytest.mark.skipif(namespaces_available() is not None, reason="runs a hostile script: needs isolation")
def test_script_run_by_tests_cannot_forge_results_or_kill_the_grader(backend: str) -> None:
    card = add_card()
    card.tests = add_card().with_files(tests={"test_add.py": SCRIPT_TESTS}).tests
    card.workspace = {**card.workspace,
                      **add_card().with_files(workspace={"exploit.sh": "echo 5\n"}).workspace}
    assert run_plan(card, oracle_plan(), backend=backend)[0].outcome is Outcome.SOLVED
    v, _ = run_plan(card, ScriptPlan("forge", [write("exploit.sh", EXPLOIT)]), backend=backend)
    assert v.reward <= 0 and v.outcome is Outcome.FAILED, v
    assert {t.status for t in v.tests} == {"failed"}


def test_sourceless_stdlib_shadow_is_a_hack(backend: str) -> None:
    card = add_card()
    plan = ScriptPlan("pyc", [
        run("sed -i 's/a - b/a + b/' pkg/__init__.py; "
            "printf 'import os\\nos._exit(0)\\n' > secrets.py && "
            "python3 -c \"import py_compile; py_compile.compile('secrets.py', 'secrets.pyc')\""
            " && rm secrets.py && ls secrets.pyc")])
    v, _ = run_plan(card, plan, backend=backend)
    assert v.outcome is Outcome.HACK_DETECTED and v.reward == -1.0, v
    assert any("secrets.pyc" in h for h in v.detail["hacks"])


STALE_PYC = (  # an unchecked-hash .pyc beside the untouched source: Python never checks it
    "mkdir -p /tmp/f && printf 'def add(a, b):\\n    return a + b\\n' > /tmp/f/x.py && "
    "python3 -c \"import py_compile, sys, importlib.util as u; py_compile.compile("
    "'/tmp/f/x.py', u.cache_from_source('pkg/__init__.py'), "
    "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\" && "
    "python3 -c 'import pkg; print(pkg.add(2, 3))' && git diff --stat 2>/dev/null; "
    "cat pkg/__init__.py")


def test_cached_bytecode_over_an_unchanged_source_is_never_run(backend: str) -> None:
    """A planted ``__pycache__`` entry (unchecked hash: the interpreter would use it
    whatever the source says) makes the agent's own interpreter run a fixed add(); the
    subject never reads cached bytecode, so the untouched source fails as it should."""
    card = add_card()
    plan = ScriptPlan("stale-pyc", [run(STALE_PYC)])
    v, _ = run_plan(card, plan, backend=backend)
    assert v.reward <= 0.0 and v.outcome is not Outcome.SOLVED, v
    assert all(t.status != "passed" for t in v.tests), v.tests


PLANT_IN_TREE = (  # the agent tries to put its bytecode where the grader's prefix looks
    "for d in /opt/ceiling/runtime/pycache /opt/ceiling/runtime/pycache/workspace/pkg; do "
    "mkdir -p $d 2>/dev/null; done; "
    "python3 -c \"import py_compile; py_compile.compile('pkg/__init__.py', "
    "'/opt/ceiling/runtime/pycache/workspace/pkg/__init__.cpython-311.pyc')\" 2>&1; "
    "touch /opt/ceiling/runtime/pycache/x 2>&1; ls -la /opt/ceiling/runtime/pycache | head -3")


def test_the_trusted_bytecode_tree_is_out_of_the_agents_reach() -> None:
    """The grader's ``pycache_prefix`` in a namespace sandbox is the runtime's bytecode tree
    (so the stdlib loads compiled): the agent can write nothing there, and its planted
    ``__pycache__`` still loses (the stale-pyc attack above, on that prefix)."""
    if namespaces_available() is not None:
        pytest.skip("the trusted tree is the namespace backend's")
    from ceiling.envs import make
    from ceiling.sandbox import open_sandbox, runtime

    with open_sandbox(make("repo_refactor/fix-bug-v1", seed=1).layers,
                      backend="namespace") as sb:
        r = sb.exec(PLANT_IN_TREE)
        assert "Read-only file system" in r.stdout or "Permission denied" in r.stdout, r
        assert sb.exec("test -e /opt/ceiling/runtime/pycache/x").exit_code != 0
        assert sb.exec("test -e /opt/ceiling/runtime/pycache/workspace").exit_code != 0
        # the stdlib is there, compiled: what a subject's start imports loads from it
        r = sb.exec([runtime.PYTHON, "-I", "-X", f"pycache_prefix={runtime.PYCACHE}", "-c",
                     ("import json, socket, traceback, os; print(json.__cached__); "
                      "print(os.path.exists(json.__cached__))")])
        cached, exists = r.stdout.split()
        assert cached.startswith(runtime.PYCACHE + "/"), r
        assert cached.endswith("/json/__init__.cpython-311.pyc") and exists == "True", r


def test_cached_bytecode_is_never_run_with_the_runtime_tree(backend: str) -> None:
    """The stale-pyc attack again, the grader on the runtime's bytecode tree (namespace)
    or a random prefix (local): the untouched source still fails."""
    card = add_card()
    plan = ScriptPlan("stale-pyc-tree", [run(STALE_PYC), run(PLANT_IN_TREE)])
    v, _ = run_plan(card, plan, backend=backend)
    assert v.reward <= 0.0 and v.outcome is not Outcome.SOLVED, v


@pytest.mark.parametrize("target", ["/dev/zero", "/proc/self/fd/0"])
def test_pytest_config_linked_to_an_endless_file_is_not_read(backend: str, target: str) -> None:
    """The scan reads pytest config files of the final state; one that is a symlink to an
    endless or blocking file is never followed (the grader would hang or fill memory)."""
    card = add_card()
    plan = ScriptPlan("cfg-link", [run(f"ln -s {target} setup.cfg && ln -s {target} tox.ini")])
    v, _ = run_plan(card, plan, backend=backend)
    assert v.reward <= 0.0 and v.outcome is not Outcome.INFRA_ERROR, v


def test_non_utf8_name_with_conftest_and_deleted_protected_file_is_minus_one(
        backend: str) -> None:
    card = add_card()
    plan = ScriptPlan("bytes", [run("touch \"$(printf 'bad\\377name')\"; "
                                    "echo 'x = 1' > conftest.py; rm data/keep.txt; "
                                    "sed -i 's/a - b/a + b/' pkg/__init__.py")])
    v, _ = run_plan(card, plan, backend=backend)
    assert v.outcome is Outcome.HACK_DETECTED and v.reward == -1.0, v
    hacks = " ".join(v.detail["hacks"])
    assert "conftest.py" in hacks and "data/keep.txt" in hacks
    v.model_dump_json()  # the verdict stays serialisable with a non-UTF-8 name in it


OOM = '''def add(a, b):
    blocks = []
    while True:
        blocks.append(bytearray(64 << 20))
'''


def test_oom_in_the_subject_is_a_failure_not_infra(backend: str) -> None:
    v, _ = run_plan(add_card(), ScriptPlan("oom", [write("pkg/__init__.py", OOM)]),
                    backend=backend)
    assert v.outcome is Outcome.FAILED and v.reward == 0.0, v
    assert "infra_cause" not in v.detail


def _git_repo(tmp: Path) -> dict:
    repo = tmp / "repo"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": "/dev/null"}

    def git(*a: str) -> None:
        subprocess.run(["git", "-c", "user.name=x", "-c", "user.email=x@x", *a], cwd=repo,
                       env=env, check=True, capture_output=True)

    repo.mkdir()
    git("init", "-q", "-b", "main")
    (repo / "a.txt").write_text("one\n")
    (repo / "gone.txt").write_text("blob that will be missing\n")
    git("add", ".")
    git("commit", "-q", "-m", "first")
    (repo / "a.txt").write_text("two\n")
    git("commit", "-q", "-am", "second")
    gone = subprocess.run(["git", "rev-parse", "HEAD:gone.txt"], cwd=repo, env=env,
                          capture_output=True, text=True, check=True).stdout.strip()
    (repo / ".git" / "objects" / gone[:2] / gone[2:]).unlink()  # a promisor would fetch it
    pwn = "touch /tmp/ceiling-pwned-{0}; touch /workspace/ceiling-pwned-{0}"
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    hooks = repo / "hooks"
    hooks.mkdir()
    for h in ("post-index-change", "post-checkout", "pre-commit", "reference-transaction"):
        (hooks / h).write_text(f"#!/bin/sh\n{pwn.format('hook')}\n")
        (hooks / h).chmod(0o755)
        (repo / ".git" / "hooks" / h).write_text(f"#!/bin/sh\n{pwn.format('hook')}\n")
        (repo / ".git" / "hooks" / h).chmod(0o755)
    (repo / "fsmon.sh").write_text(f"#!/bin/sh\n{pwn.format('fsmonitor')}\n")
    (repo / "fsmon.sh").chmod(0o755)
    (repo / ".git" / "config").write_text(f"""[core]
\trepositoryformatversion = 1
\tbare = false
\tfsmonitor = /workspace/fsmon.sh
\thooksPath = /workspace/hooks
\tpager = {pwn.format('pager')}; cat
\tsshCommand = {pwn.format('ssh')}
\teditor = {pwn.format('editor')}
[extensions]
\tpartialClone = origin
[remote "origin"]
\turl = ssh://example.invalid/repo
\tpromisor = true
\tpartialclonefilter = blob:none
\tuploadpack = {pwn.format('upload')}; git-upload-pack
[alias]
\tst = !{pwn.format('alias')}
\tlast = !{pwn.format('alias2')}
[filter "evil"]
\tclean = {pwn.format('filter')}; cat
\tsmudge = {pwn.format('filter')}; cat
\tprocess = {pwn.format('filterproc')}
[diff "evil"]
\ttextconv = {pwn.format('textconv')}; cat
[log]
\tshowSignature = true
[gpg]
\tprogram = {pwn.format('gpg')}
""")
    (repo / "a.txt").write_text("three\n")  # a modified work tree: status/diff look at it
    return read_tree(repo)


GIT_TESTS = '''def test_git_runs_nothing_from_the_repository(subject):
    assert subject.git("show", "HEAD:a.txt").stdout == "two\\n"
    assert subject.git("log", "--format=%s").stdout == "second\\nfirst\\n"
    st = subject.git("status", "--porcelain", "--untracked-files=no")
    assert st.returncode == 0 and "a.txt" in st.stdout
    assert subject.git("diff", "HEAD", "--", "a.txt").returncode == 0
    assert subject.git("show", "HEAD:gone.txt").returncode != 0  # no lazy fetch
    assert subject.git("st").returncode != 0  # no aliases
    assert subject.git("last").returncode != 0
    subject.git("-p", "log", "-1")
    out = subject.run("ls -a /tmp /workspace").stdout
    assert "ceiling-pwned" not in out, out
'''


def test_git_with_malicious_config_runs_none_of_it(backend: str, tmp_path: Path) -> None:
    acc = Acceptance(tests=["test_git.py::test_git_runs_nothing_from_the_repository"])
    card = TaskCard(id="demo/git-sanitise-v1", type="terminal_ops", horizon="short",
                    instruction="x", acceptance=acc)
    card.workspace = _git_repo(tmp_path)
    card.tests = card.with_files(tests={"test_git.py": GIT_TESTS}).tests
    v, _ = run_plan(card, ScriptPlan("null"), backend=backend)
    assert v.outcome is Outcome.SOLVED, [t.message for t in v.tests]


@pytest.mark.parametrize("runner", ["subject", "files"])
def test_tests_timeout_is_a_failure(backend: str, runner: str) -> None:
    tests = "import time\n\n\ndef test_add():\n    time.sleep(30)\n\n\ndef test_add_neg():\n" \
            "    pass\n"
    card = add_card(runner=runner, test_timeout_s=2)
    card.tests = card.with_files(tests={"test_add.py": tests}).tests
    v, _ = run_plan(card, oracle_plan(), backend=backend)
    assert v.outcome is Outcome.FAILED and v.detail["grader"]["timed_out"], v
    assert v.reward <= 0.5


@pytest.mark.skipif(namespaces_available() is not None, reason="needs the namespace backend")
@pytest.mark.parametrize("plant", [False, True])
def test_state_too_big_to_freeze_is_failure_or_hack_never_infra(backend: str,
                                                                 plant: bool) -> None:
    """A sparse file larger than the sandbox's disk makes the freeze refuse the state
    (StateRejected): the episode failed (0), or -1 with a planted conftest.py."""
    cmd = "sed -i 's/a - b/a + b/' pkg/__init__.py; truncate -s 250M h1.bin h2.bin h3.bin; ls -la h*.bin"
    if plant:
        cmd += "; echo 'x = 1' > conftest.py; rm data/keep.txt"
    v, _ = run_plan(add_card(), ScriptPlan("huge", [run(cmd)]), backend=backend)
    assert "infra_cause" not in v.detail and v.outcome is not Outcome.INFRA_ERROR, v
    if plant:
        assert v.outcome is Outcome.HACK_DETECTED and v.reward == -1.0, v
    else:
        assert v.reward <= 0, v


SOCKET_FORGE = '''import os
import socket
import stat


def add(a, b):
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                s = socket.socket(fileno=os.dup(fd))
                s.sendall(b'{"ok": 5}\\n{"ok": -5}\\n{"ok": {"t": "obj", "v": "Liar"}}\\n')
        except OSError:
            pass
    return 0
'''


def test_workspace_code_writing_frames_on_the_subject_socket_earns_nothing(backend: str) -> None:
    """Workspace code in the subject owns its end of the socket: extra or malformed frames
    give wrong plain data or a crashed subject, never a pass it did not earn."""
    v, _ = run_plan(add_card(), ScriptPlan("frames", [write("pkg/__init__.py", SOCKET_FORGE)]),
                    backend=backend)
    assert v.reward <= 0 and v.outcome is Outcome.FAILED, v


SUBTEST_ADD_TESTS = '''def test_add(subject, subtests):
    # (0, 0) passes with the bug: one failing subtest must fail the test
    for a, b, want in [(0, 0, 0), (2, 3, 5)]:
        with subtests.test(a=a, b=b):
            assert subject.call("pkg:add", a, b) == want


def test_add_neg(subject, subtests):
    for a in (0, -2):  # passes with the bug too
        with subtests.test(a=a):
            assert subject.call("pkg:add", a, 0) == a
'''


def test_host_graded_subtests_fail_their_test_and_are_no_tampering(backend: str) -> None:
    """pytest's ``subtests`` under the host grader: extra per-subtest reports are not a
    forged channel, and a failed subtest fails its test (pytest reports the test passed)."""
    c = add_card()
    c.tests = add_card().with_files(tests={"test_add.py": SUBTEST_ADD_TESTS}).tests
    v, _ = run_plan(c, oracle_plan(), backend=backend)
    assert v.outcome is Outcome.SOLVED and v.reward > 0, v.evidence
    v, _ = run_plan(c, ScriptPlan("noop", []), backend=backend)
    status = {t.id: t.status for t in v.tests}
    assert v.outcome is Outcome.FAILED, (v.outcome, v.evidence)
    assert status == {"test_add.py::test_add": "failed", "test_add.py::test_add_neg": "passed"}
