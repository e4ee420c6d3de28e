"""The base builder's public names: pre-training ``builtin:tiny`` and the corpus it learns.

Kept out of the package door (``ceiling.basemodel``) on purpose: ``ceiling.policies``
imports the door to resolve ``builtin:NAME``, and the corpus generator imports the task
families and the harness, which sit above policies (docs/architecture.md). Import this
module where a base is built or its corpus is needed (the CLI's ``ceiling base build``,
the TRL bench, tests).

- :class:`BuildConfig`, :func:`build_tiny` (returns a :class:`BuildReport`): see
  :mod:`ceiling.basemodel._pretrain`;
- :mod:`corpus`: synthetic episodes (``generate``, ``generate_multistep``, ``render``) and
  :func:`prompt_of` (the first-turn prompt of an instruction, as the line harness renders it);
- :func:`train_tokenizer`: the byte-level BPE the tiny bases use.
"""

from . import _corpus as corpus
from ._corpus import prompt_of
from ._pretrain import BuildConfig, BuildReport, build_tiny, encode_episodes
from ._tokenizer import train_tokenizer

__all__ = ["BuildConfig", "BuildReport", "build_tiny", "corpus", "encode_episodes", "prompt_of",
           "train_tokenizer"]
