"""Evolution Strategies: ranks, a step that climbs a toy objective, exact resume, config.

The toy objective scores the live adapter directly (reward = -||theta - target||^2, so its
true gradient is known); the trainer-loop test uses real sampled replies of the tiny model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from ceiling import ConfigError
from ceiling.rollout import Trajectory, Turn
from ceiling.train import Trainer, config_from_dict
from ceiling.train._es import ES, ESSettings, centered_ranks
from ceiling.train._optim import optimizer_factory
from ceiling.verify import Outcome

from .conftest import make_model


def _traj(reward: float, i: int = 0) -> Trajectory:
    return Trajectory(episode_id=f"e{i}", card_id="c", card_hash="h", template="t",
                      type="x", horizon="short", difficulty=1, split="train", feasible=True,
                      faults=False, seed=0, sample=i, policy="p", harness_fingerprint="f",
                      sampling={}, reward=reward, passed=reward > 0,
                      outcome=Outcome.SOLVED if reward > 0 else Outcome.FAILED, turns=[Turn(text="")])


def _toy(model: Any, target: list[torch.Tensor]) -> Any:
    params = [p for p in model.parameters() if p.requires_grad]

    def objective() -> float:
        return -sum(float((p.detach() - t).pow(2).sum()) for p, t in zip(params, target, strict=True))

    def run() -> list[list[Trajectory]]:
        return [[_traj(objective())]]

    return params, objective, run


def test_centered_ranks_scale_and_ties() -> None:
    r = centered_ranks([3.0, 1.0, 2.0])
    assert r.tolist() == [0.5, -0.5, 0.0]
    assert centered_ranks([1.0, 1.0, 1.0, 1.0]).tolist() == [0.0] * 4
    t = centered_ranks([0.0, 1.0, 1.0, 0.0])  # two ties: each pair shares its mean rank
    assert t[0] == t[3] and t[1] == t[2] and float(t.sum()) == pytest.approx(0.0)
    assert float(t[1]) > float(t[0])


def test_an_es_step_moves_the_adapter_uphill_on_a_toy_objective(tiny_tok: Any) -> None:
    model = make_model(tiny_tok, seed=1)
    torch.manual_seed(7)
    params = [p for p in model.parameters() if p.requires_grad]
    target = [p.detach() + 0.05 * torch.randn_like(p) for p in params]
    params, objective, run = _toy(model, target)
    es = ES(model, ESSettings(population=64, sigma=0.01, step=0.5), seed=3)
    before = [p.detach().clone() for p in params]
    f0 = objective()
    res = es.evaluate_and_update(run)
    delta = [p.detach() - b for p, b in zip(params, before, strict=True)]
    true_grad = [-2 * (b - t) for b, t in zip(before, target, strict=True)]  # d objective
    cos = sum(float((d * g).sum()) for d, g in zip(delta, true_grad, strict=True)) / (
        sum(float(d.pow(2).sum()) for d in delta) ** 0.5 *
        sum(float(g.pow(2).sum()) for g in true_grad) ** 0.5)
    d = sum(p.numel() for p in params)
    # a random direction has |cos| ~ 1/sqrt(d); 64 antithetic pairs give ~ sqrt(128/(pi d))
    assert cos > 4 / d ** 0.5
    assert objective() > f0
    assert res.metrics["updated"] == 1.0 and res.metrics["update_norm"] > 0
    assert len(res.trajectories) == 2 * 64 and res.trained_tokens == 0
    for _ in range(2):
        es.evaluate_and_update(run)
    assert objective() > f0


def test_no_reward_difference_means_no_update(tiny_tok: Any) -> None:
    model = make_model(tiny_tok, seed=2)
    params = [p for p in model.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in params]
    res = ES(model, ESSettings(population=3), seed=0).evaluate_and_update(
        lambda: [[_traj(1.0), _traj(1.0, 1)]])
    assert res.metrics["updated"] == 0.0
    assert all(torch.equal(p, b) for p, b in zip(params, before, strict=True))


def test_state_dict_resumes_the_direction_stream_exactly(tiny_tok: Any) -> None:
    torch.manual_seed(0)
    target = [0.03 * torch.randn_like(p) for p in make_model(tiny_tok, seed=4).parameters()
              if p.requires_grad]

    def fresh() -> tuple[Any, ES, Any]:
        m = make_model(tiny_tok, seed=4)
        _, _obj, run = _toy(m, target)
        return m, ES(m, ESSettings(population=4), seed=11), run

    m1, es1, run1 = fresh()
    for _ in range(3):
        es1.evaluate_and_update(run1)
    m2, es2, run2 = fresh()
    es2.evaluate_and_update(run2)
    saved = es2.state_dict()
    weights = {n: p.detach().clone() for n, p in m2.named_parameters() if p.requires_grad}
    m3, es3, run3 = fresh()  # a new process: fresh optimizer, weights and state restored
    with torch.no_grad():
        for n, p in m3.named_parameters():
            if n in weights:
                p.copy_(weights[n])
    es3.load_state_dict(saved)
    for _ in range(2):
        es3.evaluate_and_update(run3)
    a = {n: p for n, p in m1.named_parameters() if p.requires_grad}
    b = {n: p for n, p in m3.named_parameters() if p.requires_grad}
    assert all(torch.equal(a[n], b[n]) for n in a)
    assert es3.steps == 3


def test_es_settings_come_from_the_config_and_bad_keys_are_named() -> None:
    cfg = config_from_dict({"optimizer": "es", "es": {"population": 2, "sigma": 0.05},
                            "stages": [{"name": "a", "tags": ["demo"]}]})
    s = ESSettings.from_dict(cfg.es)
    assert (s.population, s.sigma, s.step) == (2, 0.05, ESSettings.step)
    with pytest.raises(ConfigError, match=r"unknown key 'es.sigm'.*'sigma'"):
        ESSettings.from_dict({"sigm": 0.1})
    with pytest.raises(ConfigError, match="out of range"):
        ESSettings.from_dict({"population": 0})
    assert optimizer_factory("es").__name__ == "_factory"


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory, tiny_tok: Any) -> Path:
    d = tmp_path_factory.mktemp("esbase")
    make_model(tiny_tok, seed=5, lora=False).save_pretrained(d)
    tiny_tok.save_pretrained(d)
    return d


def _sampled_rollout(model: Any, tok: Any, cfg: Any, stage: Any, backend: str) -> Any:
    """Real sampled replies of the live model; reward: the reply's sampling log-prob (a
    continuous function of the adapter, so perturbations always rank differently)."""
    from ceiling.basemodel.build import prompt_of
    from ceiling.policies import PolicyRequest, SamplingParams
    from ceiling.policies._hf import HFPolicy

    pol = HFPolicy("live", model=model, tokenizer=tok)

    def rollout(cards: Any, k: int, seed: int) -> list[list[Trajectory]]:
        reqs = [PolicyRequest(messages=[], prompt=prompt_of(c.instruction))
                for c in cards for _ in range(k)]
        gens = pol.generate(reqs, SamplingParams(temperature=1.0, max_new_tokens=4, seed=seed))
        out = []
        for i, c in enumerate(cards):
            g = []
            for j in range(k):
                gen = gens[i * k + j]
                t = _traj(float(sum(gen.logprobs)), j)
                t.card_id, t.turns = c.id, [Turn(text=gen.text, token_ids=gen.token_ids)]
                g.append(t)
            out.append(g)
        return out

    return rollout


def test_es_in_the_trainer_resumes_to_the_same_adapter(base_dir: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    cfg = config_from_dict({
        "base": str(base_dir), "seed": 2, "optimizer": "es", "cards_per_step": 2,
        "checkpoint_every": 2, "lora": {"r": 2, "alpha": 4}, "sampling": {"max_new_tokens": 4},
        "es": {"population": 2, "episodes": 2, "sigma": 1.0, "step": 0.5},
        "stages": [{"name": "a", "tags": ["demo"], "steps": 4}]})

    def adapter(run: Path) -> dict[str, torch.Tensor]:
        ptr = json.loads((run / "checkpoints" / "latest.json").read_text())["checkpoint"]
        return load_file(str(run / "checkpoints" / ptr / "adapter" / "adapter_model.safetensors"))

    full = Trainer(cfg, tmp_path / "full", rollout_factory=_sampled_rollout).run()
    with pytest.raises(KeyboardInterrupt):
        Trainer(cfg, tmp_path / "cut", rollout_factory=_sampled_rollout, stop_after=3).run()
    Trainer(cfg, tmp_path / "cut", rollout_factory=_sampled_rollout).run(resume=True)
    a, b = adapter(tmp_path / "full"), adapter(tmp_path / "cut")
    assert a and a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(float(v.abs().sum()) > 0 for k, v in a.items() if "lora_B" in k)  # it moved
    assert full.unit["rollouts"] == 4 * 2 * 2 * 2 * 2 and full.unit["trained_tokens"] == 0


def test_the_old_lr_knob_is_refused_naming_its_replacement() -> None:
    with pytest.raises(ConfigError, match=r"es.lr.*step"):
        ESSettings.from_dict({"lr": 0.02})
    with pytest.raises(ConfigError, match="out of range"):
        ESSettings.from_dict({"max_update_ratio": -1})


def test_one_step_is_bounded_by_the_perturbation_length_and_the_adapter_norm(
        tiny_tok: Any) -> None:
    """||delta|| = step * sigma * sqrt(D), capped at max_update_ratio * ||theta||: a step
    never moves the adapter further than its perturbations went, whatever the population."""
    for ratio, capped in ((0.0, False), (1e-3, True)):
        model = make_model(tiny_tok, seed=5)
        params = [p for p in model.parameters() if p.requires_grad]
        before = [p.detach().clone() for p in params]
        theta = sum(float(p.pow(2).sum()) for p in before) ** 0.5
        dim = sum(p.numel() for p in params)
        s = ESSettings(population=16, sigma=0.02, step=0.5, max_update_ratio=ratio)
        calls = iter(range(10**6))  # every perturbation earns a different reward

        def run(calls: Any = calls) -> list[list[Trajectory]]:
            return [[_traj(float(next(calls)))]]

        res = ES(model, s, seed=1).evaluate_and_update(run)
        moved = sum(float((p.detach() - b).pow(2).sum())
                    for p, b in zip(params, before, strict=True)) ** 0.5
        want = ratio * theta if capped else 0.5 * 0.02 * dim ** 0.5
        assert moved == pytest.approx(want, rel=1e-4)
        assert res.metrics["update_norm"] == pytest.approx(want, rel=1e-4)
        assert res.metrics["update_ratio"] == pytest.approx(want / theta, rel=1e-4)


def test_a_few_es_steps_on_the_real_tiny_base_keep_the_training_pass_rate() -> None:
    """The shipped tiny base, its LoRA adapter, real sandboxed episodes scored by the
    verifier, the documented default knobs: the centre policy's pass rate on training
    cards (same cards, same sampling seeds) does not drop after ES steps, and it still
    submits (the old unnormalised step sent it to 0.0 and 20-step episodes)."""
    from ceiling.envs import make
    from ceiling.train import StepContext, pick_backend
    from ceiling.train._model import attach_lora, base_path, load_base
    from ceiling.train._trainer import default_rollout

    cfg = config_from_dict({"base": "builtin:tiny", "optimizer": "es", "workers": 2,
                            "es": {"population": 2, "episodes": 1},
                            "stages": [{"name": "a", "tags": ["demo"]}]})
    backend, _ = pick_backend("namespace")
    model, tok = load_base(base_path("builtin:tiny"), "cpu")
    model = attach_lora(model, r=16, alpha=32, seed=0)
    model.eval()
    rollout = default_rollout(model, tok, cfg, cfg.stages[0], backend)
    probe = [make(t, seed=40 + i) for i, t in enumerate(
        ["terminal_ops/demo-copy-v1", "terminal_ops/demo-create-v1",
         "terminal_ops/demo-append-v1"])]

    def centre() -> tuple[float, float]:
        eps = [t for g in rollout(probe, 4, 123) for t in g if t.outcome != "infra_error"]
        return (sum(t.passed for t in eps) / len(eps), sum(len(t.turns) for t in eps) / len(eps))

    p0, steps0 = centre()
    es = optimizer_factory("es")(model=model, config=cfg)
    train = [make("terminal_ops/demo-copy-v1", seed=7), make("terminal_ops/demo-move-v1", seed=8)]
    moved = 0.0
    for i in range(2):
        res = es.step(StepContext(i, train, rollout, 1000 + i))
        moved += res.metrics["update_norm"]
    p1, steps1 = centre()
    assert moved > 0, "no ES step updated the adapter: the test would prove nothing"
    assert p0 > 0.2  # the base solves some of these
    assert p1 >= p0 - 0.2, (p0, p1)
    assert steps1 <= 2 * steps0 + 1, (steps0, steps1)
