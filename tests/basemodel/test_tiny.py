"""builtin:tiny: its corpus, tokenizer, build and the shipped fixture."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from ceiling import CeilingError, ConfigError
from ceiling.basemodel import FIXTURE, _corpus, resolve, weights_sha256
from ceiling.basemodel.build import train_tokenizer
from ceiling.envs._common import EXTS_HELDOUT, WORDS_HELDOUT


def test_corpus_uses_the_train_name_pool_only() -> None:
    texts = _corpus.render(_corpus.generate(3000, 7))
    words = set(re.findall(r"[a-z]+", " ".join(texts)))
    assert not words & set(WORDS_HELDOUT)
    assert not words & set(EXTS_HELDOUT)


def test_corpus_speaks_the_demo_templates_shapes() -> None:
    from ceiling.envs.terminal_ops import DEMO_OPS

    for kind, (instruction, command) in DEMO_OPS.items():
        assert _corpus.PHRASES[kind][0] == instruction, kind
        assert _corpus.COMMANDS[kind] == command, kind


def test_corpus_is_deterministic_and_noisy() -> None:
    a, b = _corpus.generate(2000, 1), _corpus.generate(2000, 1)
    assert _corpus.render(a) == _corpus.render(b)
    shapes = [e.shape for e in a]
    wrong = shapes.count("wrong") / (shapes.count("wrong") + shapes.count("plain"))
    assert 0.4 < wrong < 0.6
    assert {"missing", "transient", "look", "guard", "permission"} <= set(shapes)


def test_rendering_is_the_harness_line_protocol() -> None:
    from ceiling.harness import render_line_episode

    ep = _corpus.make_episode(random.Random(3))
    text = _corpus.render([ep])[0]
    assert text == render_line_episode(ep.instruction, ep.turns)
    assert text.startswith("task: ") and text.endswith(("> submit\n", "\n"))
    assert _corpus.prompt_of("Copy a to b.") == "task: Copy a to b.\n> "


def test_prompt_tokens_are_a_prefix_of_episode_tokens() -> None:
    eps = _corpus.generate(300, 2)
    texts = _corpus.render(eps)
    tok = train_tokenizer(texts, vocab_size=600)
    for text in texts[:100]:
        full = tok(text)["input_ids"]
        for m in re.finditer(r"\n> ", text):
            prompt = text[:m.end()]
            ids = tok(prompt)["input_ids"]
            assert full[:len(ids)] == ids, prompt
    assert tok.decode(tok(texts[0])["input_ids"]) == texts[0]


def test_resolve_errors_and_smollm2_hook(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="did you mean 'builtin:tiny'"):
        resolve("tinny")
    from ceiling.basemodel import _smollm2

    monkeypatch.setattr(_smollm2, "ensure_converted", lambda: tmp_path)
    assert resolve("builtin:smollm2") == tmp_path
    with pytest.raises(CeilingError, match="no weight files"):
        weights_sha256(tmp_path)


def test_build_writes_a_loadable_model(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ceiling.basemodel.build import BuildConfig, build_tiny

    out = tmp_path / "tiny"
    rep = build_tiny(out, BuildConfig(steps=3, action_steps=2, episodes=300, batch_size=4,
                                      eval_tasks=3, eval_samples=2, hidden=32, layers=1,
                                      heads=2, ffn=64))
    assert rep.steps_done == 5 and not rep.capped and rep.tokens_seen > 0
    assert 0.0 <= rep.eval["greedy_exact"] <= 1.0
    model = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.eos_token == "<|eos|>" and tok.pad_token == "<|pad|>"
    assert model.config.tie_word_embeddings
    sha = weights_sha256(out)
    assert sha == weights_sha256(out) and len(sha) == 64
    assert (out / "build.json").is_file() and not list(tmp_path.glob(".tiny*"))
    again = build_tiny(tmp_path / "more", BuildConfig(init=str(out), action_steps=1,
                                                      episodes=300, batch_size=4, eval_tasks=2,
                                                      eval_samples=1))
    assert again.steps_done == 1 and again.eval["init_build"]["steps_done"] == 5


def test_action_masks_cover_exactly_the_action_lines() -> None:
    from ceiling.basemodel.build import encode_episodes

    texts = _corpus.render(_corpus.generate(50, 4))
    tok = train_tokenizer(texts, vocab_size=500)
    ids, masks = encode_episodes(tok, texts)
    for t, i, m in zip(texts, ids, masks, strict=True):
        learned = tok.decode([x for x, f in zip(i, m, strict=True) if f],
                             skip_special_tokens=True)
        want = "".join(line[2:] for line in t.splitlines(keepends=True)
                       if line.startswith("> "))
        assert learned == want


@pytest.mark.skipif(not (FIXTURE / "model.safetensors").is_file(), reason="fixture not built")
def test_shipped_fixture_is_a_capable_hf_model() -> None:
    import json

    from ceiling.policies import PolicyRequest, SamplingParams, load_policy

    path = resolve("builtin:tiny")
    assert path == FIXTURE
    build = json.loads((path / "build.json").read_text())
    assert 0.5e6 < build["params"] < 2e6
    pol = load_policy(f"hf:{path}")
    gen = pol.generate([PolicyRequest(messages=[], prompt=_corpus.prompt_of(
        "Delete the file fox.txt."))], SamplingParams(temperature=0.0, max_new_tokens=24,
                                                       stop=("\n",)))[0]
    assert gen.text.startswith(("run: ", "give_up", "submit")), gen.text
