"""The sandbox's runtime environment: python, pytest and nothing of ceiling (issue 9).

A namespace sandbox sees no host folder but an allow-list (see ``docs/sandbox.md``). Its
python is the host's *base* interpreter (``sys.base_prefix``: the stdlib, never the venv that
holds ``ceiling``) run through a venv-like folder, the **runtime**, seen inside at
:data:`INSIDE` (``/opt/ceiling/runtime``)::

    bin/python3 -> <base interpreter>    bin/pytest, bin/py.test, ... (console scripts)
    pyvenv.cfg                           (include-system-site-packages = false)
    lib/python3.X/site-packages/         copies of pytest and its dependencies
    pycache/                             the trusted bytecode tree (:data:`PYCACHE`)

**The trusted bytecode tree.** The grader runs workspace code with
``-X pycache_prefix=`` :data:`PYCACHE` so that no ``__pycache__`` folder the agent left is
ever read (a stale ``.pyc`` over an unchanged source would run code the scans never saw).
Python looks every module's bytecode up under the prefix, the stdlib's too; with an empty
prefix each start compiled ``json``, ``socket``, ``traceback`` ... from source (about 60 ms
of a subject's 100 ms start). So the runtime carries the stdlib's and its own packages'
compiled bytecode at the paths the prefix maps their sources to (hard-linked from the
``__pycache__`` files the installation already has). Inside the sandbox the tree is
read-only and root's: the workspace's modules miss there, are compiled from their source,
and their bytecode cannot be written (Python ignores that).

:func:`build` makes it once under ``$CEILING_HOME/runtime/<hash>`` (or
``$CEILING_RUNTIME_DIR/<hash>``: the test suite shares one across its per-test homes; the
folder must be root's and not writable by others) (the hash covers the
python version, the base interpreter's path and every copied distribution's name and
version), offline: the distributions are copied (hard-linked where the file system allows)
from the ones installed next to ``ceiling``, found with :mod:`importlib.metadata`, with
their ``__pycache__`` (no compile at build time nor in the sandbox). A build goes to a temp
folder renamed into place, so concurrent builders are safe: the first rename wins, the
others drop their copy.

Users add distributions with ``CEILING_RUNTIME_PACKAGES="requests,rich"`` or
``ceiling.sandbox.runtime.build(extra=["requests"])`` (which also makes that runtime the one
this process's next sandboxes use); they must be installed in the environment that runs
ceiling (nothing is downloaded). ``ceiling`` itself is refused. Host folders a card needs
(node, say) are bound read-only at their own path with
``CEILING_SANDBOX_PATHS=/opt/node:/usr/local/go``; a path that holds or lies in the venv,
the ceiling package, its checkout or ``$CEILING_HOME`` is refused (:class:`ConfigError`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import os
import re
import shutil
import site
import stat
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import ConfigError, SandboxError

INSIDE = "/opt/ceiling/runtime"  # where commands see the runtime
PYTHON = f"{INSIDE}/bin/python3"  # the interpreter to put in a namespace sandbox's argv
PYCACHE = f"{INSIDE}/pycache"  # the trusted bytecode tree, as commands see it
DEFAULT_PACKAGES = ("pytest",)
FORMAT = 2  # bump when the layout changes: old runtimes are then rebuilt under a new hash
# stdlib folders no grading imports (their bytecode stays out of the tree)
_STDLIB_SKIP = frozenset({"site-packages", "test", "idlelib", "tkinter", "turtledemo",
                          "lib2to3", "ensurepip", "pydoc_data"})
# Paths a user may not bind with CEILING_SANDBOX_PATHS: the sandbox builds these itself
# (RESERVED), or mounts its own over them (RESERVED_TREES: nothing under them would show).
RESERVED = ("/", "/opt", "/etc")
RESERVED_TREES = ("/proc", "/dev", "/sys", "/tmp", "/run", "/workspace", "/.ceiling",
                  "/opt/ceiling")


@dataclass(frozen=True)
class Runtime:
    """A built runtime and what the holder needs to show it.

    ``path``: the host folder (bound read-only at :data:`INSIDE`); ``base_prefix``: the
    interpreter's prefix, bound read-only at its own path (its compiled-in paths point
    there) unless a system folder already shows it; ``masks``: host folders shown as empty
    read-only tmpfs inside (the base's site-packages, and anything forbidden that lies under
    a visible folder); ``paths``: extra host folders from ``CEILING_SANDBOX_PATHS``."""

    path: str
    base_prefix: str
    packages: tuple[str, ...]
    masks: tuple[str, ...] = ()
    paths: tuple[str, ...] = field(default=())

    def key(self) -> str:
        """What a started holder depends on (the warm pool keys on it)."""
        return json.dumps(self.holder_cfg(), sort_keys=True)

    def holder_cfg(self) -> dict[str, object]:
        """The holder's config keys (plain data, marshal-able)."""
        return {"runtime": self.path, "base_prefix": self.base_prefix,
                "masks": list(self.masks), "paths": list(self.paths)}


_lock = threading.Lock()
_current: dict[tuple[str, tuple[str, ...]], Runtime] = {}
_chosen: tuple[str, ...] | None = None  # set by build(extra=...): this process's packages


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def env_packages() -> list[str]:
    """``DEFAULT_PACKAGES`` plus ``CEILING_RUNTIME_PACKAGES`` (comma, colon or space
    separated distribution names)."""
    extra = re.split(r"[,:\s]+", os.environ.get("CEILING_RUNTIME_PACKAGES", "").strip())
    return [*DEFAULT_PACKAGES, *(e for e in extra if e)]


def _requires(dist: md.Distribution) -> list[str]:
    """Names of the distributions ``dist`` needs here (markers evaluated, extras skipped)."""
    out = []
    for req in dist.requires or []:
        spec, _, marker = req.partition(";")
        name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
        if name is None:
            continue
        if marker.strip():
            if "extra" in marker:
                continue
            try:
                from packaging.markers import Marker

                if not Marker(marker.strip()).evaluate():
                    continue
            except ImportError:  # packaging absent: keep it, a needless copy is harmless
                pass
        out.append(name.group(1))
    return out


def closure(names: Iterable[str]) -> list[md.Distribution]:
    """The installed distributions ``names`` need, dependencies included, sorted by name.
    Raises :class:`ConfigError` for a name that is not installed or is ``ceiling``."""
    seen: dict[str, md.Distribution] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = _norm(name)
        if key in seen:
            continue
        if key == "ceiling":
            raise ConfigError("the sandbox runtime never holds ceiling itself",
                              where="CEILING_RUNTIME_PACKAGES / runtime.build(extra=...)",
                              fix="remove 'ceiling' from the runtime packages")
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            raise ConfigError(f"distribution {name!r} is not installed next to ceiling, so the "
                              "sandbox runtime cannot copy it (it never downloads)",
                              where="CEILING_RUNTIME_PACKAGES / runtime.build(extra=...)",
                              fix=f"pip install {name} in the environment that runs ceiling"
                              ) from None
        seen[key] = dist
        todo.extend(_requires(dist))
    return [seen[k] for k in sorted(seen)]


def base_python() -> str:
    """The real path of the base interpreter (what the venv's python links to)."""
    exe = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(exe)


def _forbidden() -> list[str]:
    """Host folders nothing in the sandbox may show: the venv that holds ceiling (when it is
    not the base), the ceiling package, its checkout and $CEILING_HOME."""
    from ._layers import ceiling_home

    pkg = Path(__file__).resolve().parents[1]
    out = {str(pkg), os.path.realpath(ceiling_home())}
    if os.path.realpath(sys.prefix) != os.path.realpath(sys.base_prefix):
        out.add(os.path.realpath(sys.prefix))
    for anc in pkg.parents:  # the checkout of an editable install (src/ layout or not)
        if anc == Path(anc.anchor):
            break
        if (anc / "pyproject.toml").exists() or (anc / ".git").exists():
            out.add(str(anc))
            break
    return sorted(out)


def _under(p: str, root: str) -> bool:
    return root == "/" or p == root or p.startswith(root.rstrip("/") + "/")


def sandbox_paths() -> list[str]:
    """``CEILING_SANDBOX_PATHS`` (colon separated absolute host folders), checked."""
    raw = [p for p in os.environ.get("CEILING_SANDBOX_PATHS", "").split(":") if p.strip()]
    out = []
    bad = _forbidden()
    for p in raw:
        where = "CEILING_SANDBOX_PATHS"
        if not p.startswith("/"):
            raise ConfigError(f"{p!r} is not an absolute path", where=where,
                              fix="list absolute host folders, e.g. /opt/node")
        real = os.path.realpath(p)
        if not os.path.isdir(real):
            raise ConfigError(f"{p!r} is not a folder on this host", where=where,
                              fix="list existing folders (bind a file's folder)")
        if os.path.normpath(p) in RESERVED or real in RESERVED:
            raise ConfigError(f"{p!r} is a folder the sandbox builds itself", where=where,
                              fix="list a folder below it, e.g. /opt/node")
        if any(_under(x, t) for x in (os.path.normpath(p), real) for t in RESERVED_TREES):
            raise ConfigError(f"{p!r} lies in a folder the sandbox replaces with its own "
                              "(/tmp, /proc, /dev, /sys, /run, /workspace)", where=where,
                              fix="move it elsewhere on the host, e.g. under /opt")
        for f in bad:
            if _under(real, f) or _under(f, real):
                raise ConfigError(f"{p!r} would show {f} (the venv, the ceiling package, its "
                                  "checkout or CEILING_HOME) inside the sandbox", where=where,
                                  fix="install what the card needs outside those folders")
        out.append(real)
    return out


SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def _masks(base_prefix: str, paths: Sequence[str]) -> list[str]:
    """Folders to show empty: the base interpreter's site-packages, and every forbidden
    folder that lies under something the sandbox shows."""
    shown = [os.path.realpath(p) for p in SYSTEM if os.path.isdir(p)] + [base_prefix, *paths]
    out = set()
    for sp in site.getsitepackages([base_prefix]):
        if os.path.isdir(sp):
            out.add(os.path.realpath(sp))
    for f in _forbidden():
        if os.path.isdir(f) and any(_under(f, s) for s in shown):
            out.add(f)
    return sorted(out)


def _scripts_dir() -> str:
    return os.path.realpath(sysconfig.get_paths()["scripts"])


class _Copier:
    """Hard-links files into the runtime (copies where it cannot), one ``stat`` per file
    and one ``mkdir`` per folder."""

    def __init__(self) -> None:
        self.dirs: set[str] = set()
        self.done: set[str] = set()

    def put(self, src: str, dst: str, st: os.stat_result | None = None) -> None:
        """Hard-link ``src`` when its mode is already what the runtime wants (0644 or 0755,
        so the runtime's chmod never touches the installed file), else copy it."""
        if dst in self.done:  # listed twice (RECORD and the bytecode next to a .py)
            return
        self.done.add(dst)
        d = os.path.dirname(dst)
        if d not in self.dirs:
            os.makedirs(d, exist_ok=True)
            self.dirs.add(d)
        st = st or os.stat(src)
        if st.st_mode & 0o7777 in (0o644, 0o755):
            try:
                os.link(src, dst)
                return
            except OSError:
                pass
        shutil.copy2(src, dst)


def _copy_dist(dist: md.Distribution, site_dir: str, bin_dir: str, cp: _Copier) -> None:
    """Copy one distribution's files (and their ``__pycache__``) into ``site_dir``; binaries
    it installed into the scripts folder go to ``bin_dir``."""
    scripts = _scripts_dir()
    tag = sys.implementation.cache_tag
    for f in dist.files or []:
        src = str(dist.locate_file(f))
        rel = str(f)
        if rel.startswith(".."):
            src = os.path.realpath(src)
            if os.path.dirname(src) == scripts and os.path.isfile(src):
                with open(src, "rb") as fh:
                    if fh.read(2) != b"#!":  # a binary (ruff, say); scripts are rewritten
                        cp.put(src, os.path.join(bin_dir, os.path.basename(src)))
            continue
        try:
            st = os.stat(src)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        cp.put(src, os.path.join(site_dir, rel), st)
        if rel.endswith(".py"):  # RECORD may omit the bytecode pip compiled
            d, name = os.path.split(src)
            pyc = f"{name[:-3]}.{tag}.pyc"
            dst = os.path.join(site_dir, os.path.dirname(rel), "__pycache__", pyc)
            if dst not in cp.done:
                try:
                    cp.put(os.path.join(d, "__pycache__", pyc), dst)
                except FileNotFoundError:
                    cp.done.discard(dst)


def _console_scripts(dists: Sequence[md.Distribution], bin_dir: str) -> None:
    for dist in dists:
        for ep in dist.entry_points:
            if ep.group != "console_scripts" or "/" in ep.name:
                continue
            mod, _, attr = ep.value.partition(":")
            call = attr.split("[")[0].strip() or "main"
            text = (f"#!{PYTHON}\nimport sys\nfrom {mod.strip()} import {call.split('.')[0]}\n"
                    f"sys.exit({call}())\n")
            p = os.path.join(bin_dir, ep.name)
            with open(p, "w") as fh:
                fh.write(text)
            os.chmod(p, 0o755)


def _bytecode_tree(dst: Path, site_dir: str, cp: _Copier) -> None:
    """Fill ``dst/pycache`` (:data:`PYCACHE` inside): each ``X.py``'s compiled
    ``__pycache__/X.<tag>.pyc`` of the stdlib and of the runtime's site-packages, placed
    where ``-X pycache_prefix`` looks for it (the prefix + the source's folder as the
    sandbox sees it + ``X.<tag>.pyc``). Sources without bytecode are skipped (they compile
    at import, as before)."""
    tag = sys.implementation.cache_tag
    tree = dst / "pycache"
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    roots = [(stdlib, stdlib), (site_dir, INSIDE + site_dir[len(str(dst)):])]
    for host_root, inside_root in roots:
        for dirpath, dirnames, _files in os.walk(host_root):
            dirnames[:] = [d for d in dirnames if d == "__pycache__" or d not in _STDLIB_SKIP]
            if os.path.basename(dirpath) != "__pycache__":
                continue
            src_dir = os.path.dirname(dirpath)
            inside = inside_root + src_dir[len(host_root):]
            for name in os.listdir(dirpath):
                stem, _, rest = name.partition(".")
                if rest != f"{tag}.pyc" or not os.path.isfile(os.path.join(src_dir, stem + ".py")):
                    continue  # optimised (opt-1/2) bytecode, or a stale file without a source
                cp.put(os.path.join(dirpath, name),
                       os.path.join(str(tree), inside.lstrip("/"), f"{stem}.{tag}.pyc"))
            dirnames[:] = []  # nothing below a __pycache__


def _digest(base: str, dists: Sequence[md.Distribution]) -> str:
    data = {"format": FORMAT, "python": sys.version, "base": base,
            "dists": [(_norm(d.metadata["Name"]), d.version) for d in dists]}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:20]


def _make(dst: Path, base: str, dists: Sequence[md.Distribution]) -> None:
    ver = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site_dir = str(dst / "lib" / ver / "site-packages")
    bin_dir = str(dst / "bin")
    os.makedirs(site_dir)
    os.makedirs(bin_dir)
    for name in ("python3", "python", ver):
        os.symlink(base if name == "python3" else "python3", os.path.join(bin_dir, name))
    with open(dst / "pyvenv.cfg", "w") as fh:
        fh.write(f"home = {os.path.dirname(base)}\ninclude-system-site-packages = false\n"
                 f"version = {'.'.join(map(str, sys.version_info[:3]))}\n"
                 f"executable = {base}\n")
    cp = _Copier()
    for dist in dists:
        _copy_dist(dist, site_dir, bin_dir, cp)
    _console_scripts(dists, bin_dir)
    _bytecode_tree(dst, site_dir, cp)
    for dirpath, dirnames, filenames in os.walk(dst):  # readable by every sandbox uid
        os.chmod(dirpath, 0o755)
        for n in filenames:
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                os.chmod(p, 0o755 if os.stat(p).st_mode & 0o100 else 0o644)


def build(extra: Sequence[str] = (), *, use: bool = True) -> Runtime:
    """Build (or find) the runtime holding ``DEFAULT_PACKAGES``, ``CEILING_RUNTIME_PACKAGES``
    and ``extra``. With ``use`` (default) this process's next sandboxes see it. Raises
    :class:`ConfigError` for a package that is not installed or a bad
    ``CEILING_SANDBOX_PATHS``, :class:`SandboxError` when the folder cannot be written."""
    global _chosen
    names = tuple(sorted({_norm(n) for n in [*env_packages(), *extra]}))
    rt = _get(names)
    if use:
        _chosen = names if extra else None
    return rt


def current() -> Runtime:
    """The runtime this process's sandboxes use (built on first use, then cached per
    ``$CEILING_HOME``, package set and ``CEILING_SANDBOX_PATHS``)."""
    names = _chosen or tuple(sorted({_norm(n) for n in env_packages()}))
    return _get(names)


def _get(names: tuple[str, ...]) -> Runtime:
    from ._layers import ceiling_home

    home = str(ceiling_home())
    key = (home + "\0" + os.environ.get("CEILING_RUNTIME_DIR", "") + "\0"
           + os.environ.get("CEILING_SANDBOX_PATHS", ""), names)
    with _lock:
        rt = _current.get(key)
        if rt is not None and os.path.isdir(rt.path):
            return rt
        base = base_python()
        base_prefix = os.path.realpath(sys.base_prefix)
        if not _under(base, base_prefix):
            raise SandboxError(f"the base interpreter {base} lies outside sys.base_prefix "
                               f"{base_prefix}", fix="use a standard CPython installation")
        dists = closure(names)
        root = Path(os.environ.get("CEILING_RUNTIME_DIR") or Path(home) / "runtime")
        dst = root / _digest(base, dists)
        try:
            st = root.stat()
        except FileNotFoundError:
            pass
        else:  # a runtime found there runs in every sandbox: only its owner may have made it
            if st.st_uid != os.geteuid() or st.st_mode & 0o022:
                raise ConfigError(f"{root} is not owned by this user or is writable by others",
                                  where="CEILING_RUNTIME_DIR / CEILING_HOME",
                                  fix=f"chown {os.geteuid()} {root} && chmod go-w {root}")
        if not (dst / "pyvenv.cfg").exists():
            try:
                root.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
                try:
                    _make(tmp / "rt", base, dists)
                    try:
                        os.rename(tmp / "rt", dst)
                    except OSError:  # another builder won the race: theirs is the same
                        if not (dst / "pyvenv.cfg").exists():
                            raise
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
            except OSError as e:
                raise SandboxError(f"cannot build the sandbox runtime under {root}: {e}",
                                   fix="make CEILING_HOME writable (or point it elsewhere)"
                                   ) from None
        paths = sandbox_paths()
        rt = Runtime(str(dst), base_prefix, names, tuple(_masks(base_prefix, paths)),
                     tuple(paths))
        _current[key] = rt
        return rt


__all__ = ["DEFAULT_PACKAGES", "INSIDE", "PYCACHE", "PYTHON", "Runtime", "base_python", "build",
           "closure", "current", "env_packages", "sandbox_paths"]
