"""Template ``terminal_ops/archive-extract``: back folders up into tarballs, unpack bundles.

Two jobs in one card: for every folder ``data/D`` create ``backups/D.tar.gz`` holding that
folder's ``.csv`` files (member names relative to the workspace, e.g. ``data/D/x.csv``; no
other files), and extract every ``incoming/B.tar.gz`` into ``restore/B/``. The hidden tests
open the archives (never extract them) and compare members and bytes. Difficulty scales the
numbers of folders and bundles (one line each in the oracle).

Variants: ``heldout`` folders are nested (``data/D/SUB/*.csv``, every level included) and
bundles hold sub-folders — a layout train never uses; ``fault`` removes ``gzip`` from PATH
(GNU tar's ``z`` needs it; ``python3 -m tarfile`` still works, and the oracle uses it);
``infeasible`` ships a bundle that is truncated, so it cannot be extracted.

Archives in the workspace are built deterministically (fixed mtimes, gzip mtime 0).
"""

from __future__ import annotations

import gzip
import io
import random
import tarfile
from typing import ClassVar

from ...cards import TaskCard
from .._common import TestModule, finish_card, missing_tool, text_block, unique_names, word_pool
from .._registry import Template, Variant, register

_SIZES = {1: (1, 1, 1, 1), 2: (4, 6, 4, 6), 3: (15, 17, 15, 17)}  # dirs lo/hi, bundles lo/hi


def _tar_gz(files: dict[str, str]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            data = files[name].encode()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


_HELPERS = '''
import tarfile


def members(path):
    with tarfile.open(regular_file(path), "r:*") as tar:
        out = {}
        for m in tar.getmembers():
            if m.isfile():
                out[m.name.removeprefix("./")] = tar.extractfile(m).read().decode()
        return out
'''


@register
class ArchiveExtract(Template):
    family = "terminal_ops"
    name = "archive-extract"
    summary = "tar.gz each data folder's csv files; extract incoming bundles"
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("files", "archives")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        nested = variant == "heldout"
        words = word_pool(variant)
        dlo, dhi, blo, bhi = _SIZES[difficulty]
        names = unique_names(rng, words, rng.randint(dlo, dhi) + rng.randint(blo, bhi))
        n_dirs = rng.randint(dlo, min(dhi, len(names) - blo))
        dirs, bundles = names[:n_dirs], names[n_dirs:]
        workspace: dict[str, str | bytes] = {}
        backups: dict[str, dict[str, str]] = {}
        for d in dirs:
            want: dict[str, str] = {}
            subs = [""] + ([f"{w}/" for w in unique_names(rng, words, rng.randint(1, 2))]
                           if nested else [])
            for sub in subs:
                for stem in unique_names(rng, words, rng.randint(1, 3), sep="_"):
                    path = f"data/{d}/{sub}{stem}.csv"
                    want[path] = "id,value\n" + "".join(
                        f"{i},{rng.randint(0, 999)}\n" for i in range(rng.randint(1, 4)))
                    workspace[path] = want[path]
                workspace[f"data/{d}/{sub}notes.txt"] = "not part of the backup\n"
            backups[f"backups/{d}.tar.gz"] = want
        restored: dict[str, str] = {}
        for b in bundles:
            inner: dict[str, str] = {}
            for stem in unique_names(rng, words, rng.randint(1, 3), sep="_"):
                sub = f"{rng.choice(words)}/" if nested else ""
                inner[f"{sub}{stem}.txt"] = text_block(rng, rng.randint(1, 3), words)
            blob = _tar_gz(inner)
            workspace[f"incoming/{b}.tar.gz"] = blob
            restored.update({f"restore/{b}/{k}": v for k, v in inner.items()})
        broken = None
        if variant == "infeasible":
            broken = f"incoming/{bundles[0]}.tar.gz"
            whole = workspace[broken]
            workspace[broken] = whole[: len(whole) // 2]
        tm = TestModule(helpers=_HELPERS)
        for i, (arc, want) in enumerate(sorted(backups.items())):
            tm.add(f"backup_{i}", f"assert members({arc!r}) == {want!r}")
        for i, b in enumerate(bundles):
            want = {k: v for k, v in restored.items() if k.startswith(f"restore/{b}/")}
            tm.add(f"restored_{i}", f"for path, text in {want!r}.items():\n"
                                    "    assert read_regular(path) == text, path")
        fault = variant == "fault"
        lines = ["mkdir -p backups restore"]
        for d in dirs:
            pick = f"$(find data/{d} -name '*.csv' | sort)"
            lines.append(f"python3 -m tarfile -c backups/{d}.tar.gz {pick}" if fault
                         else f"tar czf backups/{d}.tar.gz {pick}")
        for b in bundles:
            lines.append(f"python3 -m tarfile -e incoming/{b}.tar.gz restore/{b}" if fault
                         else f"mkdir -p restore/{b} && tar xzf incoming/{b}.tar.gz -C restore/{b}")
        depth = " and its sub-folders" if nested else ""
        instr = (f"For every folder D in data/, create backups/D.tar.gz holding the .csv files of "
                 f"data/D{depth} (member names like data/D/x.csv; nothing else). Then extract every "
                 "incoming/B.tar.gz into restore/B/.")
        return finish_card(
            type(self), variant=variant, instruction=instr, workspace=workspace, tests=tm,
            solution=lines, faults=[missing_tool("gzip")] if fault else [],
            infeasible_reason=f"{broken} is truncated and cannot be extracted",
            protected=["incoming/*", "data/**/*"],
            command_timeout_s=60.0)
