"""The namespace backend's contract: exec, files, reset, checkpoint, fork, close."""

from __future__ import annotations

import threading

import pytest

from ceiling.cards import FileEntry
from ceiling.sandbox import ExecResult, LocalSandboxWarning, Sandbox, open_sandbox


def test_exec_runs_in_workspace_as_unprivileged_user(sb: Sandbox) -> None:
    r = sb.exec("pwd; id -u; cat a.txt; echo $WORKSPACE")
    uid = sb._h.uid  # type: ignore[attr-defined]  # its own uid from the pool (61001..)
    assert 61000 < uid <= 62000
    assert r == ExecResult(0, f"/workspace\n{uid}\nhello\n/workspace\n", "", r.duration_s)


def test_exec_argv_stdin_env_cwd(sb: Sandbox) -> None:
    assert sb.exec(["cat"], stdin=b"in").stdout == "in"
    assert sb.exec("echo $X", env={"X": "y"}).stdout == "y\n"
    assert sb.exec("pwd", cwd="src").stdout == "/workspace/src\n"
    r = sb.exec("no-such-cmd")
    assert r.exit_code == 127 and "not found" in r.stderr


def test_host_python_and_pytest_work_inside(sb: Sandbox) -> None:
    sb.write("test_x.py", b"def test_ok():\n    assert 1\n")
    r = sb.exec([sb.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_x.py"])
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout


def test_timeout_kills_tree(sb: Sandbox) -> None:
    r = sb.exec("sleep 30 & sleep 30", timeout=0.3)
    assert r.timed_out and r.exit_code == -9
    assert "sleep" not in sb.exec("ps -eo comm").stdout


def test_background_process_survives_until_reset(sb: Sandbox) -> None:
    sb.exec(f"{sb.python} -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &")
    r = sb.exec("for i in 1 2 3 4 5 6 7 8 9 10; do curl -sf http://127.0.0.1:8765/a.txt && break;"
                " sleep 0.2; done")
    assert r.stdout == "hello\n"
    sb.reset()
    assert "python" not in sb.exec("ps -eo comm").stdout


def test_read_write_and_escapes(sb: Sandbox) -> None:
    sb.write("new/dir/f.txt", b"data", mode=0o600)
    assert sb.read("new/dir/f.txt") == b"data"
    assert sb.read("/workspace/new/dir/f.txt") == b"data"
    assert sb.exec("stat -c %a new/dir/f.txt").stdout == "600\n"
    sb.write("/tmp/t", b"t")
    assert sb.read("/tmp/t") == b"t"
    with pytest.raises(FileNotFoundError):
        sb.read("missing")
    with pytest.raises(IsADirectoryError):
        sb.read("src")
    for bad in ("/etc/passwd", "../etc/passwd", "/workspace/../etc/hostname"):
        with pytest.raises(PermissionError):
            sb.read(bad)
    sb.exec("ln -s /etc/passwd link; ln -s /etc escdir")
    with pytest.raises(PermissionError):
        sb.read("link")
    with pytest.raises(PermissionError):
        sb.write("escdir/x", b"x")
    with pytest.raises(PermissionError):
        sb.write("link", b"x")


def test_reset_restores_initial_state(sb: Sandbox) -> None:
    sb.exec("echo changed > a.txt; rm run.sh; mkdir d; touch d/x /tmp/y /dev/shm/z")
    sb.reset()
    # files the sandbox user made (root-owned mount points of host folders under /tmp, such
    # as a virtualenv there, are part of the fresh state)
    r = sb.exec("cat a.txt; ls; find /tmp /dev/shm -xdev -mindepth 1 ! -user 0 | wc -l")
    assert r.stdout == "hello\na.txt\nrun.sh\nsrc\n0\n"


def test_checkpoint_restore_fork(sb: Sandbox) -> None:
    sb.exec("echo v2 > a.txt; rm run.sh; mkdir -p new && echo n > new/f")
    lid = sb.checkpoint()
    assert sb.checkpoint() == lid  # same content, same id
    sb.reset()
    assert sb.exec("cat a.txt").stdout == "hello\n"
    sb.restore(lid)
    assert sb.exec("cat a.txt new/f; ls").stdout == "v2\nn\na.txt\nnew\nsrc\n"
    with sb.fork() as f:
        f.exec("echo forked > a.txt")
        assert f.exec("cat a.txt; ls").stdout == "forked\na.txt\nnew\nsrc\n"
        assert sb.exec("cat a.txt").stdout == "v2\n"
        f.reset()  # a fork's initial state is the state it was forked from
        assert f.exec("cat a.txt").stdout == "v2\n"


def test_host_path_shows_merged_workspace(sb: Sandbox) -> None:
    sb.exec("echo z > z.txt")
    root = sb.host_path()
    assert (root / "z.txt").read_text() == "z\n"
    assert (root / "a.txt").read_text() == "hello\n"


def test_checkpoint_keeps_deletions_and_replaced_dirs(sb: Sandbox) -> None:
    sb.exec("rm -rf src && mkdir src && echo new > src/x && rm run.sh")  # opaque dir, whiteout
    first = sb.checkpoint()
    sb.exec("echo again > a.txt")
    second = sb.checkpoint()  # a diff on top of the first
    with open_sandbox([second]) as g:
        assert g.exec("ls -R; cat a.txt").stdout == ".:\na.txt\nsrc\n\n./src:\nx\nagain\n"
    with pytest.warns(LocalSandboxWarning), open_sandbox([first], backend="local") as loc:
        assert sorted(p.name for p in loc.host_path().rglob("*")) == ["a.txt", "src", "x"]


def test_concurrent_calls_are_serialised(sb: Sandbox) -> None:
    results: list[str] = []

    def work(i: int) -> None:
        results.append(sb.exec(f"echo {i} > f{i}; cat f{i}").stdout)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["0\n", "1\n", "2\n", "3\n"]


def test_huge_command_line(sb: Sandbox) -> None:
    body = "x" * 100_000  # bigger than one control datagram, below the kernel's 128 KiB/arg
    r = sb.exec(f"printf %s '{body}' | wc -c")
    assert r.stdout.strip() == "100000"
    r = sb.exec(["true", "x" * 300_000])  # past the kernel's limit: a clear failure
    assert r.exit_code == 126 and "Argument list too long" in r.stderr


def test_fork_layers_are_private_and_deleted_after_close(sb: Sandbox) -> None:
    store = sb.store  # type: ignore[attr-defined]
    sb.exec("echo one > a.txt")
    f1 = sb.fork()
    lid1 = f1.layer_ids[-1]  # type: ignore[attr-defined]
    assert store.meta(lid1).get("private") and store.has(lid1)
    f1.exec("echo two > a.txt")
    f2 = f1.fork()  # stands on lid1 too
    lid2 = f2.layer_ids[-1]  # type: ignore[attr-defined]
    f1.close()
    assert store.has(lid1), "still used by the second fork"
    assert f2.exec("cat a.txt").stdout == "two\n"
    f2.close()
    assert not store.has(lid1) and not store.has(lid2)


def test_checkpoint_on_a_fork_publishes_its_layers(sb: Sandbox) -> None:
    store = sb.store  # type: ignore[attr-defined]
    sb.exec("echo one > a.txt")
    with sb.fork() as f:
        lid = f.layer_ids[-1]  # type: ignore[attr-defined]
        f.exec("echo two > b.txt")
        public = f.checkpoint()
    assert store.has(lid) and not store.meta(lid).get("private")
    with open_sandbox([public], store=store) as g:
        assert g.exec("cat a.txt b.txt").stdout == "one\ntwo\n"


def test_runtime_under_tmp_stays_usable_across_resets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime lives under $CEILING_HOME, under /tmp in tests (as in CI clones): it is
    cloned before the private /tmp hides the host's, so python and pytest keep working,
    read-only, across resets; no host venv is needed inside any more."""
    from ceiling import namespaces_available, open_sandbox
    from ceiling.sandbox import runtime

    if namespaces_available() is not None:
        pytest.skip(f"namespace backend unavailable: {namespaces_available()}")
    assert runtime.current().path.startswith("/tmp/")
    monkeypatch.setenv("CEILING_SANDBOX_POOL", "0")
    with open_sandbox([{"a.txt": FileEntry(b"x")}]) as s:
        for _ in range(2):
            r = s.exec("python3 -c 'import pytest, sys; print(sys.prefix)';"
                       " touch /opt/ceiling/runtime/x; echo $?")
            assert r.stdout == "/opt/ceiling/runtime\n1\n", r
            s.reset()
