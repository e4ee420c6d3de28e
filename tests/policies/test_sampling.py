"""Sampling is the user's to set: flags reach the policy, T=0 is greedy, bad values are
clear errors, and the settings enter the comparability key."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from ceiling._errors import ConfigError
from ceiling.policies import PolicyRequest, SamplingParams, load_policy, sampling_params


@pytest.fixture(scope="module")
def tiny() -> Any:
    return load_policy("builtin:tiny")


def _reqs() -> list[PolicyRequest]:
    from ceiling.harness import render_line_episode

    out = []
    for task in ("Create the file notes_fox.txt containing hello.",
                 "Delete the file old_owl.log.", "Count the lines of data_cat.csv."):
        p = render_line_episode(task, [])
        out.append(PolicyRequest(messages=[{"role": "user", "content": p}], prompt=p))
    return out


def test_greedy_is_deterministic_on_builtin_tiny(tiny: Any) -> None:
    greedy = [SamplingParams(temperature=0.0, max_new_tokens=16, stop=("\n",), seed=s)
              for s in (1, 2)]
    a, b = (tiny.generate(_reqs(), sp) for sp in greedy)
    assert [g.text for g in a] == [g.text for g in b]
    assert all(g.text.strip() for g in a)
    # T=1 with different seeds samples different replies somewhere (it is not greedy)
    hot = [tiny.generate(_reqs() * 2, SamplingParams(temperature=1.5, max_new_tokens=16,
                                                     stop=("\n",), seed=s)) for s in (1, 2)]
    assert [g.text for g in hot[0]] != [g.text for g in hot[1]]


def test_sampling_params_checks_values() -> None:
    assert sampling_params() == SamplingParams()
    sp = sampling_params(temperature=0, top_p=0.9, max_new_tokens=7)
    assert (sp.temperature, sp.top_p, sp.max_new_tokens) == (0.0, 0.9, 7)
    for kw, flag in [({"temperature": -1}, "--temperature"), ({"top_p": 0}, "--top-p"),
                     ({"top_p": 1.5}, "--top-p"), ({"max_new_tokens": 0}, "--max-new-tokens")]:
        with pytest.raises(ConfigError, match="fix") as e:
            sampling_params(**kw)  # type: ignore[arg-type]
        assert e.value.where == flag


def test_eval_flags_reach_the_policy_and_the_key(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    """`run_eval(temperature=, top_p=, max_new_tokens=, harness_format=)` hands exactly those
    settings to the policy and records them in the run's comparability key."""
    from ceiling.envs import make
    from ceiling.evaluate import Store, run_eval
    from ceiling.policies._hf import HFPolicy

    seen: list[SamplingParams] = []
    real = HFPolicy.generate

    def spy(self: Any, reqs: Any, sp: SamplingParams) -> Any:
        seen.append(sp)
        return real(self, reqs, sp)

    monkeypatch.setattr(HFPolicy, "generate", spy)
    monkeypatch.setenv("CEILING_HOME", str(tmp_path))
    card = make("terminal_ops/demo-create-v1", seed=11, variant="train")
    card.budget.max_steps = 2
    store = Store(tmp_path / "store.sqlite")
    a = run_eval("builtin:tiny", "demo", cards=[card], temperature=0.0, top_p=0.5,
                 max_new_tokens=9, harness_format="line", store=store)
    assert seen and all((s.temperature, s.top_p, s.max_new_tokens) == (0.0, 0.5, 9)
                        for s in seen)
    assert a.key_parts["sampling"]["temperature"] == 0.0
    assert a.key_parts["sampling"]["top_p"] == 0.5
    b = run_eval("builtin:tiny", "demo", cards=[card], temperature=1.0, top_p=0.5,
                 max_new_tokens=9, harness_format="line", store=store)
    assert a.key != b.key  # sampling enters the comparability key
    c = run_eval("builtin:tiny", "demo", cards=[card], temperature=0.0, top_p=0.5,
                 max_new_tokens=9, harness_format="bash", store=store)
    assert c.key != a.key  # so does the harness
    assert dataclasses.asdict(seen[-1])["top_p"] == 0.5
