"""The holder against an agent that attacks it (issue 9, items 4-6): file tools that never
block, a timeout that always holds, close() that kills everything whatever state the holder
is in, one uid per live sandbox (per-uid kernel state does not cross), no POSIX message
queue across reset, an OOM inside an episode that kills only the agent's command, and a
killed host process that leaves nothing behind.

Every test checks the host afterwards: no holder or agent process, no cgroup, no mount.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ceiling.cards import Acceptance, Budget, TaskCard
from ceiling.sandbox import Limits, Sandbox, namespaces_available, open_sandbox
from ceiling.sandbox._uidpool import in_pool

pytestmark = pytest.mark.skipif(namespaces_available() is not None,
                                reason=f"namespace backend unavailable: {namespaces_available()}")

CG_ROOTS = [Path("/sys/fs/cgroup/pids/ceiling"), Path("/sys/fs/cgroup/memory/ceiling"),
            Path("/sys/fs/cgroup/freezer/ceiling"), Path("/sys/fs/cgroup/ceiling")]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


def _wait(cond, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return bool(cond())


class Footprint:
    """What one sandbox holds on the host: holder pids, agent pids, cgroups, its uid lock."""

    def __init__(self, sb: Sandbox) -> None:
        h = sb._h  # type: ignore[attr-defined]
        self.pids = [h.proc.pid, h.host_pid]
        self.groups = list(h.cgroup.dirs) if h.cgroup else []
        self.agents = sorted(h.cgroup.procs() - {h.proc.pid}) if h.cgroup else []
        self.uid = h.uid

    def assert_gone(self, mounts: str | None = None, by_uid: bool = True) -> None:
        everything = self.pids + self.agents
        assert _wait(lambda: not any(_alive(p) for p in everything)), \
            [p for p in everything if _alive(p)]
        assert _wait(lambda: not any(g.exists() for g in self.groups)), self.groups
        if mounts is not None:
            assert Path("/proc/self/mountinfo").read_text() == mounts
        if by_uid:  # no process of its uid is left (not for the shared 61000: others use it)
            assert not [p for p in _host_pids() if _uid_of(p) == self.uid and _alive(p)]


def _host_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def _uid_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[2])
    except OSError:
        return None
    return None


@pytest.fixture
def mounts() -> str:
    return Path("/proc/self/mountinfo").read_text()


@pytest.fixture
def small(tree: dict) -> Iterator[Sandbox]:  # type: ignore[type-arg]
    lim = Limits(memory_mb=128, max_processes=64, disk_mb=80, max_file_mb=96, cpu_s=20,
                 command_timeout_s=20, max_output_bytes=4096)
    with open_sandbox([tree], limits=lim) as s:
        yield s


# -- file tools never block ----------------------------------------------------------------------

def test_fifo_socket_and_device_on_read_write(sb: Sandbox, mounts: str) -> None:
    sb.exec("mkfifo f r; python3 -c \"import socket; s = socket.socket(socket.AF_UNIX);"
            " s.bind('sock')\"; (cat r > /dev/null &) ; sleep 0.1")
    fp = Footprint(sb)
    for path, kind in (("f", "fifo"), ("r", "fifo"), ("sock", "socket"), ("/tmp/../workspace/f",
                                                                           "fifo")):
        t0 = time.monotonic()
        with pytest.raises(PermissionError, match=rf"not a regular file \({kind}\)"):
            sb.read(path)
        with pytest.raises(PermissionError, match=r"not a regular file"):
            sb.write(path, b"data")
        assert time.monotonic() - t0 < 2
    r = sb.exec("ls -l f r sock | cut -c1; timeout 1 cat f; echo rc=$?")
    assert r.stdout.startswith("p\np\ns\n") and "rc=124" in r.stdout  # nothing was written
    sb.write("ok.txt", b"fine")
    assert sb.read("ok.txt") == b"fine"
    sb.reset()
    assert sb.exec("ls").stdout == "a.txt\nrun.sh\nsrc\n"
    sb.close()
    fp.assert_gone(mounts)


def test_huge_sparse_file_cannot_flood_the_host(small: Sandbox) -> None:
    """A sparse file costs nothing in the sandbox but a read copies its size to the host:
    RLIMIT_FSIZE stops it at max_file_mb, and PID 1 refuses reads past max(disk, file) MB."""
    r = small.exec("truncate -s 100G sparse; echo rc=$?; truncate -s 90M sparse; ls -s sparse")
    assert "rc=153" in r.stdout and "File size limit exceeded" in r.stderr  # SIGXFSZ
    t0 = time.monotonic()
    assert len(small.read("sparse")) == 90 << 20
    assert time.monotonic() - t0 < 5


def test_file_lease_does_not_block_read(sb: Sandbox) -> None:
    code = ("import fcntl, os, sys, time\nfd = os.open('leased', os.O_RDONLY)\n"
            "try:\n    fcntl.fcntl(fd, 1024, fcntl.F_RDLCK)\nexcept OSError as e:\n"
            "    print('nolease', e, flush=True); sys.exit(0)\nprint('held', flush=True)\n"
            "time.sleep(60)\n")
    sb.write("leased", b"x")
    sb.write("lease.py", code.encode())
    r = sb.exec("python3 lease.py > out 2>&1 & sleep 0.3; cat out")
    if "held" not in r.stdout:
        pytest.skip(f"no file leases here: {r.stdout}")
    t0 = time.monotonic()
    with pytest.raises(OSError, match="lease"):
        sb.write("leased", b"y")  # a write open would wait for the lease break (45 s)
    assert time.monotonic() - t0 < 2
    assert sb.exec("echo alive").stdout == "alive\n"


def test_fifo_through_taskenv_tools(tmp_path: Path) -> None:
    from ceiling.env import TaskEnv
    from ceiling.tools import Action

    c = TaskCard(id="demo/fifo-v1", type="terminal_ops", horizon="short",
                 instruction="Write hi to out.txt.", budget=Budget(max_steps=12,
                                                                     command_timeout_s=5),
                 acceptance=Acceptance(tests=["test_t.py::test_out"], runner="files"))
    c.with_files(workspace={"notes.txt": "alpha\n"},
                 tests={"test_t.py": "import os, pathlib\n\ndef test_out():\n    assert (pathlib"
                        ".Path(os.environ['WORKSPACE']) / 'out.txt').read_text() == 'hi\\n'\n"})
    env = TaskEnv(c)
    try:
        env.reset()
        fp = Footprint(env.sandbox)
        env.step(Action("run", {"cmd": "mkfifo pipe"}))
        for tool, args in (("read", {"path": "pipe"}), ("write", {"path": "pipe", "content": "x"}),
                           ("edit", {"path": "pipe", "old": "a", "new": "b"})):
            t0 = time.monotonic()
            obs, _, term, _, info = env.step(Action(tool, args))
            assert time.monotonic() - t0 < 3 and not term
            assert obs.startswith("[error]") and "not a regular file (fifo)" in obs, obs
            assert info["error"]
        obs, *_ = env.step(Action("run", {"cmd": "rm pipe; echo hi > out.txt; cat out.txt"}))
        assert obs == "hi"
        _, reward, term, _, info = env.step(Action("submit", {}))
        assert term and info["outcome"] == "solved" and reward > 0
    finally:
        env.close()
    fp.assert_gone()


def test_timeout_holds_when_pid1_cannot_answer(sb: Sandbox) -> None:
    fp = Footprint(sb)
    os.kill(fp.pids[1], signal.SIGSTOP)  # PID 1 cannot serve the kill request
    try:
        t0 = time.monotonic()
        r = sb.exec("sleep 100", timeout=0.5)
        # killed either way: -9 when the kill reaches the command's shell first, 137 (its
        # shell's status for a SIGKILLed child) when the child dies first (a loaded machine)
        assert r.timed_out and r.exit_code in (-9, 137) and time.monotonic() - t0 < 10
    finally:
        os.kill(fp.pids[1], signal.SIGCONT)
    assert sb.exec("echo alive").stdout == "alive\n"
    sb.reset()
    assert sb.read("a.txt") == b"hello\n"


# -- close kills everything ----------------------------------------------------------------------

@pytest.mark.parametrize("state", ["stopped", "frozen", "blocked"])
def test_close_kills_everything_whatever_state(tree: dict, mounts: str,  # type: ignore[type-arg]
                                               state: str) -> None:
    sb = open_sandbox([tree])
    sb.exec("sleep 1000 >/dev/null 2>&1 & setsid sleep 999 >/dev/null 2>&1 & mkfifo f")
    fp = Footprint(sb)
    assert len(fp.agents) >= 1 and all(in_pool(_uid_of(p) or 0) for p in fp.agents)
    h = sb._h  # type: ignore[attr-defined]
    if state == "stopped":
        os.kill(h.host_pid, signal.SIGSTOP)
        os.kill(h.proc.pid, signal.SIGSTOP)
    elif state == "frozen":
        assert h.cgroup is not None and h.cgroup.freeze()
    sb.close()
    fp.assert_gone(mounts)


def test_spawner_death_after_file_ops_ends_pid1(sb: Sandbox) -> None:
    """setresuid in file_op clears the parent-death signal; it must be re-armed."""
    sb.write("x.txt", b"1")
    sb.read("x.txt")
    fp = Footprint(sb)
    os.kill(fp.pids[0], signal.SIGKILL)  # the spawner, PID 1's parent
    assert _wait(lambda: not _alive(fp.pids[1]), 15)  # PID 1 shut down (not SIGKILLed by us)
    assert _wait(lambda: not any(g.exists() for g in fp.groups), 15), \
        [g for g in fp.groups if g.exists()]  # and removed the groups


HOST_SCRIPT = """
import os, sys, time
from ceiling.cards import FileEntry
from ceiling.sandbox import open_sandbox
sb = open_sandbox([{"a.txt": FileEntry.text("x")}])
sb.exec("sleep 1000 >/dev/null 2>&1 & mkfifo f")
h = sb._h
agents = sorted(h.cgroup.procs() - {h.proc.pid}) if h.cgroup else []
groups = [str(d) for d in h.cgroup.dirs] if h.cgroup else []
print(h.proc.pid, h.host_pid, h.uid, ",".join(map(str, agents)), ",".join(groups), flush=True)
time.sleep(0.5)  # let the warm spare start too
print("ready", flush=True)
time.sleep(100)
"""


def test_sigkill_of_host_process_leaves_nothing(mounts: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOST_SCRIPT], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    spawner, pid1, uid, agents, groups = proc.stdout.readline().split(" ")
    assert proc.stdout.readline() == "ready\n"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    pids = [int(spawner), int(pid1), *map(int, filter(None, agents.split(",")))]
    assert _wait(lambda: not any(_alive(p) for p in pids)), [p for p in pids if _alive(p)]
    assert _wait(lambda: not any(Path(g).exists() for g in groups.strip().split(",") if g))
    # the warm spare that process had started is gone too: no group of that process is left
    assert _wait(lambda: not [d for r in CG_ROOTS if r.is_dir() for d in r.iterdir()
                              if d.name.startswith(f"{proc.pid}-")])
    left = [p for p in _host_pids() if _uid_of(p) == int(uid) and _alive(p)]  # zombies: init's
    assert not left, [Path(f"/proc/{p}/stat").read_text() for p in left]
    lock = os.open(f"/run/ceiling-uids/{uid}.lock" if Path("/run/ceiling-uids").is_dir()
                   else f"/tmp/ceiling-uids/{uid}.lock", os.O_RDWR)
    try:  # the uid is free again
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(lock)
    assert Path("/proc/self/mountinfo").read_text() == mounts


# -- one uid per sandbox: per-uid kernel state does not cross ------------------------------------

def test_live_sandboxes_run_as_different_uids(sb: Sandbox, tree: dict) -> None:  # type: ignore[type-arg]
    with open_sandbox([tree]) as other:
        a, b = (int(s.exec("id -u").stdout) for s in (sb, other))
        assert a != b and in_pool(a) and in_pool(b)
        assert sb.exec("stat -c %u a.txt").stdout == f"{a}\n"  # the store shows as its uid
        assert other.exec("echo x >> a.txt && stat -c %u a.txt").stdout == f"{b}\n"
        # a process of one cannot signal or trace the other's even if it guessed its pid
        other.exec("sleep 100 >/dev/null 2>&1 &")
        victim = Footprint(other).agents[0]
        assert sb.exec(f"kill -9 {victim}").exit_code != 0
        assert _alive(victim)
        # the uid locks are out of reach (the sandbox's /run and /tmp are its own)
        assert sb.exec("ls /run/ceiling-uids /tmp/ceiling-uids").exit_code != 0


def test_inotify_exhaustion_does_not_cross_sandboxes(sb: Sandbox, tree: dict) -> None:  # type: ignore[type-arg]
    hog = ("import ctypes, time\nl = ctypes.CDLL(None)\nn = 0\nwhile l.inotify_init() >= 0:\n"
           "    n += 1\nprint(n, flush=True)\ntime.sleep(100)\n")
    sb.write("/tmp/hog.py", hog.encode())
    r = sb.exec("python3 /tmp/hog.py > /tmp/n & sleep 1; cat /tmp/n; python3 -c \"import ctypes;"
                " print(ctypes.CDLL(None).inotify_init())\"")
    held, own = r.stdout.split()
    assert int(held) > 0 and int(own) == -1  # this uid has none left
    with open_sandbox([tree]) as other:
        r = other.exec("python3 -c \"import ctypes; print(ctypes.CDLL(None).inotify_init())\"")
        assert int(r.stdout) >= 0  # the other sandbox's uid is not affected
    sb.reset()
    assert int(sb.exec("python3 -c \"import ctypes; print(ctypes.CDLL(None).inotify_init())\""
                       ).stdout) >= 0


MQ = ("import ctypes, os, sys\nl = ctypes.CDLL(None, use_errno=True)\n"
      "l.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]\n"
      "flags = os.O_RDWR | (os.O_CREAT if sys.argv[1] == 'create' else 0)\n"
      "fd = l.mq_open(b'/ceiling-q', flags, 0o600, None)\n"
      "print(fd if fd < 0 else 'open', ctypes.get_errno() if fd < 0 else '')\n")


def test_mqueue_does_not_survive_reset(sb: Sandbox, tree: dict) -> None:  # type: ignore[type-arg]
    sb.write("/tmp/mq.py", MQ.encode())
    assert sb.exec("python3 /tmp/mq.py create").stdout.split() == ["open"]
    assert sb.exec("python3 /tmp/mq.py open").stdout.split() == ["open"]  # it persists
    with open_sandbox([tree]) as other:  # another sandbox never sees it
        other.write("/tmp/mq.py", MQ.encode())
        assert other.exec("python3 /tmp/mq.py open").stdout.split() == ["-1", "2"]
    sb.reset()
    sb.write("/tmp/mq.py", MQ.encode())
    assert sb.exec("python3 /tmp/mq.py open").stdout.split() == ["-1", "2"]  # ENOENT


# -- the holder survives the agent's OOM ---------------------------------------------------------

FILL = ("dd if=/dev/zero of=/dev/shm/fill bs=1M count=70 2>/dev/null; python3 -c \"x = []\n"
        "while True: x.append(bytearray(8 << 20))\"")


def test_oom_kills_the_command_not_the_holder(small: Sandbox) -> None:
    fp = Footprint(small)
    r = small.exec(FILL, timeout=60)
    assert r.exit_code != 0 and not r.timed_out, r  # the hog was OOM-killed (sh reports 137)
    assert all(_alive(p) for p in fp.pids)
    r = small.exec(["python3", "-c", "x = [bytearray(8 << 20) for _ in range(100)]"], timeout=60)
    assert r.exit_code == -9  # the command itself, killed by the memory limit
    assert small.exec("echo alive").stdout == "alive\n"
    assert small.read("a.txt") == b"hello\n"
    small.reset()
    assert small.exec("ls /dev/shm | wc -l").stdout == "0\n"
    assert all(_alive(p) for p in fp.pids)


def test_oom_in_an_episode_is_a_verdict_not_infra_error() -> None:
    from ceiling.env import TaskEnv
    from ceiling.tools import Action

    c = TaskCard(id="demo/oom-v1", type="terminal_ops", horizon="short",
                 instruction="Write hi to out.txt.",
                 budget=Budget(max_steps=12, command_timeout_s=30),
                 acceptance=Acceptance(tests=["test_t.py::test_out"], runner="files"))
    c.with_files(workspace={"notes.txt": "alpha\n"},
                 tests={"test_t.py": "import os, pathlib\n\ndef test_out():\n    assert (pathlib"
                        ".Path(os.environ['WORKSPACE']) / 'out.txt').read_text() == 'hi\\n'\n"})
    env = TaskEnv(c, limits=Limits(memory_mb=128, disk_mb=80, max_file_mb=96))
    try:
        env.reset()
        fp = Footprint(env.sandbox)
        obs, *_ = env.step(Action("run", {"cmd": FILL}))
        assert "[exit" in obs
        obs, *_ = env.step(Action("read", {"path": "notes.txt"}))
        assert obs == "alpha"
        _, reward, term, _, info = env.step(Action("submit", {}))
        assert term and info["outcome"] == "failed" and reward <= 0, info
        assert all(_alive(p) for p in fp.pids)
    finally:
        env.close()
    fp.assert_gone()


def _oom_adj_lowerable() -> str:
    """Why root cannot lower ``oom_score_adj`` here (a kernel or VM that answers EIO or
    EPERM: the holder then takes its documented fallback, commands raised to 1000 after
    their start), or '' when it can (the protected set-up this test checks)."""
    probe = "echo -1000 > /proc/self/oom_score_adj && cat /proc/self/oom_score_adj"
    r = subprocess.run(["sh", "-c", probe], check=False, capture_output=True, text=True)
    return "" if r.stdout.strip() == "-1000" else (r.stderr.strip() or "the value did not take")


def test_commands_are_the_oom_killers_first_choice(sb: Sandbox) -> None:
    why = _oom_adj_lowerable()
    if why:
        pytest.skip(f"root cannot lower oom_score_adj on this machine ({why})")
    fp = Footprint(sb)
    holder = [int(Path(f"/proc/{p}/oom_score_adj").read_text()) for p in fp.pids]
    cmd = sb.exec("sleep 0.2; cat /proc/$$/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj';"
                  " echo -1 > /proc/self/oom_score_adj; echo rc=$?")
    lines = cmd.stdout.split()  # the command, then a process it forked after its start
    assert int(lines[0]) > max(holder) and int(lines[1]) > max(holder)
    assert "rc=0" not in cmd.stdout  # a command can never go below 0 (oom_score_adj_min)


# -- the uid pool ------------------------------------------------------------------------------

def test_uid_pool_leases_are_exclusive_across_processes(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    from ceiling import SandboxUnavailable
    from ceiling.sandbox import _uidpool

    # a lock folder of its own: sandboxes of other processes on this machine (a second
    # test run, a bench) hold uids of the real pool and would take "a.uid + 1" below
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o700)
    monkeypatch.setattr(_uidpool, "_dir", locks)
    a = _uidpool.acquire()
    code = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\ntry:\n"
            "    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\n"
            "except BlockingIOError:\n    print('held')\n")
    path = f"{_uidpool._lock_dir()}/{a.uid}.lock"

    def probe() -> str:  # another process tries the uid's lock
        return subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                              check=True).stdout

    try:
        assert probe() == "held\n"
        monkeypatch.setattr(_uidpool, "POOL_SIZE", 2)
        monkeypatch.setattr(_uidpool, "POOL_FIRST", a.uid)  # a pool of {a.uid, a.uid + 1}
        b = _uidpool.acquire()
        try:
            assert b.uid == a.uid + 1
            with pytest.raises(SandboxUnavailable, match="all 2 sandbox uids are in use"):
                _uidpool.acquire()
        finally:
            b.release()
    finally:
        a.release()
    assert probe() == "free\n"
    assert _uidpool.store_owner(a.uid, a.uid) == (61000, 61000)
    assert _uidpool.store_owner(0, 0) == (0, 0)


def test_without_idmapped_mounts_it_falls_back_to_the_shared_uid(
        tree: dict,  # type: ignore[type-arg]
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, mounts: str) -> None:
    from ceiling.sandbox import _launch

    monkeypatch.setattr(_launch, "IDMAP", False)
    monkeypatch.setattr(_launch, "_warned_uid", False)
    monkeypatch.setenv("CEILING_SANDBOX_POOL", "0")
    with caplog.at_level("WARNING", logger="ceiling.sandbox"), open_sandbox([tree]) as sb:
        assert sb.exec("id -u; stat -c %u a.txt; echo x >> a.txt && echo ok").stdout == \
            "61000\n61000\nok\n"
        sb.write("new.txt", b"n")
        assert sb.read("new.txt") == b"n"
        fp = Footprint(sb)
    assert "shared uid 61000" in caplog.text
    fp.assert_gone(mounts, by_uid=False)


SMALL = ("import time\nopen('/proc/self/oom_score_adj', 'w').write('0')\n"
         "x = bytearray(3 << 20)\nfor i in range(0, len(x), 4096):\n    x[i] = 1\ntime.sleep(30)\n")


def test_oom_among_small_processes_at_the_floor_spares_the_spawner(small: Sandbox) -> None:
    """The attack that killed the spawner while it lived in the memory cgroup: fill the
    tmpfs, lower every process to the floor (0) and make them all smaller than the spawner.
    The spawner is only in the sandbox's memory cgroup while it spawns."""
    fp = Footprint(small)
    h = small._h  # type: ignore[attr-defined]
    memcg = h.cgroup.memory_dir if h.cgroup else None
    if memcg is None:
        pytest.skip("no memory cgroup here")
    small.write("/tmp/small.py", SMALL.encode())
    r = small.exec("dd if=/dev/zero of=/dev/shm/fill bs=1M count=78 2>/dev/null;"
                   " echo 0 > /proc/self/oom_score_adj; for i in $(seq 40); do"
                   " python3 /tmp/small.py & done; sleep 6; echo done", timeout=20)
    assert "done" in r.stdout and all(_alive(p) for p in fp.pids), r
    assert h.proc.pid not in {int(x) for x in (memcg / "cgroup.procs").read_text().split()}
    r = small.exec("echo alive")  # answered: run, or refused while the memory is full
    assert r.stdout == "alive\n" or "memory is full" in r.stderr
    small.reset()
    assert small.read("a.txt") == b"hello\n"
    r = small.exec(["python3", "-c", "x = [bytearray(8 << 20) for _ in range(100)]"], timeout=60)
    assert r.exit_code == -9  # commands are still inside the memory limit


def test_memcg_kept_full_refuses_spawns_instead_of_losing_the_spawner(small: Sandbox) -> None:
    """The agent keeps its cgroup at the limit (tmpfs plus a loop of small processes at the
    lowest score) so that the next spawn itself triggers an OOM while the spawner is inside:
    the spawner refuses to spawn (126, a clear message) and survives; reset recovers."""
    fp = Footprint(small)
    if small._h.cgroup is None or small._h.cgroup.memory_dir is None:  # type: ignore[attr-defined]
        pytest.skip("no memory cgroup here")
    small.write("/tmp/small.py", SMALL.replace("3 << 20", "2 << 20").encode())
    small.write("/tmp/press.sh", b"echo 0 > /proc/self/oom_score_adj; while :; do"
                b" for i in $(seq 20); do python3 /tmp/small.py & done; sleep 1; done\n")
    small.exec("dd if=/dev/zero of=/dev/shm/fill bs=1M count=79 2>/dev/null;"
               " sh /tmp/press.sh >/dev/null 2>&1 & sleep 3", timeout=20)
    refused = 0
    for _ in range(20):
        r = small.exec("echo x", timeout=5)
        refused += "memory is full" in r.stderr
    assert refused > 0 and all(_alive(p) for p in fp.pids)
    small.reset()
    assert small.exec("echo ok").stdout == "ok\n" and small.read("a.txt") == b"hello\n"
