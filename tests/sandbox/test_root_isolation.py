"""The sandbox root is an allow-list, not the host (issue 9, "the host is visible").

Each test is an attack by code inside a namespace sandbox, run through ``sb.exec`` as an agent
would: find ceiling's generators (import, path search, content search), read the checkout,
the layer store, home folders or host /etc files, write the runtime. The autouse
``host_unchanged`` fixture hashes the runtime, the store, the package and /etc targets
before and after every test. The sandbox must still do what tasks need (python, pytest, git,
coreutils), and ``network_of`` must share only the loopback.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ceiling
from ceiling import ConfigError, FileEntry
from ceiling.sandbox import (
    LayerStore,
    Sandbox,
    ceiling_home,
    namespaces_available,
    open_sandbox,
    runtime,
)
from ceiling.sandbox._launch import POOL

pytestmark = pytest.mark.skipif(namespaces_available() is not None,
                                reason=f"namespace backend unavailable: {namespaces_available()}")

PKG = Path(ceiling.__file__).resolve().parent  # the installed package (generators inside)
CHECKOUT = next((p for p in PKG.parents if (p / "pyproject.toml").exists()), PKG.parent)
HIDDEN = sorted({str(PKG), str(CHECKOUT), os.path.realpath(sys.prefix), "/root/.ceiling",
                 "/work", "/home", "/var", "/srv", "/mnt", "/opt/pypi", "/boot"})


def digest(*paths: str | Path) -> str:
    """Hash of paths: type, mode, owner and content of every entry below them."""
    h = hashlib.sha256()
    for root in map(Path, paths):
        items = [root] + (sorted(root.rglob("*")) if root.is_dir() and not root.is_symlink()
                          else [])
        for p in items:
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                h.update(f"{p}:missing".encode())
                continue
            h.update(f"{p}:{st.st_mode:o}:{st.st_uid}:{st.st_size}".encode())
            if stat.S_ISREG(st.st_mode) and st.st_size < (16 << 20):
                h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(autouse=True)
def host_unchanged() -> Iterator[None]:
    targets = [runtime.current().path, PKG / "sandbox", PKG / "envs" / "__init__.py",
               "/etc/passwd", "/etc/shadow", "/etc/hosts", os.path.realpath(sys.executable)]
    before = digest(*targets)
    yield
    assert digest(*targets) == before


def test_ceiling_cannot_be_imported(sb: Sandbox) -> None:
    site = f"{sys.prefix}/lib/python3.{sys.version_info[1]}/site-packages"
    guesses = ":".join([str(PKG.parent), str(CHECKOUT / "src"), site,
                        "/proc/1/root" + str(PKG.parent)])
    system = ["/usr/bin/python3"] if os.path.exists("/usr/bin/python3") else []
    for py in ("python3", sb.python, "python3 -I", *system):
        r = sb.exec(f"{py} -c 'import ceiling.envs; print(ceiling.__file__)'",
                    env={"PYTHONPATH": guesses})
        assert r.exit_code != 0 and "No module named 'ceiling'" in r.stderr, (py, r)
    r = sb.exec("python3 -c 'import importlib.metadata as m; print(m.version(\"ceiling\"))'")
    assert r.exit_code != 0 and "PackageNotFoundError" in r.stderr


def test_host_folders_are_not_there(sb: Sandbox) -> None:
    store = LayerStore().root.resolve()
    paths = [*HIDDEN, str(store), str(ceiling_home()), runtime.current().path]
    r = sb.exec(" ".join(f"test -e {p} && echo SEEN {p};" for p in paths) + " echo end")
    assert r.stdout == "end\n", r
    r = sb.exec("find /root /opt -mindepth 1 -maxdepth 3 | sort; ls -A /sys; echo end")
    base = runtime.current().base_prefix
    allowed = {"/opt/ceiling", "/opt/ceiling/runtime"} | {
        str(Path(base).parents[i]) for i in range(len(Path(base).parts) - 2)} | {base}
    shown = set(r.stdout.split()[:-1]) - {p for p in r.stdout.split() if p.startswith(
        ("/opt/ceiling/runtime/", base + "/"))}
    assert shown <= allowed, shown
    assert r.stdout.endswith("end\n")  # /sys is empty: no host cgroup tree, no devices
    # PID 1's command line is world-readable: it must not name the checkout or the venv
    r = sb.exec("cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null | tr '\\0' ' '")
    for p in (str(PKG), str(CHECKOUT), os.path.realpath(sys.prefix), sys.executable):
        assert p not in r.stdout, (p, r.stdout[:500])


def test_generator_source_is_nowhere(sb: Sandbox) -> None:
    """Search the whole visible tree for ceiling's files by path and by content."""
    r = sb.exec("find / -path /proc -prune -o \\( -path '*ceiling/envs*' -o -name '_holder.py'"
                " -o -name 'ceiling-*.dist-info' -o -name '__editable__*ceiling*' \\) -print"
                " 2>/dev/null; echo end", timeout=120)
    assert r.stdout == "end\n", r.stdout[-2000:]
    r = sb.exec("find / -path /proc -prune -o -type f \\( -name '*.py' -o -name '*.pth' \\)"
                " -print 2>/dev/null | xargs -d '\\n' grep -l -e 'from ceiling' -e "
                "'import ceiling' -e 'ceiling.envs' 2>/dev/null; echo end", timeout=120)
    assert r.stdout == "end\n", r.stdout[-2000:]


def test_host_etc_is_not_the_sandbox_etc(sb: Sandbox) -> None:
    r = sb.exec("cat /etc/shadow /etc/gshadow /etc/sudoers /etc/gitconfig /etc/machine-id"
                " 2>&1; ls -A /etc; cat /etc/passwd; getent passwd root sandbox; id -un")
    for name in ("shadow", "gshadow", "sudoers", "gitconfig", "machine-id"):
        assert f"/etc/{name}: No such file or directory" in r.stdout
    host_users = {line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines()}
    shown = {line.split(":")[0] for line in r.stdout.splitlines() if line.count(":") >= 6}
    assert shown == {"root", "sandbox", "nobody"} and shown != host_users
    assert r.stdout.endswith("sandbox\n")
    r = sb.exec("echo x > /etc/passwd; touch /etc/new; echo x > /etc/alternatives/new; echo end")
    assert r.stdout == "end\n" and r.stderr.count("Read-only file system") == 3, r


def test_runtime_and_base_interpreter_are_read_only(sb: Sandbox) -> None:
    rt = runtime.current()
    site = f"{runtime.INSIDE}/lib/python3.{sys.version_info[1]}/site-packages"
    r = sb.exec(f"echo 'import os' > {site}/sitecustomize.py; echo x >> {site}/pytest/__init__.py;"
                f" touch {rt.base_prefix}/lib/x; mkdir {rt.masks[0]}/x;"
                f" ls -A {rt.masks[0]}; ln -sf /tmp/evil {runtime.INSIDE}/bin/python3; echo end")
    assert r.stdout == "end\n" and r.stderr.count("Read-only file system") >= 4, r
    assert "Permission denied" in r.stderr  # pytest/__init__.py: root's 0644 file
    r = sb.exec("python3 -c 'import sys; print(sys.prefix, sys.flags.no_user_site)';"
                " python3 -m site | grep -c site-packages")
    assert r.stdout.startswith(f"{runtime.INSIDE} ")


def test_the_sandbox_still_works(sb: Sandbox) -> None:
    sb.write("test_tiny.py", b"import json\n\ndef test_ok():\n    assert json.loads('[1]') == [1]\n")
    r = sb.exec("python3 -m pytest -q -p no:cacheprovider test_tiny.py && pytest -q"
                " -p no:cacheprovider test_tiny.py | tail -1")
    assert r.exit_code == 0 and r.stdout.count("1 passed") == 2, r
    r = sb.exec("python3 -c 'import sqlite3, ssl, ctypes, zlib, json, venv; print(42)'")
    assert r.stdout == "42\n", r
    r = sb.exec("git init -q . && git add -A && git -c user.name=a -c user.email=a@b commit -qm x"
                " && git log --oneline | wc -l && git status --porcelain | wc -l")
    assert r.stdout == "1\n0\n", r
    r = sb.exec("printf 'b\\na\\n' | sort | head -1; echo hi | sed s/hi/ho/; wc -l < a.txt;"
                " awk 'BEGIN{print 1+1}'; date +%Y >/dev/null && echo date; nproc >/dev/null"
                " && echo nproc; hostname; python3 -c 'import socket as s; print(s.gethostbyname(\"localhost\"))'")
    assert r.stdout == "a\nho\n1\n2\ndate\nnproc\nsandbox\n127.0.0.1\n", r
    sb.reset()
    assert sb.exec("python3 -c 'import pytest'").exit_code == 0


def test_network_of_shares_only_the_loopback(tree: dict[str, FileEntry]) -> None:
    with open_sandbox([tree]) as a:
        a.write("secret.txt", b"A-ONLY\n")
        a.exec("python3 -m http.server 8811 --bind 127.0.0.1 >/dev/null 2>&1 &")
        with open_sandbox([{"b.txt": FileEntry.text("b\n")}], network_of=a) as b:
            get = ("python3 -c \"import time, urllib.request as u\nfor _ in range(100):\n try:"
                   " print(u.urlopen('http://127.0.0.1:8811/secret.txt').read().decode()); break"
                   "\n except OSError: time.sleep(0.05)\"")
            assert b.exec(get).stdout == "A-ONLY\n\n"  # what A serves, B may fetch
            r = b.exec("cat secret.txt /workspace/secret.txt; ls; ps -e | grep -c python;"
                       " for p in /proc/[0-9]*; do cat $p/root/workspace/secret.txt; done")
            assert "A-ONLY" not in r.stdout and r.stdout.split() == ["b.txt", "0"], r
            assert b.exec("cat /proc/net/dev | grep -c :").stdout == "1\n"  # only lo
            b.exec("python3 -m http.server 8812 --bind 127.0.0.1 >/dev/null 2>&1 &")
            r = a.exec(get.replace("8811", "8812").replace("secret.txt", "b.txt"))
            assert r.stdout == "b\n\n", r  # and the other way round
        # B closed: A keeps its network and its server
        assert a.exec(get).stdout == "A-ONLY\n\n"
        assert a.exec("cat secret.txt").stdout == "A-ONLY\n"
    with open_sandbox([tree]) as a:
        b = open_sandbox([tree], network_of=a)
        try:
            b.exec("python3 -m http.server 8813 --bind 127.0.0.1 >/dev/null 2>&1 &")
            a.close()  # the peer goes; B keeps its (shared) loopback and its own server
            r = b.exec(get.replace("8811", "8813").replace("secret.txt", "a.txt"))
            assert r.stdout == "hello\n\n", r
        finally:
            b.close()


def test_network_of_checks_its_argument(tree: dict[str, FileEntry]) -> None:
    with pytest.warns(UserWarning), open_sandbox([tree], backend="local") as loc, \
            pytest.raises(ConfigError):
        open_sandbox([tree], network_of=loc)
    a = open_sandbox([tree])
    a.close()
    with pytest.raises(Exception, match="closed"):
        open_sandbox([tree], network_of=a)


def test_sandbox_paths_are_bound_read_only(tree: dict[str, FileEntry],
                                           monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    import tempfile

    extra = Path(tempfile.mkdtemp(prefix="ceiling-tool-", dir="/var/tmp"))
    try:
        (extra / "bin").mkdir()
        (extra / "bin" / "tool").write_text("#!/bin/sh\necho tool ran\n")
        os.chmod(extra / "bin" / "tool", 0o755)
        (extra / "data.txt").write_text("host data\n")
        os.chmod(extra / "data.txt", 0o666)  # world-writable: only the bind protects it
        (extra / "secret").write_text("TOPSECRET\n")
        os.chmod(extra / "secret", 0o600)
        os.chmod(extra, 0o777)
        before = digest(extra)
        with open_sandbox([tree]):
            pass  # leaves a warm holder started without the path: it must not be reused
        POOL.settle()
        monkeypatch.setenv("CEILING_SANDBOX_PATHS", str(extra))
        with open_sandbox([tree]) as sb:
            r = sb.exec(f"{extra}/bin/tool; touch {extra}/x; echo $?; ls /var")
            assert r.stdout == f"tool ran\n1\n{extra.parent.name}\n", r
            r = sb.exec(f"cd {extra}; echo pwned > data.txt; echo x >> data.txt; rm -f data.txt;"
                        " mv bin b2; chmod 777 secret; ln -s /etc/passwd l; cat secret; echo end")
            assert r.stdout == "end\n" and "TOPSECRET" not in r.stderr, r
            assert r.stderr.count("Read-only file system") >= 5, r
        assert digest(extra) == before
    finally:
        import shutil

        shutil.rmtree(extra)
    for bad in (str(CHECKOUT), str(PKG / "envs"), str(Path(sys.prefix) / "lib"), "/tmp",
                str(tmp_path), "relative/path", "/", "/does/not/exist"):
        monkeypatch.setenv("CEILING_SANDBOX_PATHS", bad)
        with pytest.raises(ConfigError):
            runtime.sandbox_paths()


def test_a_warm_start_uses_the_root_read_when_it_was_asked_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool's background starts (the second spare chains after the first) build the
    root that was current when the refill was asked for: a later change of the
    environment, even to a bad value, neither raises in the pool's thread (a CI run saw
    ``ConfigError`` escape as an unhandled thread exception) nor files a holder under a
    key it was not built for."""
    import threading

    from ceiling.sandbox import Limits

    POOL.drain()
    seen: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda a: seen.append(a.exc_value))
    store, limits = LayerStore(), Limits()
    rt = runtime.current()
    POOL.refill(store, limits)
    monkeypatch.setenv("CEILING_SANDBOX_PATHS", "/does/not/exist")
    POOL.settle()
    assert seen == []
    monkeypatch.delenv("CEILING_SANDBOX_PATHS")
    key = POOL.key(store, limits, rt)
    assert key == POOL.key(store, limits)
    assert len(POOL._idle.get(key) or ()) == POOL.per_key  # both spares, under their key
    POOL.drain()


def test_runtime_extra_packages(tree: dict[str, FileEntry]) -> None:
    with pytest.raises(ConfigError, match="never holds ceiling"):
        runtime.build(extra=["ceiling"])
    with pytest.raises(ConfigError, match="pip install"):
        runtime.build(extra=["no-such-distribution-xyz"])
    with open_sandbox([tree]) as sb:
        assert sb.exec("python3 -c 'import yaml'").exit_code != 0
    try:
        rt = runtime.build(extra=["PyYAML"])
        assert "pyyaml" in rt.packages and rt is runtime.current()
        with open_sandbox([tree]) as sb:
            r = sb.exec("python3 -c 'import yaml, pytest; print(yaml.safe_load(\"a: 1\"))'")
            assert r.stdout == "{'a': 1}\n", r
    finally:
        runtime.build()  # back to the default set for the rest of this process
    assert "pyyaml" not in runtime.current().packages


def test_runtime_build_is_atomic_and_shared(tmp_path: Path) -> None:
    """Concurrent builders (separate processes) agree on one runtime and leave no temp."""
    import subprocess

    env = {**os.environ, "CEILING_HOME": str(tmp_path)}
    env.pop("CEILING_RUNTIME_DIR", None)
    code = "from ceiling.sandbox import runtime; print(runtime.current().path)"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
             for _ in range(4)]
    paths = {p.communicate(timeout=120)[0].decode().strip() for p in procs}
    assert len(paths) == 1 and all(p.returncode == 0 for p in procs)
    built = Path(paths.pop())
    assert [p.name for p in (tmp_path / "runtime").iterdir()] == [built.name]
    assert (built / "pyvenv.cfg").read_text().count("include-system-site-packages = false")


def test_runtime_folder_others_can_write_is_refused(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A runtime runs in every sandbox: one found in a folder others may write is refused."""
    from ceiling.sandbox import _runtime

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("CEILING_RUNTIME_DIR", str(shared))
    monkeypatch.setattr(_runtime, "_current", {})
    with pytest.raises(ConfigError, match="writable by others"):
        runtime.current()


def test_no_way_around_the_root(sb: Sandbox) -> None:
    """File handles, /proc links and the mount table do not reach the host's tree."""
    code = ("import ctypes, os\nl = ctypes.CDLL(None, use_errno=True)\n"
            "h = ctypes.create_string_buffer(136)\nh[0:4] = (128).to_bytes(4, 'little')\n"
            "m = ctypes.c_int()\n"
            "print(l.name_to_handle_at(-100, b'/usr/bin/env', h, ctypes.byref(m), 0))\n"
            "print(l.open_by_handle_at(os.open('/usr', os.O_RDONLY), h, 0), ctypes.get_errno())\n")
    r = sb.exec([sb.python, "-c", code])
    assert r.stdout.split("\n")[1].split() == ["-1", "1"], r  # EPERM: no CAP_DAC_READ_SEARCH
    r = sb.exec("ls /proc/1/root/ /proc/1/cwd/ /proc/1/fd/ 2>&1; ls /proc/self/root/../../;"
                " cd /..; ls; readlink -f /proc/self/root")
    assert r.stdout.count("Permission denied") == 3, r
    assert "work" not in r.stdout.split() and "home" not in r.stdout.split()
    r = sb.exec("cat /proc/self/mountinfo")
    assert str(CHECKOUT) not in r.stdout and os.path.realpath(sys.prefix) not in r.stdout
