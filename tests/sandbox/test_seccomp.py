"""The seccomp filter: the program itself (evaluated in Python for both architectures) and
attacks from inside a namespace sandbox, each expecting its errno; ordinary work (python,
shell pipelines, git, a TCP server on 127.0.0.1, AF_UNIX and netlink sockets, threads,
subprocesses) still succeeds; keyrings cannot carry anything across sandboxes or a reset."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator

import pytest

from ceiling.cards import FileEntry
from ceiling.sandbox import Sandbox, namespaces_available, open_sandbox
from ceiling.sandbox import _seccomp as S

needs_ns = pytest.mark.skipif(namespaces_available() is not None,
                              reason=f"namespace backend unavailable: {namespaces_available()}")

ALLOW, EPERM = S.RET_ALLOW, S.RET_ERRNO | S.EPERM
ENOSYS, EAFNO = S.RET_ERRNO | S.ENOSYS, S.RET_ERRNO | S.EAFNOSUPPORT
ORDINARY = {"x86_64": {"read": 0, "write": 1, "openat": 257, "mmap": 9, "execve": 59,
                       "wait4": 61, "recvmsg": 47, "sendmsg": 46, "vfork": 58, "fork": 57,
                       "prlimit64": 302, "seccomp": 317, "pidfd_open": 434},
            "aarch64": {"read": 63, "write": 64, "openat": 56, "mmap": 222, "execve": 221,
                        "wait4": 260, "recvmsg": 212, "sendmsg": 211, "prlimit64": 261,
                        "seccomp": 277, "pidfd_open": 434}}


@pytest.mark.parametrize("arch", sorted(S.AUDIT_ARCH))
def test_program_decisions(arch: str) -> None:
    prog = S.program(arch)
    assert len(prog) % 8 == 0 and len(prog) // 8 < 4096
    a = S.AUDIT_ARCH[arch]

    def nr(name: str) -> int:
        n = S._nr(name, arch)
        assert n is not None
        return n

    for name in S.DENIED:
        if S._nr(name, arch) is not None:
            assert S.run(prog, nr(name), a) == EPERM, name
    for name, n in ORDINARY[arch].items():
        assert S.run(prog, n, a) == ALLOW, name
    assert S.run(prog, nr("clone3"), a) == ENOSYS
    assert S.run(prog, nr("clone"), a, (0x01200011,)) == ALLOW  # fork()'s flags
    assert S.run(prog, nr("clone"), a, (0x003D0F00,)) == ALLOW  # pthread_create's flags
    for flag in (0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                 0x40000000):
        assert S.run(prog, nr("clone"), a, (flag | 17,)) == EPERM, hex(flag)
    assert S.run(prog, nr("clone"), a, ((1 << 32) | 17,)) == ALLOW  # kernel ignores high bits
    for fam in (1, 2, 10, 16):
        for call in ("socket", "socketpair"):
            assert S.run(prog, nr(call), a, (fam, 1, 0)) == ALLOW
    for fam in (40, 17, 38, 15, 31, 0, 3):  # vsock, packet, alg, key, bluetooth, unspec, ax25
        for call in ("socket", "socketpair"):
            assert S.run(prog, nr(call), a, (fam, 1, 0)) == EAFNO, (call, fam)
    assert S.run(prog, nr("socket"), a, ((1 << 32) | 40, 1, 0)) == EAFNO
    for q in S.PERSONALITY_QUERIES:
        assert S.run(prog, nr("personality"), a, (q,)) == ALLOW
    assert S.run(prog, nr("personality"), a, (0x0040000,)) == EPERM  # ADDR_NO_RANDOMIZE
    assert S.run(prog, nr("personality"), a, (0x0400000,)) == EPERM  # READ_IMPLIES_EXEC
    assert S.run(prog, 0, 0x40000003) == EPERM  # i386 ABI on x86_64: another table
    other = S.AUDIT_ARCH["aarch64" if arch == "x86_64" else "x86_64"]
    assert S.run(prog, 0, other) == EPERM
    if arch == "x86_64":
        assert S.run(prog, 0x40000000 | 39, a) == EPERM  # x32 getpid


def test_unknown_arch_is_refused() -> None:
    with pytest.raises(ValueError, match="x86_64 and aarch64"):
        S.program("riscv64")


ATTACKS = r"""
import ctypes, errno, json, mmap, os, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
X86 = os.uname().machine == "x86_64"
N = dict(zip("add_key request_key keyctl io_uring_setup bpf perf_event_open userfaultfd "
             "ptrace process_vm_readv unshare clone clone3 mount setns pidfd_getfd "
             "name_to_handle_at open_tree kcmp personality init_module kexec_load "
             "fsopen".split(),
             [248, 249, 250, 425, 321, 298, 323, 101, 310, 272, 56, 435, 165, 308, 438, 303,
              428, 312, 135, 175, 246, 430] if X86 else
             [217, 218, 219, 425, 280, 241, 282, 117, 270, 97, 220, 435, 40, 268, 438, 264,
              428, 272, 92, 105, 104, 430]))
out = {}
def sc(key, name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(N[name], *args)
    if r == 0 and name == "clone":
        os._exit(0)
    out[key] = 0 if r >= 0 else ctypes.get_errno()
buf = ctypes.create_string_buffer(256)
sc("add_key", "add_key", b"user", b"ceiling-leak", b"secret", 6, ctypes.c_long(-4))
sc("request_key", "request_key", b"user", b"ceiling-leak", None, ctypes.c_long(0))
sc("keyctl", "keyctl", 0, ctypes.c_long(-4), 1)
sc("io_uring_setup", "io_uring_setup", 8, buf)
sc("bpf", "bpf", 5, buf, 128)
sc("perf_event_open", "perf_event_open", buf, 0, -1, -1, 0)
sc("userfaultfd", "userfaultfd", 0)
sc("ptrace_traceme", "ptrace", 0, 0, 0, 0)
iov = (ctypes.c_char * 8)()
local = struct.pack("PN", ctypes.addressof(iov), 8)
lb = ctypes.create_string_buffer(local, len(local))
sc("process_vm_readv_self", "process_vm_readv", os.getpid(), lb, 1, lb, 1, 0)
sc("unshare_newuser", "unshare", 0x10000000)
sc("unshare_newns", "unshare", 0x20000)
sc("clone_newns", "clone", 0x20000 | 17, 0, 0, 0, 0)
sc("clone_newuser", "clone", 0x10000000 | 17, 0, 0, 0, 0)
sc("clone3", "clone3", buf, 88)
os.makedirs("/tmp/mnt", exist_ok=True)
sc("mount", "mount", b"none", b"/tmp/mnt", b"tmpfs", 0, None)
fd = os.open("/proc/self/ns/net", os.O_RDONLY)
sc("setns", "setns", fd, 0)
sc("pidfd_getfd", "pidfd_getfd", os.pidfd_open(os.getpid()), 0, 0)
sc("name_to_handle_at", "name_to_handle_at", -100, b"/tmp", buf, buf, 0)
sc("open_tree", "open_tree", -100, b"/tmp", 1)
sc("kcmp", "kcmp", os.getpid(), os.getpid(), 0, 0, 0)
sc("personality_no_aslr", "personality", 0x0040000)
sc("personality_query", "personality", 0xFFFFFFFF)
sc("init_module", "init_module", buf, 0, b"")
sc("kexec_load", "kexec_load", 0, 0, None, 0)
sc("fsopen", "fsopen", b"tmpfs", 0)
if X86:
    ctypes.set_errno(0)
    r = libc.syscall(0x40000000 | 39)
    out["x32_getpid"] = 0 if r >= 0 else ctypes.get_errno()
    code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])  # mov eax, 20 (i386 getpid); int 0x80
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
    pid = os.fork()  # a kernel without IA32 emulation answers int 0x80 with SIGSEGV
    if pid == 0:
        r = f()
        os._exit(-r if r < 0 else 0)
    st = os.waitpid(pid, 0)[1]
    out["i386_getpid"] = os.waitstatus_to_exitcode(st)  # negative: killed by that signal
for fam, name in ((40, "vsock"), (17, "packet"), (38, "alg"), (15, "key"), (31, "bluetooth")):
    try:
        socket.socket(fam, socket.SOCK_DGRAM if fam != 17 else socket.SOCK_RAW).close()
        out["socket_" + name] = 0
    except OSError as e:
        out["socket_" + name] = e.errno
try:
    socket.socketpair(40, socket.SOCK_STREAM)
    out["socketpair_vsock"] = 0
except OSError as e:
    out["socketpair_vsock"] = e.errno
status = open("/proc/self/status").read()
out["seccomp_mode"] = int(status.split("Seccomp:")[1].split()[0])
print(json.dumps(out))
"""

EXPECTED = {
    "add_key": "EPERM", "request_key": "EPERM", "keyctl": "EPERM", "io_uring_setup": "EPERM",
    "bpf": "EPERM", "perf_event_open": "EPERM", "userfaultfd": "EPERM",
    "ptrace_traceme": "EPERM", "process_vm_readv_self": "EPERM", "unshare_newuser": "EPERM",
    "unshare_newns": "EPERM", "clone_newns": "EPERM", "clone_newuser": "EPERM",
    "clone3": "ENOSYS", "mount": "EPERM", "setns": "EPERM", "pidfd_getfd": "EPERM",
    "name_to_handle_at": "EPERM", "open_tree": "EPERM", "kcmp": "EPERM",
    "personality_no_aslr": "EPERM", "init_module": "EPERM", "kexec_load": "EPERM",
    "fsopen": "EPERM", "socket_vsock": "EAFNOSUPPORT", "socket_packet": "EAFNOSUPPORT",
    "socket_alg": "EAFNOSUPPORT", "socket_key": "EAFNOSUPPORT",
    "socket_bluetooth": "EAFNOSUPPORT", "socketpair_vsock": "EAFNOSUPPORT",
}
if os.uname().machine == "x86_64":
    EXPECTED |= {"x32_getpid": "EPERM"}


@pytest.fixture
def box() -> Iterator[Sandbox]:
    if namespaces_available() is not None:
        pytest.skip(f"namespace backend unavailable: {namespaces_available()}")
    with open_sandbox([{"a.txt": FileEntry.text("hello\n")}]) as s:
        yield s


def py(sb: Sandbox) -> str:
    return getattr(sb, "python", "python3")


def run_py(sb: Sandbox, source: str) -> dict[str, int]:
    sb.write("/tmp/probe.py", source.encode())
    r = sb.exec([py(sb), "/tmp/probe.py"], timeout=60)
    assert r.exit_code == 0, r
    return json.loads(r.stdout.splitlines()[-1])  # type: ignore[no-any-return]


@needs_ns
def test_denied_families_fail_with_their_errno(box: Sandbox) -> None:
    got = run_py(box, ATTACKS)
    import errno

    assert got.pop("seccomp_mode") == 2  # filter mode, inherited from the spawner
    assert got.pop("personality_query") == 0
    if "i386_getpid" in got:  # EPERM from the filter, or no i386 ABI in this kernel at all
        assert got.pop("i386_getpid") in (1, -11)
    wrong = {k: (errno.errorcode.get(v, v), EXPECTED[k]) for k, v in got.items()
             if errno.errorcode.get(v) != EXPECTED[k]}
    assert not wrong, wrong
    assert set(got) == set(EXPECTED)


ORDINARY_WORK = r"""
import json, os, socket, subprocess, threading, sys
out = {}
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
port = srv.getsockname()[1]
def serve():
    c, _ = srv.accept(); c.sendall(c.recv(100).upper()); c.close()
t = threading.Thread(target=serve); t.start()
cl = socket.create_connection(("127.0.0.1", port)); cl.sendall(b"ping")
out["tcp"] = cl.recv(100).decode(); t.join()
a, b = socket.socketpair(); a.sendall(b"x"); out["socketpair"] = b.recv(1).decode()
u = socket.socket(socket.AF_UNIX); u.bind("/tmp/u.sock"); u.listen()
v = socket.socket(socket.AF_UNIX); v.connect("/tmp/u.sock"); out["unix_path"] = "ok"
socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close(); out["netlink"] = "ok"
socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close(); out["inet6"] = "ok"
res = []
ths = [threading.Thread(target=res.append, args=(i,)) for i in range(8)]
[x.start() for x in ths]; [x.join() for x in ths]; out["threads"] = len(res)
out["subprocess"] = subprocess.run(["sh", "-c", "echo sub | tr a-z A-Z"],
                                   capture_output=True, text=True).stdout.strip()
out["child_python"] = subprocess.run([sys.executable, "-c", "print(6*7)"],
                                     capture_output=True, text=True).stdout.strip()
import multiprocessing as mp
with mp.get_context("fork").Pool(2) as p:
    out["pool"] = sum(p.map(abs, [-1, -2, -3]))
pid = os.fork()
if pid == 0:
    os._exit(7)
out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(out))
"""


@needs_ns
def test_ordinary_work_still_runs(box: Sandbox) -> None:
    got = run_py(box, ORDINARY_WORK)
    assert got == {"tcp": "PING", "socketpair": "x", "unix_path": "ok", "netlink": "ok",
                   "inet6": "ok", "threads": 8, "subprocess": "SUB", "child_python": "42",
                   "pool": 6, "fork": 7}
    r = box.exec("seq 1000 | sort -rn | head -1 && git init -q /tmp/r && cd /tmp/r && "
                 "echo x > f && git add f && git -c user.email=a@b -c user.name=n commit -qm m"
                 " && git log --oneline | wc -l")
    assert r.stdout == "1000\n1\n", r
    r = box.exec(f"{py(box)} -m pytest --version")
    assert r.exit_code == 0, r


KEYS = r"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
import os
X86 = os.uname().machine == "x86_64"
ADD, REQ, CTL = (248, 249, 250) if X86 else (217, 218, 219)
out = {}
ctypes.set_errno(0)
out["add"] = libc.syscall(ADD, b"user", b"DESC", b"secret", 6, ctypes.c_long(-4))
out["add_errno"] = ctypes.get_errno()
ctypes.set_errno(0)
out["find"] = libc.syscall(REQ, b"user", b"DESC", None, ctypes.c_long(0))
out["find_errno"] = ctypes.get_errno()
print(json.dumps(out))
"""


@needs_ns
def test_keyrings_cannot_carry_state(box: Sandbox) -> None:
    """Two live sandboxes and a reset: adding a key fails, so nothing can be found later."""
    desc = f"ceiling-leak-{os.urandom(6).hex()}"
    keys = KEYS.replace("DESC", desc)
    with open_sandbox([{"b.txt": FileEntry.text("b\n")}]) as other:
        for sb in (box, other, box):
            got = run_py(sb, keys)
            assert got == {"add": -1, "add_errno": 1, "find": -1, "find_errno": 1}, got
        box.reset()
        assert run_py(box, keys)["find_errno"] == 1
        with open("/proc/keys") as f:
            assert desc not in f.read()  # nothing reached the kernel's key list either


def test_local_backend_has_no_filter() -> None:
    """The local backend isolates nothing; it says so and installs no filter."""
    import warnings

    from ceiling.sandbox import LocalSandboxWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalSandboxWarning)
        with open_sandbox([{"a.txt": FileEntry.text("x")}], backend="local") as sb:
            with open("/proc/self/status") as f:
                mine = f.read().split("Seccomp:")[1].split()[0]
            assert sb.exec("grep Seccomp: /proc/self/status").stdout.split()[1] == mine


def test_filter_is_packed_sock_filter() -> None:
    prog = S.program()
    first = struct.unpack("=HBBI", prog[:8])
    assert first == (S.LD_ABS_W, 0, 0, S.OFF_ARCH)
    assert struct.unpack("=HBBI", prog[-8:]) == (S.RET, 0, 0, S.RET_ALLOW)
