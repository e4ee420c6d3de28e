"""The byte-level BPE tokenizer of ``builtin:tiny``.

Whitespace is split off as its own pre-token before the byte-level step, so no merge ever
crosses a space or a newline. That keeps prompt/completion boundaries stable: the tokens
of a prompt ending in ``"> "`` are always a prefix of the tokens of the full episode, which
is what the model saw in pre-training. Any byte string still encodes (byte-level alphabet).
"""

from __future__ import annotations

from collections.abc import Iterable

EOS = "<|eos|>"
PAD = "<|pad|>"


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1024) -> object:
    """Train and wrap a tokenizer (a ``PreTrainedTokenizerFast`` with eos and pad)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\s"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD,
                                   clean_up_tokenization_spaces=False)
    fast.padding_side = "left"
    fast.model_max_length = 2048
    return fast
