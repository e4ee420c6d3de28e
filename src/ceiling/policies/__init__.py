"""Policies: scripted, hf (transformers + PEFT), openai (any compatible endpoint).

``load_policy(spec)`` is the door: ``scripted:oracle``, ``hf:PATH[+ADAPTER]``,
``openai:MODEL@URL``, ``builtin:tiny``. Every policy takes a batch of
:class:`PolicyRequest` and returns one :class:`Generation` per request.
"""

from ._hf import HFPolicy, adapters_off, merged_lora
from ._load import KINDS, load_policy, policy_tokenizer, resolve_builtin
from ._mask4d import full_mask_for
from ._serve import default_model_name, serve
from ._types import Generation, Policy, PolicyRequest, SamplingParams, sampling_params

__all__ = [
           "KINDS",
           "Generation",
           "HFPolicy",
           "Policy",
           "PolicyRequest",
           "SamplingParams",
           "adapters_off",
           "default_model_name",
           "full_mask_for",
           "load_policy",
           "merged_lora",
           "policy_tokenizer",
           "resolve_builtin",
           "sampling_params",
           "serve",
]
