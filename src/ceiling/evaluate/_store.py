"""The result store: one SQLite file, ``$CEILING_HOME/store.sqlite`` (default ``~/.ceiling``).

Tables: ``runs`` (one row per evaluated run, with its comparability key, the key's parts, its
summary JSON and the path of its trajectories JSONL) and ``episodes`` (one row per episode).
The schema is versioned with ``PRAGMA user_version``; the file runs in WAL mode so a viewer
can read while an evaluation writes. A run is named by its ``--name`` (unique) or its id
(or an unambiguous id prefix of at least 4 characters).

The comparability key is a sha256 over the parts that make two numbers comparable: the
cards (sorted content ids), the harness fingerprint, the sampling parameters (the sampling
seed excluded: reruns with other seeds are repeated measurements of the same thing), the
verifier version and the ceiling package version.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .._errors import ConfigError, nearest
from .._home import ceiling_home
from ..rollout import Trajectory

SCHEMA_VERSION = 1
KEY_PARTS = ("cards", "harness", "sampling", "verifier", "package")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    name TEXT UNIQUE,
    created TEXT NOT NULL,
    policy TEXT NOT NULL,
    suite TEXT NOT NULL,
    key TEXT NOT NULL,
    key_parts TEXT NOT NULL,
    summary TEXT NOT NULL,
    trajectories TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS episodes (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    card_id TEXT NOT NULL,
    sample INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    reward REAL NOT NULL,
    passed INTEGER NOT NULL,
    type TEXT NOT NULL,
    horizon TEXT NOT NULL,
    split TEXT NOT NULL,
    feasible INTEGER NOT NULL,
    faults INTEGER NOT NULL,
    steps INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    seconds REAL NOT NULL,
    PRIMARY KEY (run_id, card_id, sample)
);
CREATE INDEX IF NOT EXISTS runs_key ON runs(key);
"""


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def comparability_key(card_ids: Iterable[str], harness_fingerprint: str,
                      sampling: dict[str, Any], verifier_version: str,
                      package_version: str) -> tuple[str, dict[str, Any]]:
    """``(key, parts)``: the sha256 key and the parts it was computed from (``cards`` is the
    sha256 of the sorted card content ids; ``n_cards`` is informational)."""
    ids = sorted(set(card_ids))
    parts: dict[str, Any] = {
        "cards": hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16],
        "harness": harness_fingerprint,
        "sampling": {k: v for k, v in sorted(sampling.items()) if k != "seed"},
        "verifier": str(verifier_version),
        "package": str(package_version),
    }
    key = hashlib.sha256(_canon({p: parts[p] for p in KEY_PARTS}).encode()).hexdigest()[:16]
    parts["n_cards"] = len(ids)
    return key, parts


def differing_parts(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The key parts on which two runs differ, in KEY_PARTS order."""
    return [p for p in KEY_PARTS if _canon(a.get(p)) != _canon(b.get(p))]


class RunRecord(BaseModel):
    """One stored run (``summary`` is the dict :func:`summarize` returned)."""

    id: str
    name: str | None
    created: str
    policy: str
    suite: str
    key: str
    key_parts: dict[str, Any]
    summary: dict[str, Any]
    trajectories: str

    @property
    def label(self) -> str:
        return self.name or self.id


class Store:
    """The SQLite store. Cheap to construct; each call opens its own connection."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else ceiling_home() / "store.sqlite"

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.path, timeout=30)
        try:
            con.execute("PRAGMA foreign_keys = ON")
            version = con.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise ConfigError(
                    f"the store has schema version {version}, newer than this ceiling "
                    f"understands ({SCHEMA_VERSION})", where=str(self.path),
                    fix="upgrade ceiling, or point CEILING_HOME at another folder")
            if version < SCHEMA_VERSION:
                con.execute("PRAGMA journal_mode = WAL")
                con.executescript(_SCHEMA)
                con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            with con:
                yield con
        except sqlite3.DatabaseError as e:
            raise ConfigError(f"the store cannot be read: {e}", where=str(self.path),
                              fix="move the file away; ceiling creates a new store") from None
        finally:
            con.close()

    def add_run(self, *, policy: str, suite: str, key: str, key_parts: dict[str, Any],
                summary: dict[str, Any], trajectories: list[Trajectory],
                trajectories_path: str | os.PathLike[str], name: str | None = None,
                run_id: str | None = None) -> RunRecord:
        """Store a run and its episodes in one transaction. Raises ConfigError if ``name``
        is taken (nothing is written then)."""
        rec = RunRecord(
            id=run_id or uuid.uuid4().hex[:12], name=name,
            created=datetime.now(UTC).isoformat(timespec="seconds"), policy=policy,
            suite=suite, key=key, key_parts=key_parts, summary=summary,
            trajectories=str(trajectories_path))
        rows = [(rec.id, t.card_id, t.sample, t.outcome, float(t.reward), int(bool(t.passed)),
                 t.type, t.horizon, t.split, int(t.feasible), int(t.faults), len(t.turns),
                 int(sum(t.tokens.values())) if t.tokens else 0,
                 float(t.timings.get("total_s", 0.0))) for t in trajectories]
        with self._db() as con:
            if name is not None and con.execute("SELECT 1 FROM runs WHERE name = ?",
                                                (name,)).fetchone():
                raise ConfigError(f"a run named {name!r} already exists", where="--name",
                                  fix="choose another --name, or omit --name to get a fresh id")
            con.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?)",
                        (rec.id, rec.name, rec.created, rec.policy, rec.suite, rec.key,
                         _canon(rec.key_parts), _canon(rec.summary), rec.trajectories))
            con.executemany("INSERT OR REPLACE INTO episodes VALUES "
                            "(?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        return rec

    def name_taken(self, name: str) -> bool:
        with self._db() as con:
            return con.execute("SELECT 1 FROM runs WHERE name = ?", (name,)).fetchone() is not None

    @staticmethod
    def _rec(row: tuple[Any, ...]) -> RunRecord:
        return RunRecord(id=row[0], name=row[1], created=row[2], policy=row[3], suite=row[4],
                         key=row[5], key_parts=json.loads(row[6]), summary=json.loads(row[7]),
                         trajectories=row[8])

    def list_runs(self) -> list[RunRecord]:
        """Every run, newest first."""
        with self._db() as con:
            rows = con.execute("SELECT * FROM runs ORDER BY created DESC, rowid DESC").fetchall()
        return [self._rec(r) for r in rows]

    def get(self, ref: str) -> RunRecord:
        """A run by name, id, or unambiguous id prefix (>= 4 characters)."""
        with self._db() as con:
            row = con.execute("SELECT * FROM runs WHERE name = ? OR id = ?",
                              (ref, ref)).fetchone()
            if row is None and len(ref) >= 4:
                hits = con.execute("SELECT * FROM runs WHERE id LIKE ?",
                                   (ref.replace("%", "") + "%",)).fetchall()
                if len(hits) > 1:
                    raise ConfigError(f"run id prefix {ref!r} is ambiguous ({len(hits)} runs)",
                                      fix="give more characters of the id, or the run's name")
                row = hits[0] if hits else None
            if row is None:
                names = [r[0] for r in con.execute(
                    "SELECT COALESCE(name, id) FROM runs").fetchall()]
        if row is None:
            hint = nearest(ref, names)
            raise ConfigError(f"no run named {ref!r} in {self.path}",
                              fix=f"did you mean {hint!r}?" if hint else
                              "list runs with `ceiling view` or run `ceiling eval --name ...`")
        return self._rec(row)

    def episodes(self, run_id: str) -> list[dict[str, Any]]:
        """The episode rows of a run, ordered by card and sample."""
        with self._db() as con:
            con.row_factory = sqlite3.Row
            rows = con.execute("SELECT * FROM episodes WHERE run_id = ? ORDER BY card_id, "
                               "sample", (run_id,)).fetchall()
        return [dict(r) for r in rows]

    def delete(self, ref: str) -> None:
        rec = self.get(ref)
        with self._db() as con:
            con.execute("DELETE FROM episodes WHERE run_id = ?", (rec.id,))
            con.execute("DELETE FROM runs WHERE id = ?", (rec.id,))


def load_trajectories(path: str | os.PathLike[str]) -> list[Trajectory]:
    """Read a trajectories JSONL file (blank lines skipped; a torn last line, as an
    interrupted writer may leave, is ignored). Raises ConfigError if the file is missing."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"trajectory file {p} does not exist",
                          fix="the run's files were moved or deleted; rerun `ceiling eval`")
    out: list[Trajectory] = []
    lines = p.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(Trajectory.from_json(line))
        except (json.JSONDecodeError, TypeError) as e:
            if i == len(lines) - 1:
                break
            raise ConfigError(f"line {i + 1} is not a trajectory record ({e})",
                              where=str(p)) from None
    return out


__all__ = ["KEY_PARTS", "SCHEMA_VERSION", "RunRecord", "Store", "ceiling_home",
           "comparability_key", "differing_parts", "load_trajectories"]
