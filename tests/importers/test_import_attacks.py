"""Attack tests for the surfaces issue 15 added: card-declared paths and mounts, Dockerfile
sources and destinations, symlinks in task folders, and the build sandbox. Nothing a task
declares may make the host read or write a host path, and every refusal is counted."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
from pathlib import Path

import pytest

from ceiling._errors import ConfigError
from ceiling.cards import FileEntry
from ceiling.importers import import_harbor
from ceiling.sandbox import Limits, open_sandbox
from ceiling.sandbox import _runtime as runtime
from ceiling.sandbox._image import (
    FilesStep,
    RunStep,
    build_image,
    check_files_tree,
    check_layer_dir,
)
from ceiling.sandbox._launch import _layout_cfg, namespaces_available

needs_ns = pytest.mark.skipif(namespaces_available() is not None,
                              reason=f"namespace backend unavailable: {namespaces_available()}")
TEST_SH = "#!/bin/bash\npytest /tests/test_outputs.py -rA\n"
TEST_PY = "def test_x():\n    assert open('/app/x').read() == 'x'\n"


def _task(root: Path, name: str, dockerfile: str, *, files: dict[str, str] | None = None,
          links: dict[str, str] | None = None, test_sh: str = TEST_SH,
          test_py: str = TEST_PY) -> None:
    t = root / name
    for d in ("environment", "tests", "solution"):
        (t / d).mkdir(parents=True)
    (t / "task.toml").write_text("[agent]\ntimeout_sec = 60.0\n")
    (t / "instruction.md").write_text("Write x to /app/x.\n")
    (t / "environment" / "Dockerfile").write_text(dockerfile)
    for rel, text in (files or {}).items():
        (t / "environment" / rel).parent.mkdir(parents=True, exist_ok=True)
        (t / "environment" / rel).write_text(text)
    for rel, target in (links or {}).items():
        (t / "environment" / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, t / "environment" / rel)
    (t / "tests" / "test.sh").write_text(test_sh)
    (t / "tests" / "test_outputs.py").write_text(test_py)
    (t / "solution" / "solve.sh").write_text("#!/bin/bash\necho -n x > /app/x\n")


def test_hostile_task_folders_are_refused_by_reason(tmp_path: Path) -> None:
    ds, out = tmp_path / "dataset", tmp_path / "out"
    w = "FROM ubuntu:24.04\nWORKDIR /app\n"
    _task(ds, "copy-dotdot", w + "COPY ../../../../etc/passwd /app/x\n")
    _task(ds, "symlink-file", w + "COPY evil /app/evil\n", links={"evil": "/etc/passwd"})
    _task(ds, "symlink-dir", w + "COPY d/ /app/d/\n", links={"d": "/root"})
    _task(ds, "symlink-nested", w + "COPY data/ /app/data/\n", files={"data/ok.txt": "1"},
          links={"data/shadow": "/etc/shadow"})
    _task(ds, "dest-proc", w + "COPY a /proc/self/a\n", files={"a": "1"})
    _task(ds, "dest-tmp", w + "COPY a /tmp/a\n", files={"a": "1"})
    _task(ds, "dest-runtime", w + "COPY a /opt/ceiling/runtime/bin/python3\n", files={"a": "1"})
    _task(ds, "dest-dotdot", w + "COPY a /app/../../dev/a\n", files={"a": "1"})
    _task(ds, "workdir-proc", "FROM ubuntu\nWORKDIR /proc/app\n")
    _task(ds, "workdir-usr", "FROM ubuntu\nWORKDIR /usr/src/app\n")
    _task(ds, "shell", w + 'SHELL ["/bin/bash", "-c"]\n')
    _task(ds, "volume", w + "VOLUME /data\n")
    _task(ds, "add-url", w + "ADD https://example.invalid/x.sh /app/x.sh\n")
    _task(ds, "copy-from", w + "COPY --from=builder /x /app/x\n")
    _task(ds, "multi-stage", "FROM a AS b\nRUN true\nFROM c\nWORKDIR /app\n")
    _task(ds, "run-mount", w + "RUN --mount=type=bind,source=/,target=/host ls /host\n")
    _task(ds, "tests-read", w, test_py="def test_x():\n    open('/tests/expected.json')\n")
    _task(ds, "test-sh-extra", w, test_sh="#!/bin/bash\npython3 /tests/prep.py\npytest /tests\n")
    _task(ds, "fine", w + "COPY a /app/a\nCOPY conf /etc/app.conf\n", files={"a": "1", "conf": "k"})
    _task(ds, "instruction-link", w)
    (ds / "instruction-link" / "instruction.md").unlink()
    (ds / "instruction-link" / "instruction.md").symlink_to("/etc/hostname")
    _task(ds, "context-link", w + "COPY . /app/\n")
    shutil.rmtree(ds / "context-link" / "environment")
    (ds / "context-link" / "environment").symlink_to("/etc")
    rep = import_harbor(ds, out, build=False).as_dict()
    assert rep["refusals_by_reason"] == {
        "path:symlink outside the build context": 3, "path:reserved destination": 4,
        "dockerfile:WORKDIR reserved": 2, "path:COPY source outside the build context": 1,
        "dockerfile:SHELL": 1, "dockerfile:VOLUME": 1, "dockerfile:ADD url": 1,
        "dockerfile:COPY --from": 1, "dockerfile:multi-stage FROM": 1,
        "dockerfile:RUN --mount": 1, "tests:reads /tests": 1, "tests:test.sh command": 1,
        "path:symlink in the task folder": 2,
    }, rep
    assert (rep["imported"], rep["refused"]) == (1, 20)
    assert sorted(p.name for p in out.iterdir()) == ["fine"]  # nothing half-written
    fine = (out / "fine")
    assert (fine / "root" / "etc" / "app.conf").read_text() == "k"
    assert (fine / "workspace" / "a").read_text() == "1"


def test_layout_paths_are_checked() -> None:
    for bad in ("/proc/x", "/sys", "/dev/shm/x", "/etc", "/usr/local/app", "/tmp/x", "/",
                "/app/../etc", "app", "/opt/ceiling/runtime", "/a//b", "/.ceiling/layers"):
        with pytest.raises(ValueError):
            Limits(workdir=bad)
        with pytest.raises(ValueError):
            Limits(home=bad)
    cfg = runtime.current().holder_cfg()
    covering = "/" + str(cfg["base_prefix"]).split("/")[1]  # would hide the interpreter
    if covering not in ("/usr", "/opt", "/tmp"):
        with pytest.raises(ConfigError, match="would cover or sit inside"):
            _layout_cfg(Limits(workdir=covering), cfg)
    with pytest.raises(ConfigError, match="overlap"):
        _layout_cfg(Limits(workdir="/app", home="/app/home"), cfg)


def test_image_layers_must_come_from_the_root_only_store(tmp_path: Path) -> None:
    fake = tmp_path / "layer" / "root"
    fake.mkdir(parents=True)
    (tmp_path / "layer" / "meta.json").write_text("{}")
    for p in ("/", "/root", "/etc", str(fake), str(tmp_path)):
        with pytest.raises(ConfigError, match="not a built image layer|does not exist"):
            check_layer_dir(p)


def test_files_steps_refuse_links_reserved_folders_and_the_workspace() -> None:
    link_escape = {"etc/x": FileEntry.symlink("/"), "etc/x/passwd": FileEntry(b"r00t")}
    for tree in (link_escape, {"proc/self/x": FileEntry(b"")}, {"tmp/x": FileEntry(b"")},
                 {"app/x": FileEntry(b"")}, {"../etc/x": FileEntry(b"")}):
        with pytest.raises(Exception, match="symlink|reserves|workspace|escapes"):
            check_files_tree(tree, workdir="/app")


@needs_ns
def test_card_files_at_etc_never_replace_the_sandbox_users(tmp_path: Path) -> None:
    host = hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest()
    img = build_image([FilesStep({"etc/passwd": FileEntry(b"root::0:0::/:/bin/sh\n"),
                                  "etc/app.conf": FileEntry(b"k=v\n")})],
                      workdir="/app", workspace={})
    lim = Limits(workdir="/app", home="/home/agent", rootfs=img.layers)
    with open_sandbox([{"x": FileEntry(b"1")}], limits=lim) as sb:
        r = sb.exec("cat /etc/app.conf; grep -c '^sandbox:' /etc/passwd; id -u; cat x; echo; pwd")
        out = r.stdout.split()
        assert out == ["k=v", "1", out[2], "1", "/app"] and out[2] != "0", r
        assert sb.exec("echo y > /etc/app.conf").exit_code != 0  # the image is read-only
    assert hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest() == host


@needs_ns
def test_build_sandbox_cannot_reach_host_files_or_kernel_knobs(tmp_path: Path) -> None:
    before = Path("/proc/sys/kernel/hostname").read_text()
    host_srv = socket.socket()
    host_srv.bind(("127.0.0.1", 0))
    host_srv.listen(4)
    port = host_srv.getsockname()[1]
    curl = "curl -s -m 10 -o /dev/null"
    probe = (
        f"({curl} https://example.com/ && echo web-ok || echo web-denied;"
        f" {curl} -x http://127.0.0.1:3128 http://127.0.0.1:{port}/ && echo hostlo-ok"
        " || echo hostlo-via-proxy-denied;"
        f" {curl} --noproxy '*' http://127.0.0.1:{port}/ && echo hostlo-ok"
        " || echo hostlo-direct-denied"
        ") 2>/dev/null > /app/net.txt;"
        "(echo pwned > /proc/sys/kernel/hostname && echo sysctl-ok || echo sysctl-denied;"
        " mount -t tmpfs t /mnt 2>/dev/null && echo mount-ok || echo mount-denied;"
        " mknod /tmp/sda b 8 0 2>/dev/null && echo mknod-ok || echo mknod-denied;"
        " test -e /etc/shadow && echo shadow-visible || echo shadow-absent;"
        " test -e /work && echo work-visible || echo work-absent;"
        " test -e /root/.pyenv && echo roothome-visible || echo roothome-absent;"
        " python3 -c 'import socket; socket.socket(socket.AF_UNIX)' && echo unix-ok"
        " || echo unix-denied;"
        " touch /usr/bin/ceiling-build-marker && echo usr-write-captured"
        ") 2>/dev/null > /app/report.txt")
    img = build_image([RunStep(probe, cwd="/app", workspace=True)], workdir="/app",
                      workspace={})
    host_srv.close()
    assert img.workspace["net.txt"].data.decode().split() == [
        "web-denied", "hostlo-via-proxy-denied", "hostlo-direct-denied"]
    report = img.workspace["report.txt"].data.decode().split()
    assert report == ["sysctl-denied", "mount-denied", "mknod-denied", "shadow-absent",
                      "work-absent", "roothome-absent", "unix-denied",
                      "usr-write-captured"], report
    assert not Path("/usr/bin/ceiling-build-marker").exists()  # the write went to the layer
    assert (Path(img.layers[0]) / "usr" / "bin" / "ceiling-build-marker").exists()
    assert Path("/proc/sys/kernel/hostname").read_text() == before
