"""Import Harbor task folders (Terminus/Terminal-Bench 2.x format) as ceiling cards.

A Harbor task is ``task.toml``, ``instruction.md``, ``environment/Dockerfile`` (the build
context is ``environment/``), ``tests/test.sh`` (usually pytest over ``tests/*.py``) and
``solution/solve.sh``. :func:`import_task` makes one card of it, or refuses it with a
reason; nothing is ever half-converted. The mapping, field by field, is in docs/import.md.

Dockerfile instructions: ``SUPPORTED`` are carried over (``FROM`` is replaced by this
host's system: the image is built on it), ``IGNORED`` do not change what a task sees
(``CMD``/``ENTRYPOINT``: Harbor keeps the container alive and runs its own commands), and
every other instruction (``SHELL``, ``VOLUME``, ``ONBUILD``...) is refused by name, as are
``COPY --from``, ``ADD`` of a URL or an archive, ``RUN --mount``/``--network``/
``--security``, a second ``FROM`` (multi-stage) and a source outside the build context.

Safety: sources are read only inside the build context, through no symlink that leaves it
(:func:`~ceiling._tree.read_tree`'s check); destinations are normalised and refused in the
folders the sandbox reserves; every ``RUN`` runs only in the build sandbox
(:mod:`ceiling.sandbox._image`), never on the host.
"""

from __future__ import annotations

import base64
import fnmatch
import os
import posixpath
import re
import stat
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import CeilingError
from .._tree import FileEntry, FileTree, read_tree
from ..cards import (
    Acceptance,
    Budget,
    CardLimits,
    Environment,
    ImageStep,
    TaskCard,
    horizon_for_steps,
    save_card,
)
from ..sandbox import RESERVED, check_mount_point
from . import _dockerfile as dockerfile
from ._scripts import read_test_sh, split_solution

SUPPORTED = ("FROM", "ARG", "ENV", "WORKDIR", "COPY", "ADD", "RUN", "USER")
IGNORED = ("LABEL", "MAINTAINER", "EXPOSE", "CMD", "ENTRYPOINT", "HEALTHCHECK", "STOPSIGNAL")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SOLUTION_DIR = "/tmp/ceiling-solution"
HOME = "/home/agent"
PYTHON = "/usr/bin/python3"
DIFFICULTY = {"easy": 2, "medium": 4, "hard": 6}
_ARCHIVE = re.compile(r"\.(tar|tgz|tar\.gz|tar\.xz|tar\.bz2|txz|tbz2)$")
# test.sh's own tooling (uv's pytest, the CTRF reporter) is replaced by the runtime's pytest
_TEST_TOOLING = re.compile(r"^(pytest|pytest-json-ctrf|pytest-json-report)([=<>!~ ].*)?$")


class Refused(CeilingError):
    """The task cannot be carried over: ``reason`` is a short code counted by the report."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


@dataclass
class TaskResult:
    task: str
    card_id: str | None = None
    path: str | None = None
    reason: str | None = None
    detail: str | None = None
    notes: list[str] = field(default_factory=list)
    layers_built: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [])}


@dataclass
class _Build:
    """What the Dockerfile walk collects."""

    workdir: str
    steps: list[ImageStep] = field(default_factory=list)
    workspace: FileTree = field(default_factory=dict)
    root: FileTree = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def find_tasks(path: Path) -> list[Path]:
    """``path`` itself when it is a task folder, else every task folder below it (a
    ``task.toml`` beside an ``instruction.md``), sorted."""
    if (path / "task.toml").is_file():
        return [path]
    found = sorted({p.parent for p in path.rglob("task.toml")
                    if (p.parent / "instruction.md").is_file()
                    and not any(part in ("environment", "tests", "solution")
                                for part in p.parent.relative_to(path).parts)})
    return found


def card_name(task: Path) -> str:
    name = re.sub(r"[^a-z0-9_.\-]+", "-", task.name.lower()).strip("-.") or "task"
    return name if name[0].isalnum() else f"t{name}"


def _abs(cur: str, path: str) -> str:
    p = path if path.startswith("/") else posixpath.join(cur, path)
    return posixpath.normpath(p).replace("//", "/")


def _read_source(ctx: Path, src: str) -> list[tuple[str, FileEntry | FileTree]]:
    """The files a COPY source names inside the build context ``ctx``: ``(name, entry)``
    for a file, ``("", tree)`` for a folder's contents. Refuses sources outside the context,
    links that leave it, and special files."""
    rel = posixpath.normpath(src.lstrip("/")) if src not in (".", "./", "/") else "."
    if rel == ".." or rel.startswith("../"):
        raise Refused("path:COPY source outside the build context",
                      f"COPY source {src!r} is outside environment/")
    real_ctx = ctx.resolve()
    matches = sorted(ctx.glob(rel)) if any(c in rel for c in "*?[") else [ctx / rel]
    if not matches or not all(m.exists() or m.is_symlink() for m in matches):
        raise Refused("path:COPY source missing", f"COPY source {src!r} does not exist")
    out: list[tuple[str, FileEntry | FileTree]] = []
    for m in matches:
        if not m.resolve().is_relative_to(real_ctx) or not m.parent.resolve().is_relative_to(real_ctx):
            raise Refused("path:symlink outside the build context",
                          f"COPY source {src!r} resolves outside environment/ "
                          f"({os.path.realpath(m)})")
        st = os.lstat(m)
        if stat.S_ISLNK(st.st_mode):
            m = m.resolve()
            st = os.stat(m)
        if stat.S_ISDIR(st.st_mode):
            try:
                tree = read_tree(m)
            except CeilingError as e:
                raise Refused("path:symlink outside the build context", str(e)) from None
            out.append(("", {k: v for k, v in tree.items()
                             if not (k == ".dockerignore" or k.startswith(".git/"))}))
        elif stat.S_ISREG(st.st_mode):
            out.append((m.name, FileEntry(m.read_bytes(), stat.S_IMODE(st.st_mode))))
        else:
            raise Refused("path:special file", f"COPY source {src!r} is not a file or folder")
    return out


def _place(b: _Build, dest_abs: str, entry: FileEntry, what: str) -> None:
    wd = b.workdir
    if dest_abs == wd:
        raise Refused("path:COPY over the workdir", f"{what} replaces the workdir itself")
    if dest_abs.startswith(wd + "/"):
        b.workspace[dest_abs[len(wd) + 1:]] = entry
        return
    rel = dest_abs.lstrip("/")
    top = rel.split("/", 1)[0]
    if not rel or top in RESERVED or rel.startswith("opt/ceiling"):
        raise Refused("path:reserved destination",
                      f"{what} writes {dest_abs}, inside a folder the sandbox reserves")
    b.root[rel] = entry
    if not any(s.files for s in b.steps):
        b.steps.append(ImageStep(files=True))


def _copy(b: _Build, ins: dockerfile.Instruction, ctx: Path, cur: str,
          dirs: set[str]) -> None:
    kw = ins.keyword
    if "from" in ins.flags:
        raise Refused(f"dockerfile:{kw} --from", f"line {ins.line}: {kw} --from (multi-stage)")
    if "<<" in ins.args:
        raise Refused(f"dockerfile:{kw} heredoc", f"line {ins.line}: {kw} with a heredoc")
    words = ins.words()
    if len(words) < 2:
        raise Refused(f"dockerfile:{kw} malformed", f"line {ins.line}: {ins.raw[:80]}")
    *srcs, dest = words
    mode = int(ins.flags["chmod"], 8) if re.fullmatch(r"[0-7]{3,4}", ins.flags.get("chmod", "")) \
        else None
    if "chown" in ins.flags:
        b.notes.append(f"line {ins.line}: --chown ignored (files belong to the sandbox user)")
    dest_abs = _abs(cur, dest)
    # a folder destination: "dir/", ".", the current or any WORKDIR, or several sources
    as_dir = dest.endswith(("/", "/.")) or dest in (".", "..") or len(srcs) > 1 \
        or dest_abs in dirs
    for src in srcs:
        if kw == "ADD" and re.match(r"^[a-z]+://", src):
            raise Refused("dockerfile:ADD url", f"line {ins.line}: ADD {src} (a download)")
        if kw == "ADD" and _ARCHIVE.search(src):
            raise Refused("dockerfile:ADD archive", f"line {ins.line}: ADD {src} (unpacking)")
        for name, item in _read_source(ctx, src):
            if isinstance(item, dict):
                for rel, e in item.items():
                    if e.kind == "dir":
                        continue
                    e2 = FileEntry(e.data, mode if mode is not None else e.mode, e.kind, e.target)
                    _place(b, posixpath.join(dest_abs, rel), e2, f"line {ins.line}: {kw}")
            else:
                target = posixpath.join(dest_abs, name) if as_dir else dest_abs
                e2 = item if mode is None else FileEntry(item.data, mode)
                _place(b, target, e2, f"line {ins.line}: {kw}")


def read_dockerfile(text: str, ctx: Path, workdir: str | None) -> _Build:
    """Walk the Dockerfile (module doc); ``workdir``: task.toml's, else the last WORKDIR."""
    ins_list = dockerfile.parse(text)
    cur = "/"
    last = None
    workdirs: set[str] = set()
    for ins in ins_list:
        if ins.keyword == "WORKDIR":
            cur = _abs(cur, ins.words()[0] if ins.words() else "/")
            last = cur
            workdirs.add(cur)
    wd = workdir or last or "/app"
    try:
        check_mount_point(wd, field="WORKDIR")
    except ValueError as e:
        raise Refused("dockerfile:WORKDIR reserved", str(e)) from None
    b = _Build(workdir=wd)
    if not workdir and not last:
        b.notes.append("no WORKDIR: the workspace is /app")
    cur, froms, build_env = "/", 0, {}
    for ins in ins_list:
        kw = ins.keyword
        if kw == "FROM":
            froms += 1
            if froms > 1:
                raise Refused("dockerfile:multi-stage FROM", f"line {ins.line}: a second FROM")
            b.notes.append(f"FROM {ins.args.split()[0] if ins.args else '?'}: built on this "
                           "host's system instead")
        elif kw == "ARG":
            continue
        elif kw == "ENV":
            for k, v in dockerfile.env_pairs(ins.args):
                v = dockerfile.expand(v, {"PATH": SYSTEM_PATH, **b.env})
                b.env[k] = build_env[k] = v
        elif kw == "WORKDIR":
            cur = _abs(cur, ins.words()[0] if ins.words() else "/")
        elif kw in ("COPY", "ADD"):
            _copy(b, ins, ctx, cur, {cur, wd, *workdirs})
        elif kw == "RUN":
            bad = [f for f in ins.flags if f in ("mount", "network", "security")]
            if bad:
                raise Refused(f"dockerfile:RUN --{bad[0]}", f"line {ins.line}: RUN --{bad[0]}")
            words = ins.args.strip()
            cmd = " ".join(ins.words()) if words.startswith("[") else words
            # every Dockerfile RUN sees the workspace and may write it (a step's id hashes
            # the workspace it saw: still shared while that is empty, e.g. before any COPY)
            b.steps.append(ImageStep(run=cmd, cwd=cur, env=dict(build_env), workspace=True))
        elif kw == "USER":
            user = ins.args.strip().split(":")[0]
            if user not in ("root", "0"):
                b.notes.append(f"line {ins.line}: USER {user}: build steps run as root, the "
                               "agent's commands as the sandbox user")
        elif kw in IGNORED:
            b.notes.append(f"line {ins.line}: {kw} ignored")
        else:
            raise Refused(f"dockerfile:{kw}", f"line {ins.line}: {kw} is not supported "
                          f"(supported: {', '.join(SUPPORTED)}; ignored: {', '.join(IGNORED)})")
    return b


def _shebang(script: str) -> str:
    first = script.split("\n", 1)[0]
    if not first.startswith("#!"):
        return "bash"
    words = first[2:].split()
    if not words:
        return "bash"
    prog = words[0].rsplit("/", 1)[-1]
    if prog == "env":
        rest = [w for w in words[1:] if not w.startswith("-")]
        return rest[0] if rest else "bash"
    return prog


def oracle_script(solution: Path, solve: str, workdir: str, env: dict[str, str]) -> str:
    """The card's solution: writes the task's solution folder to ``SOLUTION_DIR`` (base64,
    so any content survives), then runs ``solve.sh`` there with the interpreter its shebang
    names, from the workdir, as Harbor does (``/solution`` paths point at the copy)."""
    solve = re.sub(r"(?<![\w./-])/solution(?=/|\b)", SOLUTION_DIR, solve)
    files: dict[str, bytes] = {"solve.sh": solve.encode()}
    for p in sorted(solution.rglob("*")):
        rel = p.relative_to(solution).as_posix()
        if p.is_file() and not p.is_symlink() and rel != "solve.sh":
            files[rel] = p.read_bytes()
    lines = [f"mkdir -p {SOLUTION_DIR}"]
    for rel, data in files.items():
        dest = f"{SOLUTION_DIR}/{rel}"
        if "/" in rel:
            lines.append(f"mkdir -p '{posixpath.dirname(dest)}'")
        lines.append(f"base64 -d > '{dest}' <<'CEILING_B64'")
        lines.append(base64.encodebytes(data).decode().rstrip("\n"))
        lines.append("CEILING_B64")
    exports = "".join(f"export {k}='{v}'; " for k, v in env.items() if re.fullmatch(r"\w+", k)
                      and "'" not in v)
    lines.append(f"cd {workdir} && {exports}{_shebang(solve)} {SOLUTION_DIR}/solve.sh")
    return "\n".join(lines) + "\n"


def _tests(task: Path, targets: list[str]) -> FileTree:
    tdir = task / "tests"
    try:
        tree = read_tree(tdir)
    except CeilingError as e:
        raise Refused("path:symlink outside the tests folder", str(e)) from None
    tree = {k: v for k, v in tree.items() if k != "test.sh" and v.kind == "file"}
    if "Dockerfile" in tree:
        raise Refused("tests:separate verifier environment",
                      "tests/Dockerfile: the tests run in an image of their own")
    names = {posixpath.normpath(t[len("/tests/"):]) for t in targets if t.startswith("/tests/")}
    if names:
        tree = {k: v for k, v in tree.items()
                if k in names or not re.match(r"(.*/)?(test_[^/]*|[^/]*_test)\.py$", k)}
    for k, v in tree.items():
        if k.endswith(".py") and re.search(rb"[\"'](/tests)(/|[\"'])", v.data):
            raise Refused("tests:reads /tests",
                          f"tests/{k} reads files under /tests (ceiling hides the tests "
                          "elsewhere until grading)")
    if not any(re.match(r"(.*/)?(test_[^/]*|[^/]*_test)\.py$", k) for k in tree):
        raise Refused("tests:no pytest file", "tests/ holds no test_*.py file")
    return tree


def _check_links(task: Path) -> None:
    """Refuse a task whose own files or folders are symlinks (the importer reads them on the
    host: ``instruction.md -> /etc/shadow`` or ``environment -> /`` would leak host files
    into a card). Links *inside* the copied folders are checked where they are read."""
    for rel in ("task.toml", "instruction.md", "environment", "environment/Dockerfile",
                "tests", "tests/test.sh", "solution", "solution/solve.sh"):
        p = task / rel
        if p.is_symlink():
            raise Refused("path:symlink in the task folder",
                          f"{rel} is a symlink ({os.readlink(p)!r}); the importer reads no "
                          "link of a task's own files")
    for p in (task / "solution").rglob("*") if (task / "solution").is_dir() else []:
        if p.is_symlink():
            raise Refused("path:symlink in the task folder",
                          f"solution/{p.relative_to(task / 'solution')} is a symlink")


def build_card(task: Path) -> tuple[TaskCard, list[str]]:
    """The card for a Harbor task folder (not built, not saved) and notes. Raises Refused."""
    if task.is_symlink():
        raise Refused("path:symlink in the task folder", f"{task} is a symlink")
    _check_links(task)
    try:
        conf = tomllib.loads((task / "task.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise Refused("task:task.toml unreadable", f"task.toml: {e}") from None
    env_conf = conf.get("environment") or {}
    if conf.get("steps"):
        raise Refused("task:multi-step", "task.toml has [[steps]] (multi-step tasks)")
    if str(env_conf.get("os", "linux")).lower() not in ("linux", ""):
        raise Refused("task:os", f"environment.os = {env_conf.get('os')!r}")
    if env_conf.get("gpus") or env_conf.get("gpu_types") or env_conf.get("tpu"):
        raise Refused("task:gpu", "the task asks for GPUs or TPUs")
    df = task / "environment" / "Dockerfile"
    if not df.is_file():
        if env_conf.get("docker_image"):
            raise Refused("task:prebuilt image", f"environment.docker_image = "
                          f"{env_conf['docker_image']!r} and no Dockerfile")
        if (task / "environment" / "docker-compose.yaml").is_file():
            raise Refused("task:docker compose", "environment/docker-compose.yaml only")
        raise Refused("task:no Dockerfile", "environment/Dockerfile is missing")
    if (task / "environment" / "docker-compose.yaml").is_file() or \
            (task / "environment" / "docker-compose.yml").is_file():
        raise Refused("task:docker compose", "environment/docker-compose.yaml (more services)")
    instr = task / "instruction.md"
    if not instr.is_file() or not instr.read_text().strip():
        raise Refused("task:no instruction", "instruction.md is missing or empty")
    test_sh = task / "tests" / "test.sh"
    if not test_sh.is_file():
        raise Refused("tests:no test.sh", "tests/test.sh is missing")
    solve = task / "solution" / "solve.sh"
    if not solve.is_file():
        raise Refused("solution:no solve.sh", "solution/solve.sh is missing")

    b = read_dockerfile(df.read_text(), task / "environment", env_conf.get("workdir"))
    plan = read_test_sh(test_sh.read_text())
    if plan.refusals:
        raise Refused(*plan.refusals[0])
    tests = _tests(task, plan.targets)
    script, sol_apt, sol_pip, backgrounds = split_solution(solve.read_text())
    notes = list(b.notes) + plan.notes
    pip_tests = [p for p in plan.pip if p and not _TEST_TOOLING.match(p)]
    uses_uv = any(re.search(r"\buvx?\b", s.run or "") for s in b.steps)
    extra = [*pip_tests, *(["uv"] if uses_uv else [])]
    steps: list[ImageStep] = [ImageStep(runtime=True)]  # the grader's pytest, offline
    if plan.apt:
        steps.append(ImageStep(run=_apt(plan.apt)))
    if extra:
        steps.append(ImageStep(run="python3 -m pip install -q " + " ".join(map(_q, extra))))
    steps += b.steps
    if sol_apt:
        steps.append(ImageStep(run=_apt(sol_apt)))
        notes.append(f"solve.sh's apt packages preinstalled: {' '.join(sol_apt)}")
    if sol_pip:
        steps.append(ImageStep(run="python3 -m pip install -q " + " ".join(map(_q, sol_pip))))
        notes.append(f"solve.sh's pip packages preinstalled: {' '.join(sol_pip)}")

    agent_s = float((conf.get("agent") or {}).get("timeout_sec") or 1800)
    verify_s = float((conf.get("verifier") or {}).get("timeout_sec") or 600)
    mem = env_conf.get("memory_mb")
    if mem is None and isinstance(env_conf.get("memory"), str):
        mem = _size_mb(env_conf["memory"])
    memory = int(mem) if mem else 2048
    storage = int(env_conf.get("storage_mb") or 10240)
    from ..cards import operator_max

    cpu = int(min(max(agent_s, verify_s, 120), operator_max("cpu_s")))
    limits = CardLimits(memory_mb=memory, cpu_s=cpu,
                        disk_mb=max(64, min(storage, memory // 2)),
                        wall_s=agent_s + verify_s)
    env = {"PATH": SYSTEM_PATH, **b.env,
           **{k: str(v) for k, v in (env_conf.get("env") or {}).items()},
           **{k: str(v) for k, v in ((conf.get("verifier") or {}).get("env") or {}).items()}}
    meta = conf.get("metadata") or {}
    tags = ["harbor", *(str(t) for t in ([meta.get("category")] if meta.get("category") else [])),
            *(str(t) for t in meta.get("tags", []) or [])]
    solution = oracle_script(task / "solution", script, b.workdir,
                             {k: str(v) for k, v in ((conf.get("solution") or {}).get("env")
                                                     or {}).items()})
    service = plan.service
    card = TaskCard(
        id=f"harbor/{card_name(task)}-v1", type="terminal_ops", horizon="short",
        instruction=instr.read_text().strip(),
        budget=Budget(max_steps=200, command_timeout_s=min(agent_s, 900.0),
                      episode_timeout_s=agent_s, max_output_bytes=16_384),
        acceptance=Acceptance(runner="inprocess", test_timeout_s=min(verify_s, 3600.0),
                              service=service,
                              service_wait_s=min(max(plan.service_wait_s, 2.0), 600.0),
                              keep_processes=backgrounds),
        environment=Environment(workdir=b.workdir, home=HOME, env=env, python=PYTHON,
                                image=steps, limits=limits),
        difficulty=DIFFICULTY.get(str(meta.get("difficulty", "")).lower(), 3),
        tags=sorted(set(tags)), template=f"harbor:{task.name}")
    card.workspace = dict(b.workspace)
    card.root_files = dict(b.root)
    card.tests = tests
    card.solution = solution
    from ..verify import oracle_call_count

    card.horizon = horizon_for_steps(oracle_call_count(card))
    card.build_workspace = dict(b.workspace)  # what the image steps start from
    if backgrounds:
        notes.append("solve.sh leaves a process running: graded with its processes kept")
    if service:
        notes.append(f"test.sh's background command is the grading-time service: {service}")
    return card, notes


def _apt(pkgs: list[str]) -> str:
    names = " ".join(map(_q, pkgs))
    return (f"apt-get install -y -q --no-install-recommends {names} || (apt-get update -q && "
            f"apt-get install -y -q --no-install-recommends {names})")


def _q(s: str) -> str:
    return s if re.fullmatch(r"[\w.=<>!~+:,/-]+", s) else "'" + s.replace("'", "'\\''") + "'"


def _size_mb(text: str) -> int | None:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG])?i?[bB]?\s*", text)
    if not m:
        return None
    return int(float(m.group(1)) * {"k": 1 / 1024, "m": 1, "g": 1024}.get(
        (m.group(2) or "m").lower(), 1))


def import_task(task: Path, out: Path, *, build: bool = True,
                progress: Callable[[str], None] | None = None) -> TaskResult:
    """Import one task folder into ``out/<name>``; never raises for the task's content."""
    res = TaskResult(task=str(task))
    t0 = time.perf_counter()
    try:
        card, res.notes = build_card(task)
        if build:
            from ..cards import image_steps
            from ..sandbox import ImageBuildError, build_image

            try:
                img = build_image(image_steps(card), workdir=card.environment.workdir,  # type: ignore[arg-type]
                                  workspace=card.build_workspace, progress=progress)
            except ImageBuildError as e:
                raise Refused("build:failed", str(e)) from None
            res.layers_built = img.built
            card.workspace = img.workspace
        else:
            res.notes.append("image not built (--no-build): the workspace holds only the "
                             "copied files")
        bad = [k for k, e in card.workspace.items() if e.kind == "symlink"
               and (str(e.target).startswith("/") or ".." in str(e.target).split("/"))]
        if bad:
            raise Refused("workspace:absolute symlink",
                          f"the workspace holds links that point outside it: {bad[:3]}")
        dest = out / card_name(task)
        save_card(card, dest)
        res.card_id, res.path = card.id, str(dest)
    except Refused as e:
        res.reason, res.detail = e.reason, e.detail
    except CeilingError as e:
        res.reason, res.detail = "card:invalid", str(e)
    except ValueError as e:  # pydantic validation of the card
        res.reason, res.detail = "card:invalid", str(e).splitlines()[0][:300]
    res.seconds = round(time.perf_counter() - t0, 3)
    return res


@dataclass
class ImportReport:
    results: list[TaskResult]

    def as_dict(self) -> dict[str, Any]:
        reasons: dict[str, int] = {}
        for r in self.results:
            if r.reason:
                reasons[r.reason] = reasons.get(r.reason, 0) + 1
        ok = [r for r in self.results if r.card_id]
        return {"tasks": len(self.results), "imported": len(ok),
                "refused": len(self.results) - len(ok),
                "refusals_by_reason": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
                "layers_built": sum(r.layers_built for r in self.results),
                "results": [r.as_dict() for r in self.results]}


def import_harbor(path: str | os.PathLike[str], out: str | os.PathLike[str], *,
                  build: bool = True, only: str | None = None,
                  progress: Callable[[str], None] | None = None) -> ImportReport:
    """Import a task folder or a dataset folder of them (``only``: a glob on task names)."""
    root = Path(path)
    if not root.is_dir():
        raise CeilingError(f"{root} is not a folder", where=str(root),
                           fix="point at a Harbor task folder or a folder of them")
    if build:
        from ..sandbox import namespaces_available

        why = namespaces_available()
        if why:
            raise CeilingError(f"cannot build the tasks' images: {why}", where="import harbor",
                               fix="run as root on Linux, or pass --no-build to check the "
                                   "mapping only")
    tasks = [t for t in find_tasks(root) if only is None or fnmatch.fnmatch(t.name, only)]
    if not tasks:
        raise CeilingError(f"no Harbor task (task.toml + instruction.md) under {root}",
                           where=str(root), fix="point at a task folder or a dataset folder")
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for t in tasks:
        if progress:
            progress(f"import {t.name}")
        results.append(import_task(t, out_dir, build=build, progress=progress))
    return ImportReport(results)


__all__ = ["IGNORED", "SUPPORTED", "ImportReport", "Refused", "TaskResult", "build_card",
           "find_tasks", "import_harbor", "import_task", "read_dockerfile"]
