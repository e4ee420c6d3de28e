"""The typer apps every command module registers on. One module per area owns its commands:

- ``sandbox_cmds``: ``bench sandbox``
- ``envs_cmds``: ``envs list|show``   ``mix_cmds``: ``envs sample``
- ``verify_cmds``: ``envs validate``, ``redteam``, ``bench env``
- ``rollout_cmds``: ``serve``, ``bench rollout``
- ``eval_cmds``: ``eval``, ``compare``, ``gate``, ``report``, ``view``
- ``train_cmds``: ``train``, ``demo``, ``base build``, ``verify-base``, ``bench train``
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="ceiling", no_args_is_help=True, add_completion=False,
    help="Post-training scaling: RL from verifiable rewards on a frozen base, measured.\n\n"
         "Example: ceiling demo",
)
envs_app = typer.Typer(no_args_is_help=True, help="Environment families and task cards.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print JSON.")
base_app = typer.Typer(no_args_is_help=True, help="The built-in base models.")
app.add_typer(envs_app, name="envs")
app.add_typer(bench_app, name="bench")
app.add_typer(base_app, name="base")
