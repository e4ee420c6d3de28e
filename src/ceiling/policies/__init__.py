"""Policies: scripted, hf (transformers + PEFT), openai (any compatible endpoint)."""

from ._types import Generation, Policy, PolicyRequest, SamplingParams

__all__ = ["Generation", "Policy", "PolicyRequest", "SamplingParams"]
