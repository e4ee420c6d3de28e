"""Sources for ``ceiling synth repo``: a local Python project folder or a PyPI sdist.

:func:`load_source` turns ``SOURCE`` into a :class:`Project`: its name, version, the file
tree (what becomes the cards' shared base layer), the package folder tests import from
(``""`` for a flat layout, ``"src"`` for a src layout) and the test files.

- ``NAME==VERSION`` is fetched once with ``pip download --no-binary :all: --no-deps`` into
  ``$CEILING_HOME/synth/sdists`` (later runs are offline) and unpacked with tar's ``data``
  filter (no absolute paths, links out of the tree or device files).
- A folder is read as is, minus version-control, build and cache folders.

Limits: only pure-Python projects are supported: an sdist that ships C sources, or whose
metadata names runtime dependencies that the sandbox's runtime does not have, is refused
with a reason (:class:`~ceiling._errors.ConfigError`); the fix names
``CEILING_RUNTIME_PACKAGES`` (docs/sandbox.md), which installs such dependencies into the
sandbox runtime. Test files are ``test_*.py`` / ``*_test.py`` anywhere in the tree.
"""

from __future__ import annotations

import email.parser
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import ConfigError
from ..cards import FileEntry, FileTree, read_tree
from ._hidden import is_test_file

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".tox", ".nox", "build", "dist",
                       ".eggs", ".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules",
                       ".venv", "venv", "docs", "doc", ".github", "benchmarks", "bench"})
MAX_FILE_BYTES = 512 * 1024
SPEC_RE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._\-]*)==(?P<version>[A-Za-z0-9.+!\-]+)$")


@dataclass
class Project:
    """A Python project ready for bug injection."""

    name: str
    version: str
    source: str  # what the user passed: a folder path or NAME==VERSION
    tree: FileTree
    import_root: str  # "" (flat layout) or "src"
    test_files: list[str] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)

    @property
    def slug(self) -> str:
        """A card-id-safe name: lowercase letters, digits, ``_`` and ``-``."""
        s = re.sub(r"[^a-z0-9_\-]+", "-", f"{self.name}-{self.version}".lower()).strip("-")
        return s or "project"

    def module_files(self) -> list[str]:
        """Python files of the library (not tests, not set-up scripts)."""
        tests = set(self.test_files)
        out = []
        for p, e in self.tree.items():
            if e.kind != "file" or not p.endswith(".py") or p in tests:
                continue
            parts = p.split("/")
            if parts[0] in ("setup.py", "conftest.py", "noxfile.py", "tasks.py", "fabfile.py"):
                continue
            if any(x in ("tests", "test", "testing", "examples", "scripts") for x in parts[:-1]):
                continue
            if parts[-1] == "conftest.py":
                continue
            if self.import_root and parts[0] != self.import_root:
                continue
            if not self.import_root and len(parts) == 1 and parts[0].startswith(
                    ("setup", "run", "make", "build")):
                continue  # top-level scripts, not the library
            out.append(p)
        return sorted(out)


def _read_project_tree(root: Path) -> FileTree:
    tree: FileTree = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts[:-1]):
            continue
        if rel.parts[-1] in SKIP_DIRS or p.is_symlink() or not p.is_file():
            continue
        if p.suffix in (".pyc", ".pyo", ".so", ".pyd", ".o") or p.stat().st_size > MAX_FILE_BYTES:
            continue
        if rel.parts[-1].endswith(".egg-info"):
            continue
        tree[rel.as_posix()] = FileEntry(p.read_bytes(), mode=0o755 if p.stat().st_mode & 0o111
                                         else 0o644)
    return tree


def _metadata(root: Path) -> tuple[str | None, str | None, list[str]]:
    for name in ("PKG-INFO",):
        f = root / name
        if f.is_file():
            msg = email.parser.Parser().parsestr(f.read_text(errors="replace"))
            reqs = [r for r in msg.get_all("Requires-Dist") or [] if "extra ==" not in r
                    and "extra==" not in r]
            return msg.get("Name"), msg.get("Version"), reqs
    return None, None, []


def _missing_requirements(reqs: list[str]) -> list[str]:
    """Requirements (without environment markers that exclude this python) not importable
    by the sandbox's runtime, i.e. not installed next to ceiling."""
    import importlib.metadata as md

    try:
        from packaging.markers import Marker
    except ImportError:  # pragma: no cover - packaging ships with pip/pytest
        Marker = None  # type: ignore[assignment,misc]
    missing = []
    for r in reqs:
        spec, _, marker = r.partition(";")
        if marker.strip() and Marker is not None:
            try:
                applies = Marker(marker.strip()).evaluate()
            except Exception:  # noqa: BLE001 - an odd marker: treat as applying
                applies = True
            if not applies:
                continue
        name = re.split(r"[\s<>=!~\[(]", spec.strip(), maxsplit=1)[0]
        try:
            md.distribution(name)
        except md.PackageNotFoundError:
            missing.append(name)
    return missing


def _import_root(tree: FileTree, name: str) -> str:
    if any(p.startswith("src/") and p.endswith("__init__.py") for p in tree):
        return "src"
    return ""


def fetch_sdist(spec: str, cache: Path) -> Path:
    """The sdist archive for ``NAME==VERSION`` (downloaded once into ``cache``)."""
    m = SPEC_RE.match(spec)
    if not m:
        raise ConfigError(f"{spec!r} is neither a folder nor NAME==VERSION", where="SOURCE",
                          fix="pass a project folder or a pinned PyPI name like toolz==0.12.1")
    name, version = m["name"], m["version"]
    cache.mkdir(parents=True, exist_ok=True)
    norm = re.sub(r"[-_.]+", "[-_.]", re.escape(name.lower()).replace("\\", ""))
    pat = re.compile(rf"^{norm}-{re.escape(version)}\.(tar\.gz|zip|tar\.bz2)$", re.IGNORECASE)
    for f in cache.iterdir():
        if pat.match(f.name):
            return f
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:",
                        "--no-deps", "--no-build-isolation", "-q", "-d", str(cache), spec],
                       capture_output=True, text=True, timeout=600, check=False)
    for f in cache.iterdir():
        if pat.match(f.name):
            return f
    # without build isolation pip needs the build backend installed: retry with it
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:",
                        "--no-deps", "-q", "-d", str(cache), spec],
                       capture_output=True, text=True, timeout=600, check=False)
    for f in cache.iterdir():
        if pat.match(f.name):
            return f
    raise ConfigError(f"pip could not fetch the source distribution of {spec}: "
                      f"{(r.stderr or r.stdout).strip().splitlines()[-1:] or ['no output']}",
                      where="SOURCE", fix="check the name and version on PyPI (an sdist must "
                      "exist) and the network, or pass an unpacked project folder")


def _unpack(archive: Path, dest: Path) -> Path:
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                target = (dest / info.filename).resolve()
                if not str(target).startswith(str(dest.resolve())):
                    raise ConfigError(f"unsafe path {info.filename!r} in {archive.name}",
                                      where=str(archive), fix="use another version")
            z.extractall(dest)
    else:
        with tarfile.open(archive) as t:
            t.extractall(dest, filter="data")
    subs = [p for p in dest.iterdir() if p.is_dir()]
    return subs[0] if len(subs) == 1 else dest


def load_source(source: str, *, cache: Path) -> Project:
    """Read ``source`` (a folder, or ``NAME==VERSION`` fetched into ``cache``)."""
    path = Path(source)
    if path.is_dir():
        tree = _read_project_tree(path)
        name, version, reqs = _metadata(path)
        name = name or path.resolve().name
        version = version or "local"
    else:
        archive = fetch_sdist(source, cache)
        with tempfile.TemporaryDirectory(prefix="ceiling-synth-") as tmp:
            root = _unpack(archive, Path(tmp))
            tree = _read_project_tree(root)
            name, version, reqs = _metadata(root)
        m = SPEC_RE.match(source)
        name = name or (m["name"] if m else archive.stem)
        version = version or (m["version"] if m else "0")
    if not tree:
        raise ConfigError("the project has no files", where=source,
                          fix="point at a folder with the project's sources and tests")
    if any(p.endswith((".c", ".pyx", ".cpp")) for p in tree):
        raise ConfigError(f"{name} ships C/Cython sources (not pure Python)", where=source,
                          fix="pick a pure-Python project")
    missing = _missing_requirements(reqs)
    if missing:
        raise ConfigError(f"{name} needs {', '.join(missing)}, which the sandbox runtime "
                          "does not have", where=source,
                          fix="pip install them next to ceiling and set CEILING_RUNTIME_PACKAGES="
                          + ",".join(missing) + " (docs/sandbox.md), or pick another project")
    tests = sorted(p for p in tree if is_test_file(p))
    if not tests:
        raise ConfigError(f"{name} ships no test files (test_*.py or *_test.py)", where=source,
                          fix="pick a project whose source distribution includes its tests")
    return Project(name=name, version=version, source=source, tree=tree,
                   import_root=_import_root(tree, name), test_files=tests, requires=reqs)


def source_tree(folder: str | Path) -> FileTree:
    """A folder's files as a tree (no filtering); used by tests."""
    return read_tree(folder)
