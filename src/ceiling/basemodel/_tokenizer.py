"""The byte-level BPE tokenizer of ``builtin:tiny``.

A standard byte-level BPE (a space glues to the word after it, so a name is the same
token in the task and in the command — what copying needs) with the line-protocol markers
``"> "`` and ``"| "`` split off first as tokens of their own. That keeps the
prompt/completion boundary stable: a prompt ends with ``"> "``, and the tokens of a prompt
are a prefix of the tokens of the full episode (tested). Any byte string still encodes.

(An earlier version isolated every whitespace character; then every word was preceded by
the same space token, which starved the induction-style copying of names.)
"""

from __future__ import annotations

from collections.abc import Iterable

MARKERS = ("> ", "| ")  # line-protocol markers, split off before BPE
EOS = "<|eos|>"
PAD = "<|pad|>"


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1024) -> object:
    """Train and wrap a tokenizer (a ``PreTrainedTokenizerFast`` with eos and pad)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(m, normalized=False, lstrip=False, rstrip=False)
                    for m in MARKERS])  # after training: training drops added tokens
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD,
                                   clean_up_tokenization_spaces=False)
    fast.padding_side = "left"
    fast.model_max_length = 2048
    return fast
