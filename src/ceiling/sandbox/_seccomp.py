"""The seccomp filter every command of a ``namespace`` sandbox runs under.

:func:`program` builds a classic-BPF program in code (no libseccomp: ``python3-seccomp`` is
not a dependency) for x86_64 and aarch64. The holder's spawner installs it with
``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)`` right after ``no_new_privs`` and its drop to
the sandbox uid, so every command and all its descendants inherit it and cannot remove it.
The spawner itself keeps running Python under it (``recvmsg``, ``vfork``/``clone`` without
namespace flags, ``execve``, ``wait4``, ``prlimit64``... all stay allowed). The ``local``
backend does not install it: it isolates nothing, so a filter there would protect nothing.

Default **allow**, then deny the families below (a deny-list, like Docker's and Codex's
filters: a task needs compilers, interpreters, servers and git, and an allow-list breaks
them with every new libc). The architecture is checked first: a syscall made with another
ABI (i386 ``int 0x80`` on x86_64, or an x32 number ``nr >= 0x40000000``) fails with EPERM,
so no entry below can be bypassed through a second syscall table.

======================================  ========  ============================================
syscalls                                result    why a task never needs them / what they open
======================================  ========  ============================================
add_key, request_key, keyctl            EPERM     kernel keyrings are per *uid*, not per
                                                  namespace: a key survives reset() and is
                                                  readable by another sandbox (issue 9, 5).
                                                  Docker, Firejail @default, gVisor: denied.
io_uring_setup, io_uring_enter,         EPERM     io_uring performs I/O (even opens sockets)
io_uring_register                                 without the syscalls this filter inspects,
                                                  and is a large kernel attack surface. Codex,
                                                  Docker (2023), sandbox-runtime: denied.
bpf                                     EPERM     loads programs into the kernel. Docker,
                                                  Firejail: denied.
perf_event_open                         EPERM     hardware counters and kernel profiling:
                                                  side channels across sandboxes. Docker,
                                                  Firejail @debug: denied.
userfaultfd                             EPERM     stalls kernel page faults at will: the
                                                  classic race widener for kernel exploits.
                                                  Docker, Firejail: denied.
init_module, finit_module,              EPERM     kernel modules. Docker, Firejail @module.
delete_module, create_module*,
query_module*, get_kernel_syms*
kexec_load, kexec_file_load, reboot     EPERM     replace or stop the kernel. Docker,
                                                  Firejail @reboot.
ptrace, process_vm_readv,               EPERM     read or write another process's memory
process_vm_writev, process_madvise,               (the holder's spawner runs as the same uid
pidfd_getfd, kcmp                                 as the commands; pidfd_getfd steals fds).
                                                  Firejail @default-nodebuggers, Codex
                                                  (ptrace, process_vm_*). Cost: no gdb or
                                                  strace inside a sandbox.
mount, umount2, pivot_root, chroot,     EPERM     change the file system view; with a user
fsopen, fsconfig, fsmount, fspick,                namespace a command could build its own
move_mount, open_tree, open_tree_attr,            (mount API of 5.2+ and 6.15's
mount_setattr                                     open_tree_attr included). Firejail @mount,
                                                  Docker: denied.
unshare, setns                          EPERM     new namespaces: an unprivileged user
                                                  namespace is the entry point of most
                                                  recent kernel privilege escalations.
                                                  Docker: denied without CAP_SYS_ADMIN.
clone with any CLONE_NEW* flag          EPERM     the same through clone(): flags word
(0x7E020000 in the flags argument)                inspected, threads and forks pass.
clone3                                  ENOSYS    its flags live in memory BPF cannot read;
                                                  ENOSYS makes glibc (pthread_create,
                                                  posix_spawn) fall back to clone().
                                                  Docker does the same.
socket, socketpair with a family other  EAFNO-    AF_VSOCK is not isolated by the network
than AF_UNIX, AF_INET, AF_INET6,        SUPPORT   namespace (talks to the hypervisor);
AF_NETLINK                                        AF_PACKET, AF_ALG, AF_KEY, AF_BLUETOOTH...
                                                  are attack surface no task needs. Docker's
                                                  list without AF_PACKET.
swapon, swapoff, syslog, acct,          EPERM     host administration (swap, kernel log,
quotactl, quotactl_fd, vhangup,                   process accounting, quotas, terminals,
settimeofday, clock_settime,                      clock, raw I/O ports); all need
iopl*, ioperm*                                    capabilities a command lacks, denied so a
                                                  kernel bug in them is unreachable too.
                                                  Docker, Firejail @default.
name_to_handle_at, open_by_handle_at    EPERM     open files by handle, bypassing path
                                                  checks (the "shocker" container escape).
                                                  Docker, Firejail: denied.
fanotify_init, lookup_dcookie           EPERM     file-system wide monitoring; dcookies of
                                                  the profiler. Firejail @default.
uselib*, _sysctl*, nfsservctl           EPERM     obsolete. Firejail @obsolete.
personality, except the queries 0,      EPERM     execution domains (e.g. READ_IMPLIES_EXEC,
8 (PER_LINUX32), 0x20000, 0x20008,                ADDR_NO_RANDOMIZE) weaken exploit
0xffffffff                                        mitigations. Docker allows exactly these.
syscall of another architecture, x32    EPERM     a second syscall table would bypass every
numbers (x86_64, nr >= 0x40000000)                entry above. sandbox-runtime, Docker.
======================================  ========  ============================================

``*``: x86_64 only (the number does not exist on aarch64). Left allowed on purpose:
``seccomp`` and ``landlock_*`` (they only restrict the caller), NUMA policy calls, ``mknod``
(devices already need CAP_MKNOD; FIFOs are refused by the freeze), ``prctl``, pidfds.

Limits: seccomp cannot inspect pointers, so ``clone3`` is refused whole and path arguments
are never filtered (the mount namespace and file permissions do that). A kernel bug in an
allowed syscall is out of scope (use a VM backend for that threat).
"""

from __future__ import annotations

import os
import struct

EPERM, ENOSYS, EAFNOSUPPORT = 1, 38, 97
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000
CLONE_NEW_MASK = 0x7E020000  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
AF_ALLOWED = (1, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
PERSONALITY_QUERIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

# name: (x86_64 number, aarch64 number); None where the call does not exist
SYSCALLS: dict[str, tuple[int | None, int | None]] = {
    "add_key": (248, 217), "request_key": (249, 218), "keyctl": (250, 219),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "create_module": (174, None), "query_module": (178, None),
    "get_kernel_syms": (177, None),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "reboot": (169, 142),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "process_madvise": (440, 440), "pidfd_getfd": (438, 438), "kcmp": (312, 272),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432),
    "fspick": (433, 433), "move_mount": (429, 429), "open_tree": (428, 428),
    "open_tree_attr": (467, 467), "mount_setattr": (442, 442),
    "unshare": (272, 97), "setns": (308, 268),
    "swapon": (167, 224), "swapoff": (168, 225), "syslog": (103, 116), "acct": (163, 89),
    "quotactl": (179, 60), "quotactl_fd": (443, 443), "vhangup": (153, 58),
    "settimeofday": (164, 170), "clock_settime": (227, 112),
    "iopl": (172, None), "ioperm": (173, None),
    "name_to_handle_at": (303, 264), "open_by_handle_at": (304, 265),
    "fanotify_init": (300, 262), "lookup_dcookie": (212, 18),
    "uselib": (134, None), "_sysctl": (156, None), "nfsservctl": (180, 42),
    # inspected, not denied outright:
    "personality": (135, 92), "clone": (56, 220), "clone3": (435, 435),
    "socket": (41, 198), "socketpair": (53, 199),
}
INSPECTED = ("personality", "clone", "clone3", "socket", "socketpair")
DENIED = tuple(n for n in SYSCALLS if n not in INSPECTED)

# classic BPF opcodes and seccomp return values
LD_ABS_W, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
OFF_NR, OFF_ARCH, OFF_ARG0 = 0, 4, 16  # struct seccomp_data; arg0's low word (little-endian)


def machine() -> str:
    return os.uname().machine


def _nr(name: str, arch: str) -> int | None:
    return SYSCALLS[name][0 if arch == "x86_64" else 1]


def instructions(arch: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) tuples for ``arch`` (default: this machine)."""
    arch = arch or machine()
    if arch not in AUDIT_ARCH:
        raise ValueError(f"no seccomp filter for {arch!r} (x86_64 and aarch64 only)")
    eperm, enosys = RET_ERRNO | EPERM, RET_ERRNO | ENOSYS
    p: list[tuple[int, int, int, int]] = [
        (LD_ABS_W, 0, 0, OFF_ARCH),
        (JEQ, 1, 0, AUDIT_ARCH[arch]),
        (RET, 0, 0, eperm),  # another ABI: its syscall numbers mean other calls
        (LD_ABS_W, 0, 0, OFF_NR),
    ]
    if arch == "x86_64":
        p += [(JGE, 0, 1, X32_SYSCALL_BIT), (RET, 0, 0, eperm)]
    for name in DENIED:
        nr = _nr(name, arch)
        if nr is not None:
            p += [(JEQ, 0, 1, nr), (RET, 0, 0, eperm)]
    p += [(JEQ, 0, 1, _nr("clone3", arch) or 0), (RET, 0, 0, enosys)]
    # clone: refuse any namespace flag in the (low word of the) flags argument
    p += [(JEQ, 0, 4, _nr("clone", arch) or 0), (LD_ABS_W, 0, 0, OFF_ARG0),
          (JSET, 0, 1, CLONE_NEW_MASK), (RET, 0, 0, eperm), (RET, 0, 0, RET_ALLOW)]
    # personality: the queries and harmless domains only
    n = len(PERSONALITY_QUERIES)
    p += [(JEQ, 0, n + 3, _nr("personality", arch) or 0), (LD_ABS_W, 0, 0, OFF_ARG0)]
    p += [(JEQ, n - i, 0, v) for i, v in enumerate(PERSONALITY_QUERIES)]
    p += [(RET, 0, 0, eperm), (RET, 0, 0, RET_ALLOW)]
    # socket and socketpair: a few families only
    n = len(AF_ALLOWED)
    p += [(JEQ, 1, 0, _nr("socket", arch) or 0),
          (JEQ, 0, n + 3, _nr("socketpair", arch) or 0), (LD_ABS_W, 0, 0, OFF_ARG0)]
    p += [(JEQ, n - i, 0, fam) for i, fam in enumerate(AF_ALLOWED)]
    p += [(RET, 0, 0, RET_ERRNO | EAFNOSUPPORT), (RET, 0, 0, RET_ALLOW)]
    p.append((RET, 0, 0, RET_ALLOW))
    return p


def program(arch: str | None = None) -> bytes:
    """The packed ``struct sock_filter`` array for ``arch`` (default: this machine), ready
    for ``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &sock_fprog)``. Raises ValueError on
    an architecture without a filter."""
    return b"".join(struct.pack("=HBBI", *ins) for ins in instructions(arch))


def run(prog: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """Evaluate ``prog`` on one syscall in Python (a reference interpreter for tests):
    the seccomp return value."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    ins = [struct.unpack("=HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        if code == LD_ABS_W:
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code == RET:
            return k
        elif code in (JEQ, JGE, JSET):
            hit = acc == k if code == JEQ else acc >= k if code == JGE else bool(acc & k)
            pc += 1 + (jt if hit else jf)
        else:
            raise ValueError(f"unknown BPF opcode {code:#x}")
