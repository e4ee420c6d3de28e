"""The SQLite store, the comparability key, compare and gate, on synthetic runs."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from eval_fakes import card_runs

from ceiling import ConfigError
from ceiling.evaluate import compare, gate, record_run
from ceiling.evaluate._store import (
    SCHEMA_VERSION,
    Store,
    comparability_key,
    differing_parts,
    load_trajectories,
)

CARDS = [f"t/a-v1@s{i}-d1-train" for i in range(10)]


def _run(store: Store, tmp: Path, name: str, outcomes: dict[str, list[str]], *,
         harness: str = "fp", sampling: dict | None = None) -> None:
    trajs = [t for cid in CARDS for t in card_runs(cid, outcomes.get(cid, outcomes["*"]))]
    path = tmp / f"{name}.jsonl"
    path.write_text("".join(t.to_json() + "\n" for t in trajs))
    record_run(trajs, policy=f"scripted:{name}", suite="t", card_ids=CARDS,
               harness_fingerprint=harness, sampling=sampling or {"temperature": 1.0},
               trajectories_path=path, name=name, store=store)


def test_key_covers_its_parts_and_ignores_the_sampling_seed() -> None:
    k1, p1 = comparability_key(["b", "a"], "h", {"temperature": 1.0, "seed": 1}, "1", "0.1")
    k2, _p2 = comparability_key(["a", "b"], "h", {"temperature": 1.0, "seed": 2}, "1", "0.1")
    assert k1 == k2 and p1["n_cards"] == 2
    k3, p3 = comparability_key(["a", "b"], "h2", {"temperature": 0.5}, "1", "0.1")
    assert k3 != k1 and differing_parts(p1, p3) == ["harness", "sampling"]
    k4, _ = comparability_key(["a"], "h", {"temperature": 1.0}, "1", "0.2")
    assert k4 != k1


def test_store_round_trip_names_and_schema(tmp_path: Path) -> None:
    store = Store()
    assert store.path.parent == Path(os.environ["CEILING_HOME"])
    _run(store, tmp_path, "good", {"*": ["solved", "solved"]})
    rec = store.get("good")
    assert rec.summary["pass@1"]["value"] == 1.0 and rec.summary["run_id"] == rec.id
    assert store.get(rec.id).name == "good" and store.get(rec.id[:6]).id == rec.id
    rows = store.episodes(rec.id)
    assert len(rows) == 20 and rows[0]["outcome"] == "solved" and rows[0]["steps"] == 3
    assert len(load_trajectories(rec.trajectories)) == 20
    with pytest.raises(ConfigError, match="already exists"):
        _run(store, tmp_path, "good", {"*": ["failed"]})
    assert len(store.list_runs()) == 1  # nothing half-written
    with pytest.raises(ConfigError, match="did you mean 'good'"):
        store.get("godo")
    con = sqlite3.connect(store.path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()
    store.delete("good")
    assert store.list_runs() == []


def test_newer_schema_and_garbage_file_are_clear_errors(tmp_path: Path) -> None:
    p = tmp_path / "s.sqlite"
    con = sqlite3.connect(p)
    con.execute("PRAGMA user_version = 99")
    con.close()
    with pytest.raises(ConfigError, match="newer"):
        Store(p).list_runs()
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ConfigError, match="cannot be read"):
        Store(bad).list_runs()


def test_torn_last_line_is_ignored_but_a_bad_middle_line_is_an_error(tmp_path: Path) -> None:
    t = card_runs("t/a-v1@s0-d1-train", ["solved", "failed"])
    p = tmp_path / "t.jsonl"
    p.write_text(t[0].to_json() + "\n" + t[1].to_json()[:40])
    assert len(load_trajectories(p)) == 1
    p.write_text("{oops\n" + t[0].to_json() + "\n")
    with pytest.raises(ConfigError, match="line 1"):
        load_trajectories(p)
    with pytest.raises(ConfigError, match="does not exist"):
        load_trajectories(tmp_path / "nope.jsonl")


def test_compare_and_gate_report_a_regression(tmp_path: Path) -> None:
    store = Store()
    _run(store, tmp_path, "base", {"*": ["solved", "solved"]})
    _run(store, tmp_path, "cand", {"*": ["failed", "failed"]})
    c = compare(store, "base", "cand")
    m = c["metrics"]["pass@1"]
    assert (m["a"], m["b"], m["delta"]) == (1.0, 0.0, -1.0) and m["ci"] == [-1.0, -1.0]
    assert c["shared_cards"] == 10 and len(c["flipped"]["regressed"]) == 10
    assert c["mcnemar"]["pass_to_fail"] == 10 and c["mcnemar"]["p"] < 0.01
    g = gate(store, "base", "cand", max_drop=0.02)
    assert not g.passed and "regressed" in g.reasons[0]
    assert gate(store, "base", "base").passed
    assert gate(store, "cand", "base").passed  # an improvement is no regression


def test_gate_needs_a_significant_drop(tmp_path: Path) -> None:
    store = Store()
    _run(store, tmp_path, "base", {"*": ["solved", "solved"]})
    # one card of ten fails: drop 0.1 > 0.02, but the paired CI includes 0
    _run(store, tmp_path, "cand", {CARDS[0]: ["failed", "failed"], "*": ["solved", "solved"]})
    g = gate(store, "base", "cand", max_drop=0.02)
    assert g.passed and "includes 0" in g.reasons[0]
    g2 = gate(store, "base", "cand", max_drop=0.5)
    assert g2.passed and "within" in g2.reasons[0]
    with pytest.raises(ConfigError, match="cost"):
        gate(store, "base", "cand", metrics=("steps",))
    with pytest.raises(ConfigError, match="no shared card"):
        gate(store, "base", "cand", metrics=("recovery",))
    with pytest.raises(ConfigError):
        gate(store, "base", "cand", max_drop=3)


def test_compare_refuses_different_keys_unless_forced(tmp_path: Path) -> None:
    store = Store()
    _run(store, tmp_path, "a", {"*": ["solved"]})
    _run(store, tmp_path, "b", {"*": ["solved"]}, harness="other", sampling={"temperature": 0})
    with pytest.raises(ConfigError, match="differ in harness, sampling"):
        compare(store, "a", "b")
    c = compare(store, "a", "b", force=True)
    assert c["forced"] and c["differing_parts"] == ["harness", "sampling"]


def test_named_run_folder_resumes_only_with_the_same_settings() -> None:
    from ceiling.evaluate._evaluate import _run_dir

    store = Store()
    d = _run_dir(store, "id1", "nightly", {"policy": "a", "k": 4})
    assert d.name == "name-nightly" and (d / "run.json").is_file()
    (d / "trajectories.jsonl").write_text("")  # an interrupted run left its file
    assert _run_dir(store, "id2", "nightly", {"policy": "a", "k": 4}) == d  # resume
    with pytest.raises(ConfigError, match="other settings"):
        _run_dir(store, "id3", "nightly", {"policy": "b", "k": 4})
    assert _run_dir(store, "id4", None, {"policy": "b"}).name == "id4"
