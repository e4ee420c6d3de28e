"""Freezing a sandbox's state (checkpoint, fork, the verifier's freeze) never follows anything.

Attacks: a background job inside the sandbox swaps files and folders for absolute symlinks to
root-only host paths (``renameat2(RENAME_EXCHANGE)``, the docker-cp CVE-2018-15664 race)
while the host freezes over and over; sparse files and hard links that would write far more
than ``disk_mb`` to the host store; FIFOs, sockets and devices; folders nested past the
limit; names that are not UTF-8. After each, the host targets hash the same, nothing of them
reached a layer, the store holds nothing new, and the sandbox still runs (not left frozen).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ceiling._errors import StateRejected
from ceiling.cards import FileEntry
from ceiling.sandbox import SANDBOX_UID, LayerStore, Limits, Sandbox, open_sandbox
from ceiling.sandbox._namespace import NamespaceSandbox, namespaces_available

pytestmark = pytest.mark.skipif(namespaces_available() is not None,
                                reason=f"namespace backend unavailable: {namespaces_available()}")

SECRET = b"TOP-SECRET-host-only-" + os.urandom(8).hex().encode()
TREE = {"a.txt": FileEntry.text("hello\n"), "keep/b.txt": FileEntry.text("b\n")}

RACE = r"""
import ctypes, os, sys, time
secret_file, secret_dir, deadline = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": 316, "aarch64": 276}[os.uname().machine]  # renameat2
def exchange(a, b):
    if libc.syscall(NR, -100, a.encode(), -100, b.encode(), 2) != 0:  # RENAME_EXCHANGE
        os.rename(a, a + ".t"); os.rename(b, a); os.rename(a + ".t", b)
os.makedirs("race/d/sub", exist_ok=True)
os.makedirs("race/w", exist_ok=True)
for p in ("race/f", "race/d/x", "race/d/sub/y", "race/w/planted"):
    with open(p, "w") as f:
        f.write("agent data\n")
os.symlink(secret_file, "race/f.alt")
os.symlink(secret_dir, "race/d.alt")
os.symlink(secret_dir + "/planted", "race/w.alt")
os.symlink(secret_dir, "race/e")  # a standing link to the folder, never a folder itself
print("ready", flush=True)
while time.time() < deadline:
    exchange("race/f", "race/f.alt")
    exchange("race/d", "race/d.alt")
    exchange("race/w", "race/w.alt")
"""


def digest(root: Path) -> str:
    """Type, mode, owner and content of every entry below ``root`` (no link followed)."""
    h = hashlib.sha256()
    for p in [root, *sorted(root.rglob("*"))]:
        st = os.lstat(p)
        h.update(f"{p}:{st.st_mode:o}:{st.st_uid}:{st.st_gid}:{st.st_size}".encode())
        if stat.S_ISREG(st.st_mode):
            h.update(p.read_bytes())
    return h.hexdigest()


def store_files(store: LayerStore) -> set[str]:
    return {str(p.relative_to(store.root)) for p in store.root.rglob("*")}


def assert_no_secret(store: LayerStore) -> None:
    for dirpath, _, files in os.walk(store.root):
        for name in files:
            p = os.path.join(dirpath, name)
            if stat.S_ISREG(os.lstat(p).st_mode):
                with open(p, "rb") as f:
                    assert SECRET not in f.read(), f"host secret copied into {p}"


@pytest.fixture
def targets(tmp_path: Path) -> Iterator[tuple[Path, Path, str]]:
    """A root-only file and a root-only 0700 folder (holding a root-only file) on the host."""
    tmp_path = tmp_path / "host"
    tmp_path.mkdir()
    d = tmp_path / "rootonly"
    d.mkdir(mode=0o700)
    (d / "inner.txt").write_bytes(SECRET)
    os.chmod(d / "inner.txt", 0o600)
    f = tmp_path / "secret.txt"
    f.write_bytes(SECRET)
    os.chmod(f, 0o600)
    before = digest(tmp_path)
    yield f, d, before
    assert digest(tmp_path) == before, "a host file changed or appeared"
    assert not (d / "planted").exists()


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with open_sandbox([TREE]) as s:
        yield s


def start_race(sb: Sandbox, secret_file: Path, secret_dir: Path, seconds: float) -> None:
    sb.write("/tmp/race.py", RACE.encode())
    py = getattr(sb, "python", "python3")
    r = sb.exec(f"{py} /tmp/race.py {secret_file} {secret_dir} {seconds} > /tmp/race.out 2>&1 &"
                " for i in $(seq 100); do grep -q ready /tmp/race.out && break; sleep 0.05; done;"
                " cat /tmp/race.out")
    assert "ready" in r.stdout, r


def freeze_many(sb: Sandbox, n: int) -> list[str]:
    """checkpoint(), fork() and a verifier-style fork (fork, then read the final state
    through the fork) in turn, ``n`` times in all; returns the layer ids made."""
    ids = []
    for i in range(n):
        if i % 3 == 0:
            ids.append(sb.checkpoint())
        else:
            with sb.fork() as f:
                assert isinstance(f, NamespaceSandbox)
                ids += f.layer_ids[-1:]
                if i % 3 == 2:  # verify-style: the grader reads the frozen files
                    assert f.read("a.txt") == b"hello\n"
                    r = f.exec("ls race; cat race/f race/d/x 2>/dev/null; true")
                    assert SECRET.decode() not in r.stdout
    return ids


def test_symlink_exchange_race_during_freeze(box: Sandbox,
                                             targets: tuple[Path, Path, str]) -> None:
    secret_file, secret_dir, _ = targets
    start_race(box, secret_file, secret_dir, 120)
    ids = freeze_many(box, 60)
    assert len(set(ids)) > 1
    assert_no_secret(LayerStore())
    assert box.exec("echo alive").stdout == "alive\n"  # thawed after every freeze


def test_race_without_the_freezer_is_still_safe(box: Sandbox, targets: tuple[Path, Path, str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The no-follow copy holds on its own: processes keep running during the copy."""
    monkeypatch.setattr(NamespaceSandbox, "_pause", lambda self, h: None)
    secret_file, secret_dir, _ = targets
    start_race(box, secret_file, secret_dir, 120)
    changed = 0
    for _ in range(40):
        try:
            freeze_many(box, 3)
        except StateRejected as e:  # the tree changed between the two passes
            assert e.reason == "changed"
            changed += 1
    assert_no_secret(LayerStore())


def test_race_with_the_sigstop_fallback(box: Sandbox, targets: tuple[Path, Path, str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """No cgroup freezer: PID 1 stops every process, so the copy sees one moment (no
    "changed" refusal) and the job runs again afterwards."""
    from ceiling.sandbox._cgroup import Cgroup

    monkeypatch.setattr(Cgroup, "freeze", lambda self, timeout_s=2.0: False)
    secret_file, secret_dir, _ = targets
    start_race(box, secret_file, secret_dir, 120)
    freeze_many(box, 15)
    assert_no_secret(LayerStore())
    py = getattr(box, "python", "python3")
    states = box.exec(f"ps -eo stat=,args= | grep '{py} /tmp/race.py' | grep -v grep").stdout
    assert states and not states.startswith("T"), states  # continued after each freeze


def test_put_diff_races_a_host_thread(tmp_path: Path, targets: tuple[Path, Path, str]) -> None:
    """put_diff alone, against a thread exchanging entries as fast as it can."""
    import ctypes

    secret_file, secret_dir, _ = targets
    upper = tmp_path / "upper"
    (upper / "d" / "sub").mkdir(parents=True)
    (upper / "f").write_text("data")
    (upper / "d" / "x").write_text("x")
    os.symlink(secret_file, upper / "f.alt")
    os.symlink(secret_dir, upper / "d.alt")
    store = LayerStore(tmp_path / "store")
    libc = ctypes.CDLL(None, use_errno=True)
    nr = {"x86_64": 316, "aarch64": 276}[os.uname().machine]
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            for a in ("f", "d"):
                libc.syscall(nr, -100, str(upper / a).encode(), -100,
                             str(upper / f"{a}.alt").encode(), 2)

    t = threading.Thread(target=swap)
    t.start()
    try:
        kinds = set()
        for _ in range(300):
            try:
                lid = store.put_diff(upper, [], private=True)
            except StateRejected as e:
                assert e.reason == "changed"
                kinds.add("refused")
                continue
            for name in ("f", "d"):  # whatever it caught, it stored as it was: no follow
                st = os.lstat(store.path(lid) / name)
                kinds.add(f"{name}:{stat.S_IFMT(st.st_mode):o}")
                if stat.S_ISLNK(st.st_mode):
                    assert os.readlink(store.path(lid) / name) in (str(secret_file),
                                                                    str(secret_dir))
    finally:
        stop.set()
        t.join()
    assert_no_secret(store)
    assert len(kinds) >= 3, kinds  # the race really interleaved with the copies


def test_sandbox_is_frozen_while_copied(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(box, NamespaceSandbox)
    cg = box._holder().cgroup
    if cg is None or not cg.can_freeze:
        pytest.skip("no cgroup freezer here (the SIGSTOP fallback is used)")
    seen = []
    real = LayerStore.put_diff

    def spy(self: LayerStore, *a: object, **k: object) -> str:
        d, v2 = cg._freezer()  # type: ignore[misc]
        state = (d / ("cgroup.freeze" if v2 else "freezer.state")).read_text().strip()
        seen.append(state)
        return real(self, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(LayerStore, "put_diff", spy)
    box.exec("sleep 100 > /dev/null 2>&1 &")
    box.checkpoint()
    box.fork().close()
    assert seen and all(s in ("FROZEN", "1") for s in seen), seen
    assert box.exec("echo alive").stdout == "alive\n"


def test_signal_fallback_pauses_and_resumes(box: Sandbox) -> None:
    """Without a freezer, PID 1 stops every process and continues them afterwards."""
    assert isinstance(box, NamespaceSandbox)
    box.exec("sleep 300 > /dev/null 2>&1 & sleep 0.2")  # sleep has exec'd: comm is "sleep"
    h = box._holder()
    with box._lock:
        assert box._request({"op": "pause", "stop": True})["ok"] is True
    states = box.exec("ps -eo stat=,comm= | grep ' sleep$' | cut -c1").stdout  # runs after
    with box._lock:
        box._resume(h, "signal")
    assert states == "T\n", states
    assert box.exec("ps -eo stat=,comm= | grep ' sleep$' | cut -c1").stdout == "S\n"


def test_sparse_files_past_disk_mb_are_rejected(box: Sandbox) -> None:
    from ceiling.sandbox._launch import POOL

    store = LayerStore()
    store.empty()  # a warm spare holder being started in the background writes it
    POOL.settle()
    before_files = store_files(store)
    free = shutil.disk_usage(store.root).free
    # 40 sparse files of 250 MB (under RLIMIT_FSIZE each): 10 GB apparent, ~0 on the tmpfs
    r = box.exec("for i in $(seq 40); do truncate -s 250M sparse$i; done; du -sk . | cut -f1")
    assert r.exit_code == 0 and int(r.stdout) < 1024, r
    for freeze in (box.checkpoint, box.fork):
        with pytest.raises(StateRejected) as e:
            freeze()
        assert e.value.reason == "too_big" and "MB" in str(e.value)
    assert store_files(store) == before_files  # nothing written, not even a temp folder
    assert abs(shutil.disk_usage(store.root).free - free) < (64 << 20)
    assert box.exec("echo alive").stdout == "alive\n"
    box.exec("rm sparse*")
    box.checkpoint()


def test_hard_links_count_each_time() -> None:
    with open_sandbox([TREE], limits=Limits(disk_mb=64)) as sb:
        r = sb.exec("head -c 40000000 /dev/zero > big && ln big big2 && echo ok")
        assert r.stdout == "ok\n", r
        with pytest.raises(StateRejected) as e:
            sb.checkpoint()
        assert e.value.reason == "too_big"
        sb.exec("rm big2")
        sb.checkpoint()


@pytest.mark.parametrize("make,kind", [
    ("mkfifo pipe", "FIFO"),
    ("python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('pipe')\"", "socket"),
])
def test_special_files_are_rejected_by_name(box: Sandbox, make: str, kind: str) -> None:
    py = getattr(box, "python", "python3")
    assert box.exec("mkdir -p sub && cd sub && " + make.replace("python3", py)).exit_code == 0
    for freeze in (box.checkpoint, box.fork):
        with pytest.raises(StateRejected) as e:
            freeze()
        assert e.value.reason == "special_file" and e.value.path == "sub/pipe"
        assert kind in str(e.value) and "sub/pipe" in str(e.value)
    assert box.exec("rm sub/pipe && echo ok").stdout == "ok\n"
    box.checkpoint()


def test_device_and_nesting_rejected_by_put_diff(tmp_path: Path) -> None:
    store = LayerStore(tmp_path / "store")
    upper = tmp_path / "upper"
    upper.mkdir()
    os.mknod(upper / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    with pytest.raises(StateRejected, match="device file") as e:
        store.put_diff(upper, [])
    assert e.value.path == "null"
    (upper / "null").unlink()
    os.mknod(upper / "wh", stat.S_IFCHR, os.makedev(0, 0))  # an overlay whiteout is kept
    lid = store.put_diff(upper, [])
    assert stat.S_ISCHR(os.lstat(store.path(lid) / "wh").st_mode)
    deep = upper / "/".join(["n"] * 300)
    deep.mkdir(parents=True)
    with pytest.raises(StateRejected) as e:
        store.put_diff(upper, [])
    assert e.value.reason == "too_deep"
    assert not [p for p in store.root.iterdir() if p.name.startswith(".tmp")]


def test_frozen_files_belong_to_the_sandbox_user(box: Sandbox) -> None:
    box.exec("mkdir -p new/deeper && echo x > new/deeper/f && chmod 4755 new/deeper/f"
             " && ln -s /etc/passwd new/link")
    lid = box.checkpoint()
    root = LayerStore().path(lid)
    for p in [root, *root.rglob("*")]:
        st = os.lstat(p)
        assert (st.st_uid, st.st_gid) == (SANDBOX_UID, SANDBOX_UID), p
    assert stat.S_IMODE(os.lstat(root / "new/deeper/f").st_mode) == 0o755  # set-id dropped
    assert os.readlink(root / "new/link") == "/etc/passwd"


NAMES = r"""
import os
os.makedirs(b"d\xff\xfe/sub", exist_ok=True)
open(b"caf\xe9.txt", "wb").write(b"latin-1 name\n")
open(b"d\xff\xfe/sub/\x80\x81", "wb").write(b"deep\n")
os.symlink(b"caf\xe9.txt", b"link\xc3")
"""
CHECK = r"""
import os
print(open(b"caf\xe9.txt", "rb").read(), open(b"d\xff\xfe/sub/\x80\x81", "rb").read(),
      os.readlink(b"link\xc3"), sorted(os.listdir(b".")))
"""


def test_non_utf8_names_round_trip(box: Sandbox) -> None:
    py = getattr(box, "python", "python3")
    box.write("/tmp/names.py", NAMES.encode())
    box.write("/tmp/check.py", CHECK.encode())
    assert box.exec([py, "/tmp/names.py"]).exit_code == 0
    want = box.exec([py, "/tmp/check.py"])
    assert want.exit_code == 0 and "latin-1 name" in want.stdout, want
    lid = box.checkpoint()
    with box.fork() as f:  # /tmp is not part of the frozen state: bring the script again
        f.write("/tmp/check.py", CHECK.encode())
        assert f.exec([py, "/tmp/check.py"]).stdout == want.stdout
    box.reset()
    assert "caf" not in box.exec("ls").stdout
    box.restore(lid)
    box.write("/tmp/check.py", CHECK.encode())
    assert box.exec([py, "/tmp/check.py"]).stdout == want.stdout
    box.exec("touch more")
    again = box.checkpoint()
    assert box.checkpoint() == again  # the same state freezes to the same id


def test_cgroup_freeze_protocols(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """freeze()/thaw() on v2 (cgroup.freeze + cgroup.events) and v1 (freezer.state) files;
    a freezer that never finishes is thawed again and reported (False)."""
    from ceiling.sandbox import _cgroup
    from ceiling.sandbox._cgroup import Cgroup

    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.freeze").write_text("0")
    (v2 / "cgroup.events").write_text("populated 1\nfrozen 1\n")
    cg = Cgroup([v2], True, True)
    assert cg.can_freeze and cg.freeze(timeout_s=0.5)
    assert (v2 / "cgroup.freeze").read_text() == "1"
    cg.thaw()
    assert (v2 / "cgroup.freeze").read_text() == "0"
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "freezer.state").write_text("THAWED")
    cg = Cgroup([tmp_path / "pids", v1], True, False)
    assert cg.freeze(timeout_s=0.5) and (v1 / "freezer.state").read_text() == "FROZEN"
    cg.thaw()
    real = _cgroup._write
    # a kernel that stays FREEZING (a task that never reaches the freezer)
    monkeypatch.setattr(_cgroup, "_write", lambda path, value: real(
        path, "FREEZING" if value == "FROZEN" else value))
    assert cg.freeze(timeout_s=0.05) is False
    assert (v1 / "freezer.state").read_text() == "THAWED"
    assert not Cgroup([tmp_path], True, True).can_freeze
    assert Cgroup([tmp_path], True, True).freeze() is False


def test_tree_layers_keep_non_utf8_names(tmp_path: Path) -> None:
    """The floor's file trees carry any name (surrogateescape str), hash it and write it back
    as the original bytes; the local backend's checkpoint goes through them."""
    import warnings

    from ceiling._tree import read_tree, tree_hash
    from ceiling.sandbox import LocalSandboxWarning

    name = os.fsdecode(b"caf\xe9/\xff\xfe.txt")
    tree = {name: FileEntry.text("x\n"), "ok.txt": FileEntry.text("y\n"),
            "l": FileEntry.symlink(os.fsdecode(b"caf\xe9"))}
    store = LayerStore(tmp_path / "store")
    lid = store.put_tree(tree)
    assert os.path.exists(os.path.join(os.fsencode(store.path(lid)), b"caf\xe9", b"\xff\xfe.txt"))
    back = read_tree(store.path(lid), allow_outside_links=True)
    assert tree_hash(back) == lid == tree_hash(tree)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalSandboxWarning)
        with open_sandbox([tree], backend="local", store=store) as sb:
            sb.exec("echo z > \"$(printf 'z\\377')\"")
            ck = sb.checkpoint()
            sb.reset()
            sb.restore(ck)
            assert sb.exec("ls | od -An -c | tr -d ' \\n'").stdout.count("377") == 1


def test_freezing_a_dead_sandbox_is_an_error_not_an_empty_state(box: Sandbox) -> None:
    """The old path walk of a missing folder froze nothing and called it the final state."""
    from ceiling import SandboxError

    assert isinstance(box, NamespaceSandbox)
    box.exec("echo changed > a.txt")
    h = box._holder()
    h.proc.kill()
    h.proc.wait()
    for freeze in (box.checkpoint, box.fork):
        with pytest.raises(SandboxError) as e:
            freeze()
        assert not isinstance(e.value, StateRejected)


def test_paused_stops_everything_for_the_block(box: Sandbox) -> None:
    """``paused()``: a host reader of the live files sees one moment (a counter that a
    background job bumps stands still), and the job runs again afterwards."""
    assert isinstance(box, NamespaceSandbox)
    box.exec("(i=0; while :; do i=$((i+1)); echo $i > n.tmp; mv n.tmp n; done) "
             ">/dev/null 2>&1 & sleep 0.3")
    n = box.host_path() / "n"
    with box.paused():
        first = n.read_text()
        import time

        time.sleep(0.3)
        assert n.read_text() == first
    box.exec("sleep 0.3")
    assert n.read_text() != first
