"""TaskMix: weights by type and horizon, the sampling scheme, the realised-distribution
report and its statistics, bad input. Most tests use a fake registry (a test seam) so they
do not depend on which families are registered while the others are being written."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ceiling import ConfigError
from ceiling.cards import TaskCard
from ceiling.envs import _registry
from ceiling.envs._mix import TaskMix, _chi2_sf, distribution_report

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "task_mix.yaml"
WEIGHTS = {"terminal_ops": 0.2, "repo_refactor": 0.3, "multi_tool": 0.3, "security_audit": 0.2}
HZ = {"short": 0.3, "medium": 0.4, "long": 0.3}


def _fake(family: str, name: str, horizons: dict[int, str]) -> type[_registry.Template]:
    class Fake(_registry.Template):
        def generate(self, rng: random.Random, difficulty: int,
                     variant: _registry.Variant) -> TaskCard:
            return TaskCard(id=f"{family}/{name}-v1", type=family,  # type: ignore[arg-type]
                            horizon=self.horizons[difficulty],  # type: ignore[arg-type]
                            instruction="fake")

    Fake.family, Fake.name = family, name
    Fake.difficulties = tuple(horizons)
    Fake.horizons = horizons  # type: ignore[misc]
    return Fake


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, type[_registry.Template]]:
    """Four families; security_audit cannot reach 'long', terminal_ops has two templates."""
    full = {1: "short", 2: "medium", 3: "long"}
    fakes = [_fake("terminal_ops", "a", full), _fake("terminal_ops", "b", {1: "short"}),
             _fake("repo_refactor", "c", full), _fake("multi_tool", "d", full),
             _fake("security_audit", "e", {1: "short", 2: "medium"})]
    reg = {f.template_id(): f for f in fakes}
    monkeypatch.setattr(_registry, "_REGISTRY", reg)
    monkeypatch.setattr(_registry, "_load_families", lambda: None)
    return reg


def _report(mix: TaskMix, n: int, seed: int) -> dict:
    draws = mix.draw(n, seed=seed)
    return distribution_report(mix, [(d.type, d.horizon, d.template_id, d.variant)
                                     for d in draws])


def test_example_yaml_realised_matches_weights(registry: dict) -> None:
    mix = TaskMix.from_yaml(EXAMPLE)
    exp = mix.expected_marginals()
    # raking matches both marginals although security_audit cannot reach 'long'
    assert exp["type"] == pytest.approx(WEIGHTS, abs=1e-9)
    assert exp["horizon"] == pytest.approx(HZ, abs=1e-9)
    assert ("security_audit", "long") not in mix.joint()
    rep = _report(mix, 1000, seed=11)
    assert rep["n"] == 1000
    assert rep["within_sampling_error"] and rep["matches_targets"]
    assert rep["chi_square"]["dof"] == 10 and rep["chi_square"]["p_value"] > 1e-4
    assert sum(r["count"] for r in rep["type"]["rows"].values()) == 1000
    assert rep["unreachable"]["security_audit"] == ["long"]
    assert "terminal_ops/demo-v1" not in rep["template"]


def test_independent_scheme_is_biased_and_says_so(registry: dict) -> None:
    mix = TaskMix.from_dict({"task_mix": WEIGHTS, "horizon": HZ, "scheme": "independent"})
    bias = distribution_report(mix, [("multi_tool", "short", "x", "train")])["bias"]
    # security_audit loses the 'long' share (0.2 * 0.3) before renormalising
    assert bias["type"]["security_audit"] == pytest.approx(0.2 * 0.7 / 0.94 - 0.2)
    assert bias["horizon"]["long"] < 0
    rep = _report(mix, 1000, seed=5)
    assert rep["within_sampling_error"]  # the sampler matches its own (biased) joint


def test_unreachable_marginals_leave_a_reported_bias(registry: dict) -> None:
    # only three types reach 'long', and they hold 0.5 of the mass: long=0.9 is impossible
    mix = TaskMix.from_dict({"task_mix": {"security_audit": 0.5, "multi_tool": 0.5},
                             "horizon": {"short": 0.05, "medium": 0.05, "long": 0.9}})
    exp = mix.expected_marginals()
    assert exp["type"] == pytest.approx({"security_audit": 0.5, "multi_tool": 0.5})
    assert exp["horizon"]["long"] <= 0.5 + 1e-9
    rep = _report(mix, 400, seed=1)
    assert rep["bias"]["horizon"]["long"] < -0.3
    assert not rep["matches_targets"]


def test_per_cell_check_catches_a_wrong_sampler(registry: dict) -> None:
    mix = TaskMix.from_dict({"task_mix": WEIGHTS, "horizon": HZ})
    skewed = [("multi_tool", "long", "multi_tool/d-v1", "train")] * 1000
    rep = distribution_report(mix, skewed)
    assert not rep["within_sampling_error"]
    assert rep["chi_square"]["p_value"] < 1e-12


def test_draws_are_deterministic_and_cover_variants(registry: dict) -> None:
    mix = TaskMix.from_dict({"task_mix": WEIGHTS, "horizon": HZ,
                             "variants": {"train": 0.5, "infeasible": 0.5}})
    a, b, c = mix.draw(50, seed=3), mix.draw(50, seed=3), mix.draw(50, seed=4)
    assert a == b and a != c
    assert {d.variant for d in a} == {"train", "infeasible"}
    cards = mix.sample(20, seed=9)
    draws = mix.draw(20, seed=9)
    assert [(c.type, c.horizon, c.template) for c in cards] == [
        (d.type, d.horizon, d.template_id) for d in draws]
    assert all(not c.feasible for c, d in zip(cards, draws, strict=True)
               if d.variant == "infeasible")


def test_filters_and_difficulty_range(registry: dict) -> None:
    mix = TaskMix.from_dict({"task_mix": {"terminal_ops": 1.0},
                             "templates": {"exclude": ["terminal_ops/b-*"]},
                             "difficulty": {"min": 2, "max": 3}})
    assert {d.template_id for d in mix.draw(100, seed=0)} == {"terminal_ops/a-v1"}
    assert mix.expected_marginals()["horizon"] == pytest.approx({"medium": 0.5, "long": 0.5})


@pytest.mark.parametrize(("data", "field", "words"), [
    ({"task_mix": {"multi_tool": 0.5, "terminal_ops": 0.4}}, "task_mix", ["sum to 0.9"]),
    ({"task_mix": {"multitool": 1.0}}, "task_mix", ["'multitool'", "did you mean 'multi_tool'"]),
    ({"task_mix": {"multi_tool": 1.0}, "horizon": {"shrot": 1.0}}, "horizon",
     ["'shrot'", "'short'"]),
    ({"task_mix": {"security_audit": 1.0}, "horizon": {"short": 0.5, "long": 0.5}},
     "horizon.long", ["reaches", "security_audit"]),
    ({"task_mix": {"multi_tool": 1.0}, "horizons": {"short": 1.0}}, "horizons",
     ["did you mean 'horizon'"]),
    ({"task_mix": {"multi_tool": 1.0}, "variants": {"train": 0.5, "fualt": 0.5}}, "variants",
     ["'fault'"]),
    ({"task_mix": {"multi_tool": -1.0, "terminal_ops": 2.0}}, "task_mix", [">= 0"]),
    ({"task_mix": {"multi_tool": 1.0}, "difficulty": {"min": 3, "max": 1}}, "difficulty",
     ["min"]),
])
def test_bad_input_names_the_field(registry: dict, data: dict, field: str,
                                   words: list[str]) -> None:
    with pytest.raises(ConfigError) as e:
        TaskMix.from_dict(data, where="mix.yaml")
    msg = str(e.value)
    assert f"mix.yaml: {field}" in msg or f"'{field}'" in msg, msg
    for w in words:
        assert w in msg, msg


def test_bad_seed_and_n(registry: dict) -> None:
    mix = TaskMix.from_dict({"task_mix": {"multi_tool": 1.0}})
    for seed in (-1, 2**32, 1.5):
        with pytest.raises(ConfigError, match="seed"):
            mix.draw(5, seed=seed)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="positive"):
        mix.draw(0)


def test_unregistered_type_and_bad_yaml(registry: dict, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_registry, "_REGISTRY", {k: v for k, v in registry.items()
                                                 if not k.startswith("security_audit")})
    with pytest.raises(ConfigError, match="no registered template of type 'security_audit'"):
        TaskMix.from_yaml(EXAMPLE)
    bad = tmp_path / "m.yaml"
    bad.write_text("task_mix: {multi_tool: 1.0\n")
    with pytest.raises(ConfigError, match="m.yaml"):
        TaskMix.from_yaml(bad)
    with pytest.raises(ConfigError, match="no such file"):
        TaskMix.from_yaml(tmp_path / "missing.yaml")


def test_chi_square_survival_function() -> None:
    assert _chi2_sf(3.841458820694124, 1) == pytest.approx(0.05, rel=1e-6)
    assert _chi2_sf(18.307038053275146, 10) == pytest.approx(0.05, rel=1e-6)
    assert _chi2_sf(0.0, 4) == 1.0
    assert _chi2_sf(200.0, 3) < 1e-40


def test_cli_sample_json(registry: dict, tmp_path: Path,
                         capsys: pytest.CaptureFixture[str]) -> None:
    from ceiling.cli import main

    with pytest.raises(SystemExit) as e:
        main(["envs", "sample", str(EXAMPLE), "--n", "300", "--seed", "2", "--json"])
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["made_cards"] and out["n"] == 300 and not out["errors"]
    assert out["report"]["within_sampling_error"] and out["report"]["matches_targets"]
    assert out["target"]["type"] == WEIGHTS
    with pytest.raises(SystemExit) as e:
        main(["envs", "sample", str(EXAMPLE), "--n", "10", "--seed", str(2**32)])
    assert e.value.code == 2
    assert "seed" in capsys.readouterr().err


def test_real_multi_tool_cards_have_the_drawn_horizon() -> None:
    mix = TaskMix.from_dict({"task_mix": {"multi_tool": 1.0},
                             "horizon": {"short": 0.5, "medium": 0.5, "long": 0.0}})
    for d in mix.draw(4, seed=1):
        card = d.make()
        assert card.type == "multi_tool" and card.horizon == d.horizon == d.horizon
