"""Security suite: each test is an attack by code running inside a namespace sandbox.

Every test hashes the host paths it targets before and after (``host_digest``; the autouse
``host_unchanged`` fixture also hashes the interpreter, ``/bin/sh``, pytest and ``/etc``
files around every test) and ends with
``assert_clean``: the sandbox answers a command and a reset brings back the initial state
with no leftover process, file, or IPC object. Targets live under ``/var/tmp`` and are
deliberately world-writable, so only the sandbox, not file permissions, protects them; the
allow-listed root does not show ``/var`` at all (``test_root_isolation.py`` binds such a
folder read-only with ``CEILING_SANDBOX_PATHS`` to attack it where it is visible).
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ceiling.cards import FileEntry
from ceiling.sandbox import LayerStore, Limits, Sandbox, namespaces_available, open_sandbox
from ceiling.sandbox._launch import POOL

pytestmark = pytest.mark.skipif(namespaces_available() is not None,
                                reason=f"namespace backend unavailable: {namespaces_available()}")

CLEAN = "hello\na.txt\nrun.sh\nsrc\n0\n"


def host_digest(*paths: str | Path) -> str:
    """Hash of paths: type, mode, owner and content of every entry below them."""
    h = hashlib.sha256()
    for root in paths:
        root = Path(root)
        items = [root] + (sorted(root.rglob("*")) if root.is_dir() and not root.is_symlink()
                          else [])
        for p in items:
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                h.update(f"{p}:missing".encode())
                continue
            h.update(f"{p}:{st.st_mode:o}:{st.st_uid}:{st.st_size}".encode())
            if stat.S_ISREG(st.st_mode) and st.st_size < (64 << 20):
                h.update(p.read_bytes())
    return h.hexdigest()


def assert_clean(sb: Sandbox) -> None:
    """The sandbox still answers, and a reset brings back exactly the initial state."""
    assert sb.exec("echo alive").stdout == "alive\n"
    sb.reset()
    r = sb.exec("cat a.txt; ls -A; find /tmp /dev/shm -xdev -mindepth 1 ! -user 0 | wc -l")
    assert r.stdout == CLEAN, r
    procs = sb.exec(["ps", "-eo", "pid=,comm="]).stdout.split("\n")
    assert [line.split()[1] for line in procs if line] == ["ceiling-init", "ps"]
    assert sb.exec("ipcs -m -q -s | grep -c 0x || true").stdout == "0\n"


HOST_PATHS = [os.path.realpath(sys.executable), os.path.realpath("/bin/sh"), "/etc/passwd",
              "/etc/shadow", "/etc/hostname", sysconfig.get_paths()["purelib"] + "/pytest"]


@pytest.fixture(autouse=True)
def host_unchanged() -> Iterator[None]:
    """Every attack also leaves the interpreter, the shell, pytest and /etc untouched."""
    before = host_digest(*HOST_PATHS)
    yield
    assert host_digest(*HOST_PATHS) == before


@pytest.fixture
def target() -> Iterator[Path]:
    """A world-writable host folder with a file and a root-only secret."""
    base = Path(tempfile.mkdtemp(prefix="ceiling-sec-", dir="/var/tmp"))
    os.chmod(base, 0o777)
    (base / "file.txt").write_text("host data\n")
    os.chmod(base / "file.txt", 0o666)
    (base / "secret").write_text("TOPSECRET-42\n")
    os.chmod(base / "secret", 0o600)
    yield base
    for p in base.rglob("*"):
        os.chmod(p, 0o700) if p.is_dir() else None
    import shutil

    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def small(tree: dict[str, FileEntry]) -> Iterator[Sandbox]:
    """A sandbox with tight limits so bombs end fast."""
    lim = Limits(memory_mb=160, max_processes=64, disk_mb=32, max_file_mb=16, cpu_s=2,
                 command_timeout_s=5, max_output_bytes=4096)
    with open_sandbox([tree], limits=lim) as s:
        yield s


# -- the host file system ----------------------------------------------------------------------

def test_write_host_file(sb: Sandbox, target: Path) -> None:
    before = host_digest(target)
    r = sb.exec(f"echo pwned > {target}/file.txt; echo pwned >> {target}/file.txt;"
                f" touch {target}/new; touch /etc/pwned; echo x > /usr/bin/pwned")
    assert r.exit_code != 0 and "Read-only file system" in r.stderr
    assert host_digest(target) == before and not Path("/etc/pwned").exists()
    assert_clean(sb)


def test_delete_host_paths(sb: Sandbox, target: Path) -> None:
    before = host_digest(target, "/etc/hostname")
    sb.exec(f"rm -rf {target} /etc/hostname; mv {target}/file.txt /workspace/")
    assert host_digest(target, "/etc/hostname") == before
    assert_clean(sb)


def test_read_host_secrets(sb: Sandbox, target: Path) -> None:
    before = host_digest(target)
    r = sb.exec(f"cat {target}/secret /etc/shadow /root/.bash_history; ls /root;"
                f" grep -r TOPSECRET {target} /proc/1/environ 2>&1")
    assert "TOPSECRET" not in r.stdout + r.stderr
    assert "Permission denied" in r.stdout  # /proc/1/environ (PID 1 is root)
    assert "/etc/shadow: No such file" in r.stderr  # the host's /etc is not the sandbox's
    assert host_digest(target) == before
    assert_clean(sb)


def test_host_tmp_is_not_shared(sb: Sandbox) -> None:
    with tempfile.NamedTemporaryFile("w", dir="/tmp", prefix="ceiling-sec-") as f:
        f.write("host tmp")
        f.flush()
        before = host_digest(f.name)
        r = sb.exec(f"cat {f.name}; echo x > {f.name}; ls /tmp")
        assert "host tmp" not in r.stdout
        assert host_digest(f.name) == before
    assert_clean(sb)


def test_modify_interpreter_and_site_packages(sb: Sandbox) -> None:
    site = sysconfig.get_paths()["purelib"]
    exe = os.path.realpath(sys.executable)
    before = host_digest(exe, f"{site}/pytest")
    r = sb.exec(f"echo 'import os' > {site}/sitecustomize.py; echo x >> {site}/pytest/__init__.py;"
                f" cp /bin/true {exe}; echo x > {sys.executable}; echo $?")
    assert r.stdout.strip() != "0"
    assert not Path(site, "sitecustomize.py").exists()
    assert host_digest(exe, f"{site}/pytest") == before
    assert_clean(sb)


def test_overwrite_store_layers(sb: Sandbox) -> None:
    store = LayerStore()
    POOL.settle()  # a background warm start may be storing the empty layer
    before = host_digest(store.root)
    r = sb.exec(f"ls /.ceiling; echo x > /.ceiling/layers/x; echo y > {store.root}/y;"
                " find / -xdev -name '*.json' -path '*layers*' 2>/dev/null | head -1")
    assert "Permission denied" in r.stderr
    assert host_digest(store.root) == before
    assert_clean(sb)


# -- symlinks and /proc ------------------------------------------------------------------------

def test_symlink_escape_through_api(sb: Sandbox, target: Path) -> None:
    before = host_digest(target)
    sb.exec(f"ln -s {target}/file.txt f; ln -s {target} d; ln -s ../../../{target} rel")
    for path in ("f", "d/file.txt", "rel/file.txt", "d/new.txt"):
        with pytest.raises(PermissionError):
            sb.write(path, b"pwned")
    for path in ("f", "d/secret", "rel/file.txt"):
        with pytest.raises(PermissionError):
            sb.read(path)
    assert host_digest(target) == before
    assert_clean(sb)


def test_symlink_swap_in_parent_dir(sb: Sandbox, target: Path) -> None:
    before = host_digest(target)
    sb.exec(f"mkdir -p deep; rmdir deep; ln -s {target} deep")
    with pytest.raises(PermissionError):
        sb.write("deep/x/y.txt", b"pwned")
    assert host_digest(target) == before
    assert not (target / "x").exists()
    assert_clean(sb)


def test_proc_root_escape(sb: Sandbox, target: Path) -> None:
    before = host_digest(target)
    r = sb.exec("for p in /proc/[0-9]*; do ls $p/root/ >/dev/null 2>&1 && echo OPEN $p;"
                f" echo x > $p/root{target}/file.txt; done 2>/dev/null;"
                " cat /proc/1/root/etc/hostname; ls /proc/1/cwd")
    assert "OPEN /proc/1" not in r.stdout
    assert host_digest(target) == before
    assert_clean(sb)


def test_ptrace_holder(sb: Sandbox) -> None:
    code = ("import ctypes; l = ctypes.CDLL(None, use_errno=True);"
            "print(l.ptrace(16, 1, 0, 0), ctypes.get_errno())")  # PTRACE_ATTACH to PID 1
    r = sb.exec([sb.python, "-c", code])
    assert r.stdout.split()[0] == "-1"
    assert sb.exec("cat /proc/1/mem /proc/1/environ").exit_code != 0
    assert_clean(sb)


# -- processes -------------------------------------------------------------------------------

def test_see_host_processes(sb: Sandbox) -> None:
    r = sb.exec("ps -e --no-headers | wc -l; ls /proc | grep -c '^[0-9]'")
    assert all(int(n) <= 4 for n in r.stdout.split())
    assert sb.exec(f"kill -0 {os.getpid()}").exit_code != 0
    assert_clean(sb)


def test_signal_host_processes(sb: Sandbox) -> None:
    victim = __import__("subprocess").Popen(["sleep", "30"])
    try:
        r = sb.exec(f"kill -9 {victim.pid} {os.getpid()} 1; kill -9 -1; echo done")
        assert "done" in r.stdout or r.exit_code == -9
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
    assert_clean(sb)


def test_fork_bomb(small: Sandbox) -> None:
    hp = len(os.listdir("/proc"))
    r = small.exec("b(){ b | b & }; b; sleep 1", timeout=3)
    assert "fork" in r.stderr  # the pids limit bites: "Cannot fork"
    small.reset()  # while the bomb runs even the holder cannot fork: reset first
    assert_clean(small)
    assert len(os.listdir("/proc")) < hp + 20


def test_memory_bomb(small: Sandbox) -> None:
    r = small.exec([small.python, "-c", "x = bytearray(2 << 30); print('allocated')"],
                   timeout=30)
    assert r.exit_code != 0 and "allocated" not in r.stdout
    r = small.exec([small.python, "-c", "x = [bytearray(16 << 20) for _ in range(64)]"],
                   timeout=30)
    assert r.exit_code != 0
    assert_clean(small)


def test_infinite_loop(tree: dict[str, FileEntry]) -> None:
    with open_sandbox([tree], limits=Limits(cpu_s=1)) as sb:
        r = sb.exec("while :; do :; done", timeout=0.5)
        assert r.timed_out and r.exit_code == -9
        r = sb.exec([sb.python, "-c", "while True: pass"], timeout=60)
        assert not r.timed_out and r.exit_code in (-9, -24)  # RLIMIT_CPU kills it first
        assert_clean(sb)


def test_background_process_does_not_survive_reset(sb: Sandbox) -> None:
    sb.exec("sleep 1000 >/dev/null 2>&1 & setsid sh -c 'sleep 1000' >/dev/null 2>&1 &"
            " nohup sleep 999 >/dev/null 2>&1 &")
    assert sb.exec("sleep 0.5; ps -e | grep -c sleep").stdout.strip() == "3"
    assert_clean(sb)


def test_escape_timeout_with_setsid_then_reset(sb: Sandbox) -> None:
    r = sb.exec("setsid sh -c 'while :; do sleep 0.1; done' >/dev/null 2>&1 & sleep 10",
                timeout=0.3)
    assert r.timed_out
    assert_clean(sb)


def test_setuid_escalation(sb: Sandbox) -> None:
    r = sb.exec("su -c id root </dev/null; passwd -S root; "
                f"{sb.python} -c 'import os; os.setuid(0)'; id -u")
    assert r.stdout.strip().endswith(str(sb._h.uid))  # type: ignore[attr-defined]
    assert "uid=0" not in r.stdout
    assert_clean(sb)


# -- resources ---------------------------------------------------------------------------------

def test_disk_fill(small: Sandbox) -> None:
    free = os.statvfs("/").f_bavail
    r = small.exec("dd if=/dev/zero of=big bs=1M count=512; dd if=/dev/zero of=/tmp/big bs=1M"
                   " count=512; dd if=/dev/zero of=/dev/shm/big bs=1M count=512; df -m .")
    assert "No space left" in r.stderr or "File too large" in r.stderr
    assert abs(os.statvfs("/").f_bavail - free) * os.statvfs("/").f_frsize < (16 << 20)
    assert_clean(small)


def test_inode_exhaustion(small: Sandbox) -> None:
    code = ("import itertools\nfor i in itertools.count():\n    try: open(f'f{i}', 'w').close()\n"
            "    except OSError: print(i); break")
    r = small.exec([small.python, "-c", code], timeout=60)
    assert not r.timed_out and 0 < int(r.stdout) < 1_000_000
    assert_clean(small)


def test_gigabytes_of_output(small: Sandbox) -> None:
    r = small.exec("cat /dev/zero; yes >&2", timeout=20)
    assert r.truncated and len(r.stdout) == 4096 and len(r.stderr) == 4096
    assert not r.timed_out  # RLIMIT_FSIZE stops the writer long before the timeout
    assert_clean(small)


# -- network -----------------------------------------------------------------------------------

def test_reach_host_loopback_server(sb: Sandbox) -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    hits: list[object] = []

    def accept() -> None:
        try:
            hits.append(srv.accept())
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    r = sb.exec(f"curl -s -m 2 http://127.0.0.1:{port}/; echo rc=$?;"
                f" {sb.python} -c \"import socket; socket.create_connection(('127.0.0.1',"
                f" {port}), 1)\"")
    t.join()
    srv.close()
    assert hits == [] and "rc=7" in r.stdout and r.exit_code != 0
    assert_clean(sb)


def test_external_network(sb: Sandbox) -> None:
    r = sb.exec(f"{sb.python} -c \"import socket; socket.create_connection(('1.1.1.1', 80),"
                " 2)\"; getent hosts pypi.org; echo done")
    assert "Network is unreachable" in r.stderr and "done" in r.stdout
    assert sb.exec("cat /proc/net/dev | grep -c :").stdout == "1\n"  # only lo
    assert_clean(sb)


# -- kernel interfaces -------------------------------------------------------------------------

def test_mounting(sb: Sandbox) -> None:
    before = host_digest("/proc/self/mountinfo")
    r = sb.exec("mount -t tmpfs x /workspace; mount -o remount,rw /; mount --bind /tmp /usr;"
                " umount /workspace; umount -l /proc; echo end")
    assert r.stderr.count("must be superuser") + r.stderr.count("ermission denied") >= 3
    assert sb.exec("touch /workspace/ok && ls /proc/1 >/dev/null && echo fine").stdout == "fine\n"
    r = sb.exec("unshare -Urm sh -c 'mount -t tmpfs none /usr && echo inner-mounted'; ls /usr")
    assert "bin" in r.stdout  # a private user namespace changes nothing outside itself
    assert host_digest("/proc/self/mountinfo") == before
    assert_clean(sb)


def test_cgroup_sysctl_and_devices(sb: Sandbox) -> None:
    before = host_digest("/proc/sys/kernel/hostname")
    r = sb.exec("echo $$ > /sys/fs/cgroup/pids/cgroup.procs; echo evil > /proc/sys/kernel/hostname;"
                " hostname evil; mknod /tmp/disk b 8 0; ls /dev; cat /dev/vda; echo end")
    assert "vda" not in r.stdout.split("end")[0].split()
    assert "Operation not permitted" in r.stderr or "ermission denied" in r.stderr
    assert host_digest("/proc/sys/kernel/hostname") == before
    assert sb.exec("hostname").stdout == "sandbox\n"
    assert_clean(sb)


# -- isolation between episodes ------------------------------------------------------------------

def test_state_does_not_leak_into_next_episode(sb: Sandbox) -> None:
    sb.exec("echo x > leak.txt; echo y > /tmp/leak; echo z > /dev/shm/leak; ipcmk -M 4096;"
            " ipcmk -Q; ipcmk -S 1; sleep 100 >/dev/null 2>&1 & echo export A=1 >> ~/.profile")
    assert sb.exec("ipcs -m -q -s | grep -c 0x").stdout == "3\n"
    assert_clean(sb)
    assert sb.exec("cat ~/.profile").exit_code != 0


def test_sandboxes_do_not_see_each_other(sb: Sandbox, tree: dict[str, FileEntry]) -> None:
    with open_sandbox([tree]) as other:
        other.exec("echo mine > other.txt; sleep 100 >/dev/null 2>&1 &")
        r = sb.exec("cat other.txt; ps -e | grep -c sleep")
        assert "mine" not in r.stdout and r.stdout.strip().endswith("0")
        before = other.exec("cat other.txt").stdout
        sb.exec("for p in /proc/[0-9]*; do echo pwn > $p/root/workspace/other.txt; done 2>/dev/null")
        assert other.exec("cat other.txt").stdout == before
    assert_clean(sb)


def test_permission_fault_really_denies(sb: Sandbox) -> None:
    sb.exec("chmod 000 a.txt")
    r = sb.exec("cat a.txt")
    assert r.exit_code != 0 and "Permission denied" in r.stderr
    with pytest.raises(PermissionError):
        sb.read("a.txt")
    assert sb.exec("chmod 644 a.txt && cat a.txt").stdout == "hello\n"  # the owner may recover
    assert_clean(sb)


def test_host_environment_secrets(tree: dict[str, FileEntry],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-TOPSECRET-env")
    with open_sandbox([tree]) as sb:  # opened after the secret entered the host environment
        r = sb.exec("env; cat /proc/[0-9]*/environ; grep -ra TOPSECRET /proc/[0-9]*/environ")
        assert "TOPSECRET" not in r.stdout + r.stderr
        assert_clean(sb)
