"""Checks that drive whole episodes: validation, red-teaming and the env bench.

This package sits above :mod:`ceiling.env` (it plays scripted plans through real
:class:`~ceiling.env.TaskEnv` episodes) and below the trainer and the CLI.

- :func:`run_plan` plays one :class:`~ceiling.tools.Plan` on one card.
- :func:`validate`: the oracle solves every card (repeats; a card whose oracle result changes
  is flaky and quarantined), the null plan solves none, exploits earn at most 0.
- :func:`redteam`: every exploit on every card it applies to, tallied by plan and class.
- :func:`bench_env`: oracle episodes per second and what grading costs against a bare pytest.
- :func:`cards_for` / :func:`card_folders`: the cards a CLI target names.
- :func:`parse_rates`: the share of a model's turns that parse, per harness format.
"""

from ._bench import bare_pytest, bench_env
from ._parse_rate import parse_rates
from ._validate import (
    Run,
    card_folders,
    cards_for,
    inprocess_cards,
    redteam,
    redteam_jobs,
    run_plan,
    validate,
)

__all__ = ["Run", "bare_pytest", "bench_env", "card_folders", "cards_for", "inprocess_cards",
           "parse_rates", "redteam", "redteam_jobs", "run_plan", "validate"]
