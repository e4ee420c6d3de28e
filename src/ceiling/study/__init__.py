"""Post-training scaling studies: ``ceiling study CONFIG`` (see docs/study.md).

``run_study(load_study("examples/study_tiny.yaml"), out)`` trains every optimizer named
(GRPO, ES) for every seed from one frozen base up a ladder of budgets in rollouts, evaluates
every rung on held-out cards (pass@1, pass@k, diversity, hierarchical bootstrap intervals),
fits a saturating curve per optimizer and writes ``study.json`` and ``report.html``.
Resumable: rerun the same command on the same folder.
"""

from ._config import PRESETS, StudyConfig, load_study, study_from_dict
from ._fit import SaturatingFit, fit_saturating, stop_budget
from ._run import Study, heldout_cards, run_study

__all__ = ["PRESETS", "SaturatingFit", "Study", "StudyConfig", "fit_saturating",
           "heldout_cards", "load_study", "run_study", "stop_budget", "study_from_dict"]
