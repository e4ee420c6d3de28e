"""Fixtures for trainer tests: a tiny randomly initialised Llama with a LoRA adapter."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def tiny_tok() -> Any:
    from ceiling.basemodel import _corpus
    from ceiling.basemodel.build import train_tokenizer

    return train_tokenizer(_corpus.render(_corpus.generate(400, 0)), vocab_size=400)


def make_model(tok: Any, seed: int = 0, lora: bool = True) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, intermediate_size=64,
                      max_position_embeddings=256, tie_word_embeddings=True,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model = LlamaForCausalLM(cfg)
    if not lora:
        return model
    from ceiling.train._model import attach_lora

    return attach_lora(model, r=4, alpha=8, seed=seed)
