"""The trainer loop: checkpoints, exact resume, accounting, base-hash checks, config errors.

Rollouts here go through a seam: the live model samples real replies (through the ``hf``
policy, seeded) for real demo cards, and a deterministic function of the reply is its
reward. The sandboxed path is covered by the demo test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from ceiling import CeilingError, ConfigError
from ceiling.rollout import Trajectory, Turn
from ceiling.train import TrainConfig, Trainer, config_from_dict, load_config

from .conftest import make_model


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory, tiny_tok: Any) -> Path:
    d = tmp_path_factory.mktemp("base")
    make_model(tiny_tok, seed=5, lora=False).save_pretrained(d)
    tiny_tok.save_pretrained(d)
    return d


def fake_rollout(model: Any, tok: Any, cfg: TrainConfig, stage: Any, backend: str) -> Any:
    from ceiling.basemodel._corpus import prompt_of
    from ceiling.policies import PolicyRequest, SamplingParams
    from ceiling.policies._hf import HFPolicy

    pol = HFPolicy("live", model=model, tokenizer=tok)

    def rollout(cards: Any, k: int, seed: int) -> list[list[Trajectory]]:
        reqs = [PolicyRequest(messages=[], prompt=prompt_of(c.instruction))
                for c in cards for _ in range(k)]
        gens = pol.generate(reqs, SamplingParams(temperature=1.0, max_new_tokens=8,
                                                 stop=("\n",), seed=seed))
        groups = []
        for i, c in enumerate(cards):
            group = []
            for j in range(k):
                g = gens[i * k + j]
                r = float(g.token_ids[0] % 2 == 0)  # any deterministic, mixed reward
                group.append(Trajectory(
                    episode_id=f"{c.id}#{j}", card_id=c.id, card_hash="h", template=c.template,
                    type=c.type, horizon=c.horizon, difficulty=c.difficulty, split=c.split,
                    feasible=True, faults=False, seed=seed, sample=j, policy="live",
                    harness_fingerprint="f", sampling={}, reward=r, passed=r > 0,
                    outcome="solved" if r else "failed",
                    turns=[Turn(text=g.text, token_ids=g.token_ids, logprobs=g.logprobs,
                                prompt_token_ids=g.prompt_token_ids)]))
            groups.append(group)
        return groups

    return rollout


def _cfg(base: Path, **kw: Any) -> TrainConfig:
    d: dict[str, Any] = {
        "base": str(base), "seed": 3, "group_size": 4, "cards_per_step": 2, "lr": 5e-3,
        "checkpoint_every": 2, "lora": {"r": 4, "alpha": 8},
        "sampling": {"max_new_tokens": 8},
        "stages": [{"name": "a", "tags": ["demo"], "steps": 3},
                   {"name": "b", "templates": ["terminal_ops/demo-copy-v1"], "steps": 2}],
    }
    d.update(kw)
    return config_from_dict(d)


def _adapter(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    ptr = json.loads((run / "checkpoints" / "latest.json").read_text())["checkpoint"]
    return load_file(str(run / "checkpoints" / ptr / "adapter" / "adapter_model.safetensors"))


def test_killed_and_resumed_run_ends_with_the_same_adapter(base_dir: Path,
                                                           tmp_path: Path) -> None:
    cfg = _cfg(base_dir)
    full = Trainer(cfg, tmp_path / "full", rollout_factory=fake_rollout).run()
    assert full.steps == 5
    with pytest.raises(KeyboardInterrupt):  # killed during step 3, after the step-2 checkpoint
        Trainer(cfg, tmp_path / "cut", rollout_factory=fake_rollout, stop_after=3).run()
    resumed = Trainer(cfg, tmp_path / "cut", rollout_factory=fake_rollout).run(resume=True)
    assert resumed.steps == 5
    a, b = _adapter(tmp_path / "full"), _adapter(tmp_path / "cut")
    assert a.keys() == b.keys() and a
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(float(v.abs().sum()) > 0 for k, v in a.items() if "lora_B" in k)  # it trained
    assert full.unit == {**resumed.unit, "wall_s": full.unit["wall_s"]}
    assert full.unit["rollouts"] == 5 * 2 * 4 and full.unit["generated_tokens"] > 0
    assert full.unit["trainer_flops"] > 0 and full.unit["distinct_cards"] >= 2
    lines = (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2, 3, 4, 5]
    assert (tmp_path / "full" / "tb").is_dir()


def test_checkpoint_adapter_loads_with_peft_and_records_the_base(base_dir: Path,
                                                                 tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from ceiling.basemodel import weights_sha256
    from ceiling.train import verify_base

    s = Trainer(_cfg(base_dir, stages=[{"name": "a", "tags": ["demo"], "steps": 2}]),
                tmp_path / "r", rollout_factory=fake_rollout).run()
    ck = Path(s.checkpoint or "")
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir),
                                      str(ck / "adapter"))
    assert model is not None
    meta = json.loads((ck / "meta.json").read_text())
    assert meta["base_sha256"] == weights_sha256(base_dir)
    assert meta["unit"]["rollouts"] == 16
    assert verify_base(ck, base_dir)["match"] is True
    assert not list((tmp_path / "r" / "checkpoints").glob(".*tmp*"))


def test_resuming_on_another_base_is_refused_naming_both_hashes(base_dir: Path, tmp_path: Path,
                                                                tiny_tok: Any) -> None:
    from ceiling.basemodel import weights_sha256

    Trainer(_cfg(base_dir, stages=[{"name": "a", "tags": ["demo"], "steps": 2}]),
            tmp_path / "r", rollout_factory=fake_rollout).run()
    other = tmp_path / "other"
    make_model(tiny_tok, seed=99, lora=False).save_pretrained(other)
    tiny_tok.save_pretrained(other)
    cfg = _cfg(other, stages=[{"name": "a", "tags": ["demo"], "steps": 4}])
    with pytest.raises(ConfigError) as e:
        Trainer(cfg, tmp_path / "r", rollout_factory=fake_rollout).run(resume=True)
    assert weights_sha256(base_dir) in str(e.value) and weights_sha256(other) in str(e.value)
    with pytest.raises(ConfigError, match="already holds checkpoints"):
        Trainer(_cfg(base_dir), tmp_path / "r", rollout_factory=fake_rollout).run()


def test_config_errors_name_the_key_and_suggest(tmp_path: Path, base_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'group_sise'.*'group_size'"):
        config_from_dict({"group_sise": 4, "stages": [{"name": "a", "tags": ["demo"]}]})
    with pytest.raises(ConfigError, match=r"unknown key 'stages.0.stepz'.*'steps'"):
        config_from_dict({"stages": [{"name": "a", "stepz": 3}]})
    with pytest.raises(ConfigError, match="empty task mix"):
        Trainer(_cfg(base_dir, stages=[{"name": "x", "tags": ["no-such-tag"]}]),
                tmp_path / "e", rollout_factory=fake_rollout).run()
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            Trainer(_cfg(base_dir, device="cuda"), tmp_path / "g",
                    rollout_factory=fake_rollout).run()
    with pytest.raises(CeilingError, match="does not exist"):
        Trainer(_cfg(tmp_path / "nope"), tmp_path / "n", rollout_factory=fake_rollout).run()
    bad = tmp_path / "notlm"
    bad.mkdir()
    (bad / "config.json").write_text('{"model_type": "bert-nonsense"}')
    with pytest.raises(CeilingError, match="causal LM"):
        Trainer(_cfg(bad), tmp_path / "b", rollout_factory=fake_rollout).run()
    y = tmp_path / "c.yaml"
    y.write_text("stages:\n  - name: a\n    tags: [demo]\nlr: [1\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(y)
