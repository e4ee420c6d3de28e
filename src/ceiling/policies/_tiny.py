"""A randomly initialised, very small chat model for tests and benchmarks (no download).

``build_random_chat_model(path)`` trains a byte-level BPE on a few lines of agent text,
wraps it as a ``PreTrainedTokenizerFast`` with a chat template, builds a Llama with hidden
size 32 and saves both with ``save_pretrained``, so ``hf:PATH`` and ``ceiling serve``
load it through the ordinary transformers code path. Its replies are noise: it exists to
exercise the plumbing (batching, stop strings, log-probs, HTTP), not to solve tasks.
"""

from __future__ import annotations

import os
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
_CORPUS = [
    "task: Create the file notes.txt containing hello.", "> run: echo hello > notes.txt",
    "| [ok]", "> submit", '{"tool": "run", "args": {"cmd": "ls -l"}}',
    '{"tool": "submit", "args": {}}', "give_up: the input file does not exist",
    "write: a.txt <<< one\\ntwo", "read: logs/app.log", "| [exit 1]",
]


def build_random_chat_model(path: str | os.PathLike[str], *, seed: int = 0,
                            hidden: int = 32, layers: int = 2, vocab: int = 400) -> Path:
    """Write a tiny random Llama + tokenizer (with a chat template) to ``path``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    specials = ["<|pad|>", "<|eos|>", "<|bos|>", "<|system|>", "<|user|>", "<|assistant|>",
                "<|end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(_CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>",
                                   eos_token="<|eos|>", bos_token="<|bos|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(fast), hidden_size=hidden, intermediate_size=hidden * 2,
                      num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
                      max_position_embeddings=2048, tie_word_embeddings=True,
                      pad_token_id=fast.pad_token_id, eos_token_id=fast.eos_token_id,
                      bos_token_id=fast.bos_token_id)
    LlamaForCausalLM(cfg).save_pretrained(out)
    return out
