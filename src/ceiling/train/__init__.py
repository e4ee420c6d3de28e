"""Post-training on a frozen base: GRPO on a LoRA adapter, stages, checkpoints, the demo.

``Trainer(load_config("train.yaml"), run_dir).run()`` runs a config; ``run_demo`` is
``ceiling demo``. The optimizer seam (:class:`Optimizer`, ``register_optimizer``) lets
GRPO and ES share the loop.
"""

from ._checkpoint import Unit, latest_checkpoint, verify_base
from ._config import StageConfig, TrainConfig, config_from_dict, load_config
from ._demo import DemoConfig, run_demo
from ._grpo import GRPO, GRPOSettings
from ._loss import LossConfig, group_advantages, grpo_loss, sequence_logprobs
from ._optim import Optimizer, StepContext, StepResult, register_optimizer
from ._sampler import EVAL_SEED_BASE, Arm, BandSampler
from ._trainer import StepInfo, Trainer, TrainSummary
from ._verdict_cache import CachedVerifier, VerdictCache

__all__ = [
    "EVAL_SEED_BASE", "GRPO", "Arm", "BandSampler", "CachedVerifier", "DemoConfig",
    "GRPOSettings", "LossConfig", "Optimizer", "StageConfig", "StepContext", "StepInfo",
    "StepResult", "TrainConfig", "TrainSummary", "Trainer", "Unit", "VerdictCache",
    "config_from_dict", "group_advantages", "grpo_loss", "latest_checkpoint", "load_config",
    "register_optimizer", "run_demo", "sequence_logprobs", "verify_base",
]
