"""The local backend (warns, still limited), the layer store, and backend selection errors."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ceiling import ConfigError, SandboxUnavailable
from ceiling.cards import FileEntry
from ceiling.sandbox import LayerStore, LocalSandboxWarning, _launch, open_sandbox


def test_local_warns_on_every_start_and_works(tree: dict[str, FileEntry]) -> None:
    for _ in range(2):
        with pytest.warns(LocalSandboxWarning, match="NO isolation"):
            sb = open_sandbox([tree], backend="local")
        with sb:
            assert sb.exec("cat a.txt").stdout == "hello\n"
            sb.exec("echo x > a.txt; rm run.sh")
            lid = sb.checkpoint()
            sb.reset()
            assert sorted(os.listdir(sb.host_path())) == ["a.txt", "run.sh", "src"]
            sb.restore(lid)
            assert sorted(os.listdir(sb.host_path())) == ["a.txt", "src"]
            with pytest.raises(PermissionError):
                sb.read("/etc/passwd")


def test_local_timeout_cap_and_background_cleanup(tree: dict[str, FileEntry]) -> None:
    with pytest.warns(LocalSandboxWarning):
        sb = open_sandbox([tree], backend="local")
    with sb:
        r = sb.exec("sleep 20", timeout=0.2)
        assert r.timed_out and r.exit_code == -9
        r = sb.exec(f"head -c {sb.limits.max_output_bytes * 3} /dev/zero")
        assert r.truncated and len(r.stdout) == sb.limits.max_output_bytes
        pid = int(sb.exec("sleep 30 >/dev/null 2>&1 & echo $!").stdout)
        sb.reset()
        assert _gone(pid)
    root = sb.host_path().parent
    assert not root.exists()


def _gone(pid: int) -> bool:
    for _ in range(500):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.01)
    return False


def test_namespace_unavailable_names_local(monkeypatch: pytest.MonkeyPatch,
                                           tree: dict[str, FileEntry]) -> None:
    monkeypatch.setattr(_launch, "namespaces_available", lambda: "no namespaces here")
    with pytest.raises(SandboxUnavailable, match="local"):
        open_sandbox([tree])


def test_unknown_backend(tree: dict[str, FileEntry]) -> None:
    with pytest.raises(ConfigError, match="namespace"):
        open_sandbox([tree], backend="docker")


def test_store_dedupes_and_chains(tmp_path: Path, tree: dict[str, FileEntry]) -> None:
    store = LayerStore(tmp_path / "layers")
    a = store.put_tree(tree)
    assert store.put_tree(dict(tree)) == a
    assert len([p for p in (tmp_path / "layers").iterdir() if p.is_dir()]) == 1
    b = store.put_tree({"b": FileEntry.text("b")})
    assert store.expand([a, b, a]) == [a, b]
    with pytest.raises(Exception, match="no layer"):
        store.expand(["0" * 64])


def test_root_owned_layer_is_handed_to_sandbox_user(tree: dict[str, FileEntry]) -> None:
    if os.geteuid() != 0 or _launch.namespaces_available():
        pytest.skip("needs root and the namespace backend")
    store = LayerStore()
    lid = store.put_tree(tree)
    for p in [store.path(lid), *store.path(lid).rglob("*")]:
        os.lchown(p, 0, 0)  # as an older ceiling left it
    with open_sandbox([lid], store=store) as sb:
        assert sb.exec("echo new >> a.txt && mkdir src/sub && cat a.txt").stdout == "hello\nnew\n"


def test_same_checkpoint_from_many_threads(tree: dict[str, FileEntry]) -> None:
    if _launch.namespaces_available():
        pytest.skip("needs the namespace backend")
    import threading

    boxes = [open_sandbox([tree]) for _ in range(3)]
    ids: list[str] = []
    try:
        for b in boxes:
            b.exec("echo same > a.txt")
        threads = [threading.Thread(target=lambda b=b: ids.append(b.checkpoint())) for b in boxes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for b in boxes:
            b.close()
    assert len(ids) == 3 and len(set(ids)) == 1
