"""Post-training on a frozen base: GRPO on a LoRA adapter, stages, checkpoints, the demo.

``Trainer(load_config("train.yaml"), run_dir).run()`` runs a config; ``run_demo`` is
``ceiling demo``. The optimizer seam (:class:`Optimizer`, ``register_optimizer``) lets
GRPO and ES share the loop.
"""

from ._cards import stage_arms
from ._checkpoint import Unit, latest_checkpoint, verify_base
from ._config import StageConfig, TrainConfig, config_from_dict, load_config
from ._demo import DemoConfig, demo_suite, run_demo
from ._es import ESSettings
from ._grpo import GRPO, GRPOSettings
from ._loss import LossConfig, group_advantages, grpo_loss, sequence_logprobs
from ._model import base_path
from ._optim import Optimizer, StepContext, StepResult, register_optimizer
from ._rollouts import pick_backend
from ._sampler import EVAL_SEED_BASE, Arm, BandSampler
from ._stages import check_stage_order, stage_reliability
from ._trainer import StepInfo, Trainer, TrainSummary
from ._trl_bench import TrainBenchSettings, run_train_bench
from ._verdict_cache import CachedVerifier, VerdictCache, cached_env_factory

__all__ = [
    "EVAL_SEED_BASE",
    "GRPO",
    "Arm",
    "BandSampler",
    "CachedVerifier",
    "DemoConfig",
    "ESSettings",
    "GRPOSettings",
    "LossConfig",
    "Optimizer",
    "StageConfig",
    "StepContext",
    "StepInfo",
    "StepResult",
    "TrainBenchSettings",
    "TrainConfig",
    "TrainSummary",
    "Trainer",
    "Unit",
    "VerdictCache",
    "base_path",
    "cached_env_factory",
    "check_stage_order",
    "config_from_dict",
    "demo_suite",
    "group_advantages",
    "grpo_loss",
    "latest_checkpoint",
    "load_config",
    "pick_backend",
    "register_optimizer",
    "run_demo",
    "run_train_bench",
    "sequence_logprobs",
    "stage_arms",
    "stage_reliability",
    "verify_base"
]
