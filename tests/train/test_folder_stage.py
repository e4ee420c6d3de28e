"""A stage given as a folder of card folders (``cards:``): what ``ceiling synth`` and
``ceiling import`` write is trainable at once, each card an arm of the band sampler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ceiling import ConfigError
from ceiling.cards import TaskCard, save_card
from ceiling.envs import make
from ceiling.rollout import Trajectory
from ceiling.sandbox import namespaces_available
from ceiling.train import BandSampler, StageConfig, config_from_dict, stage_arms


def _folder(root: Path) -> tuple[Path, list[TaskCard]]:
    """Three train-split demo cards and one held-out card, saved as card folders."""
    cards = [make("terminal_ops/demo-copy-v1", seed=1),
             make("terminal_ops/demo-create-v1", seed=2),
             make("terminal_ops/demo-append-v1", seed=3),
             make("terminal_ops/demo-copy-v1", seed=4, variant="heldout")]
    for i, c in enumerate(cards):
        save_card(c, root / f"card-{i}")
    (root / "manifest.jsonl").write_text("{}\n")  # other files beside the cards are ignored
    return root, cards


def _traj(card: TaskCard, passed: bool) -> Trajectory:
    return Trajectory(episode_id=f"{card.id}#0", card_id=card.id, card_hash="h",
                      template=card.template, type=card.type, horizon=card.horizon,
                      difficulty=card.difficulty, split=card.split, feasible=True,
                      faults=False, seed=0, sample=0, policy="p", harness_fingerprint="f",
                      sampling={}, reward=float(passed), passed=passed,
                      outcome="solved" if passed else "failed")


def test_a_card_folder_stage_has_one_arm_per_train_card(tmp_path: Path) -> None:
    root, cards = _folder(tmp_path / "cards")
    assert cards[3].split == "heldout"
    arms = stage_arms(StageConfig(name="f", cards=str(root)))
    assert sorted(a.template for a in arms) == sorted(c.id for c in cards[:3])
    assert all(a.path and Path(a.path).is_dir() for a in arms)
    # one card folder works too; difficulties filter folder cards like template arms
    assert len(stage_arms(StageConfig(name="one", cards=str(root / "card-0")))) == 1
    with pytest.raises(ConfigError, match="empty task mix"):
        stage_arms(StageConfig(name="f", cards=str(root), difficulties=[9]))

    sampler = BandSampler(arms, seed=0)
    drawn = sampler.draw(12)
    assert {c.content_id() for c in drawn} <= {c.content_id() for c in cards[:3]}
    # a folder card's results move its own arm only, and survive the state round trip
    sampler.update([_traj(cards[0], True), _traj(cards[0], True), _traj(cards[1], False)])
    seen = {a.template: (a.passes, a.fails) for a in sampler.arms}
    assert seen[cards[0].id] == (2.0, 0.0) and seen[cards[1].id] == (0.0, 1.0)
    assert seen[cards[2].id] == (0.0, 0.0)
    again = BandSampler(stage_arms(StageConfig(name="f", cards=str(root))), seed=0)
    again.load_state_dict(json.loads(json.dumps(sampler.state_dict())))
    assert {a.key: a.passes for a in again.arms} == {a.key: a.passes for a in sampler.arms}
    assert again.draw(1)[0].content_id() in {c.content_id() for c in cards[:3]}


def test_bad_card_folders_name_the_stage_field_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        stage_arms(StageConfig(name="s", cards=str(tmp_path / "nope")))
    assert "stages[s].cards" in str(e.value) and "does not exist" in str(e.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no card folder"):
        stage_arms(StageConfig(name="s", cards=str(tmp_path / "empty")))


@pytest.mark.skipif(namespaces_available() is not None, reason="needs the namespace sandbox")
def test_train_runs_real_episodes_on_a_card_folder(tmp_path: Path) -> None:
    """The real trainer on the built-in base, in sandboxed episodes, drawing only the
    folder's train-split cards."""
    import torch

    from ceiling.train import Trainer

    root, cards = _folder(tmp_path / "cards")
    cfg = config_from_dict({
        "base": "builtin:tiny", "seed": 0, "group_size": 2, "cards_per_step": 2,
        "checkpoint_every": 2, "sampling": {"max_new_tokens": 24},
        "stages": [{"name": "folder", "cards": str(root), "steps": 2}]})
    s = Trainer(cfg, tmp_path / "run").run()
    assert s.steps == 2
    recs = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["episodes"] for r in recs] == [4, 4] and all(r["infra_errors"] == 0 for r in recs)
    ckpt = Path(s.checkpoint or "")
    blob: Any = torch.load(ckpt / "trainer.pt", weights_only=False)
    arms = blob["sampler"]["state"]["arms"]
    assert sum(a["seen"] for a in arms) == 8
    assert {a["template"] for a in arms} == {c.id for c in cards[:3]}


@pytest.mark.skipif(namespaces_available() is not None, reason="needs the namespace sandbox")
def test_stage_reliability_measures_a_card_folder_as_one_row(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    from ceiling.train import stage_reliability

    monkeypatch.setenv("CEILING_HOME", str(tmp_path / "home"))
    root, _cards = _folder(tmp_path / "cards")
    rel = stage_reliability(StageConfig(name="f", cards=str(root)), cards_per_template=2,
                            exploits_per_card=1)
    [row] = rel.templates
    assert row.template == f"cards:{root}" and row.cards == 2
    assert row.oracle_solved == 2 and row.null_solved == 0 and row.exploit_runs == 2
    assert row.exploit_positive == 0 and rel.reliability == 1.0
    # cached: a second call plays nothing
    assert stage_reliability(StageConfig(name="f", cards=str(root)), cards_per_template=2,
                             exploits_per_card=1).cached == 1
