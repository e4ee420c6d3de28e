"""Suites resolve to deterministic cards; the report is one self-contained HTML file."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from eval_fakes import card_runs, traj

from ceiling import ConfigError
from ceiling.cards import save_card
from ceiling.envs import templates
from ceiling.evaluate import (
    Store,
    compare,
    record_run,
    render_report,
    resolve_suite,
    summarize,
    svg_bar_chart,
    svg_line_chart,
    write_report,
)


def test_family_suite_is_deterministic_and_covers_variants() -> None:
    a = resolve_suite("terminal_ops", 8)
    assert [c.id for c in a] == [c.id for c in resolve_suite("terminal_ops", 8)]
    assert len(a) == 8 and len({c.id for c in a}) == 8
    full = resolve_suite("terminal_ops")
    assert len(full) == 4 * len(templates("terminal_ops"))
    assert {c.id.rsplit("-", 1)[1] for c in full} == {"train", "heldout", "fault", "infeasible"}
    # every infeasible card has its feasible train twin in the suite
    ids = {c.id for c in full}
    for c in full:
        if not c.feasible:
            assert c.id.replace("-infeasible", "-train") in ids
    more = resolve_suite("terminal_ops", len(full) + 3)
    assert [c.id for c in more[: len(full)]] == [c.id for c in full]
    assert more[-1].id.split("@")[1].startswith("s1-")
    assert resolve_suite("terminal_ops", 2, card_seed=5)[0].seed == 5


def test_folder_suite_and_bad_suites(tmp_path: Path) -> None:
    for c in resolve_suite("terminal_ops", 3):
        save_card(c, tmp_path / "cards" / c.id.replace("/", "_").replace("@", "_"))
    cards = resolve_suite(str(tmp_path / "cards"))
    assert len(cards) == 3 and len(resolve_suite(str(tmp_path / "cards"), 2)) == 2
    one = next((tmp_path / "cards").iterdir())
    assert len(resolve_suite(str(one))) == 1
    with pytest.raises(ConfigError, match="unknown family"):
        resolve_suite("terminal_opz")
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_suite(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_suite(str(tmp_path / "mix.yaml"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no card folder"):
        resolve_suite(str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match="no card"):
        resolve_suite("terminal_ops", 0)


def _two_runs(tmp_path: Path) -> tuple[Store, list[str]]:
    store = Store()
    cards = [f"terminal_ops/a-v1@s{i}-d1-{v}" for i in range(4)
             for v in ("train", "heldout", "fault", "infeasible")]
    for name, ok in (("good", "solved"), ("bad", "failed")):
        trajs = []
        for cid in cards:
            v = cid.rsplit("-", 1)[1]
            out = ("abstained_correct" if ok == "solved" else "failed") if v == "infeasible" else ok
            trajs += [traj(cid, i, out, split="heldout" if v == "heldout" else "train",
                           feasible=v != "infeasible", faults=v == "fault") for i in range(2)]
        p = tmp_path / f"{name}.jsonl"
        p.write_text("".join(t.to_json() + "\n" for t in trajs))
        record_run(trajs, policy=f"scripted:{name}", suite="terminal_ops", card_ids=cards,
                   harness_fingerprint="fp", sampling={}, trajectories_path=p, name=name,
                   store=store)
    return store, ["good", "bad"]


def test_report_is_self_contained_with_every_panel(tmp_path: Path) -> None:
    store, names = _two_runs(tmp_path)
    recs = [store.get(n) for n in names]
    extra = svg_line_chart({"pass@1": [(0, 0.2), (64, 0.5)]}, title="learning curve")
    html = render_report(recs, comparisons=[compare(store, "good", "bad")],
                         extra_sections=[("Learning curve", extra)])
    out = write_report(html, tmp_path / "r" / "report.html")
    assert out.read_text() == html
    assert html.count("<svg") == 7  # pass@k, horizon, type, template, recovery/boundary, gap, extra
    for title in ("pass@k (unbiased", "Completion by horizon", "Completion by type",
                  "Recovery and boundary", "Training range vs held-out", "Run-to-run comparison",
                  "Learning curve", "Regressed cards (16)"):
        assert title in html, title
    # nothing is fetched: no script, no external src/href, no CSS import
    assert "<script" not in html and "@import" not in html
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', html)
    # bare summary dicts render too (what a trainer has in hand)
    s = summarize(card_runs("terminal_ops/a-v1@s0-d1-train", ["solved", "failed"]))
    assert "pass@k" in render_report([{**s, "name": "adhoc"}])
    assert "No runs" in render_report([])


def test_report_renders_in_chromium(tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed")
    store, names = _two_runs(tmp_path)
    out = write_report(render_report([store.get(n) for n in names]), tmp_path / "r.html")
    res = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'chrome'}", "--dump-dom",
         out.as_uri()], check=False, capture_output=True, text=True, timeout=90)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.count("<svg") == 6 and "<polyline" in res.stdout


def test_svg_helpers_handle_edges() -> None:
    assert "<svg" in svg_line_chart({}, title="empty")
    one = svg_line_chart({"a": [(1, 0.5)]}, bands={"a": [(0.4, 0.6)]}, y_range=(0, 1))
    assert "<circle" in one and "<polyline" not in one
    bars = svg_bar_chart({"g": {"a": (0.5, (0.4, 0.6)), "b": None}}, title="t <&>")
    assert "n/a" in bars and "t &lt;&amp;&gt;" in bars
    neg = svg_bar_chart({"gap": {"a": (-0.3, None)}}, y_range=(-1, 1))
    assert "<rect" in neg



def test_task_mix_suite_is_seeded(tmp_path: Path) -> None:
    mix = tmp_path / "mix.yaml"
    mix.write_text("task_mix: {terminal_ops: 1.0}\nhorizon: {short: 0.5, medium: 0.5}\n"
                   "variants: {train: 0.5, infeasible: 0.5}\n")
    a = resolve_suite(str(mix), 6, card_seed=3)
    assert len(a) == 6 and all(c.type == "terminal_ops" for c in a)
    assert [c.id for c in a] == [c.id for c in resolve_suite(str(mix), 6, card_seed=3)]
    assert [c.id for c in a] != [c.id for c in resolve_suite(str(mix), 6, card_seed=4)]
