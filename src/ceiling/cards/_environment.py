"""A card's environment as sandbox limits: mount points, home, image layers, resources.

:func:`card_limits` turns ``card.environment`` into the :class:`~ceiling.sandbox.Limits` an
episode's sandbox opens with: the workspace's mount point, the home folder (with a default
git identity), the image's layers (built here once if this image store lacks them; a build
needs root and the package registries), the environment and the grading interpreter, and
the card's resources, each checked against the operator's maximum:

========================  ===========================  =======
card field                operator maximum (env var)   default
========================  ===========================  =======
``limits.memory_mb``      ``CEILING_MAX_MEMORY_MB``    8192
``limits.cpu_s``          ``CEILING_MAX_CPU_S``        3600
``limits.disk_mb``        ``CEILING_MAX_DISK_MB``      4096
``limits.wall_s``         ``CEILING_MAX_WALL_S``       7200
========================  ===========================  =======

A card asking for more than the maximum is a :class:`~ceiling._errors.CardError` naming the
field and the variable: never silently lowered (a solution that needs 4 GB fails in
confusing ways under 1 GB). A card that sets nothing gets the caller's limits unchanged.
"""

from __future__ import annotations

import os

from .._errors import CardError
from .._tree import FileEntry, FileTree
from ..sandbox import Limits
from ._schema import Environment, TaskCard

MAXIMA = {"memory_mb": ("CEILING_MAX_MEMORY_MB", 8192), "cpu_s": ("CEILING_MAX_CPU_S", 3600),
          "disk_mb": ("CEILING_MAX_DISK_MB", 4096), "wall_s": ("CEILING_MAX_WALL_S", 7200)}
GITCONFIG = (b"[user]\n\tname = agent\n\temail = agent@sandbox.invalid\n"
             b"[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n")


def operator_max(name: str) -> float:
    """The operator's maximum for a card limit (``MAXIMA``), read from the environment."""
    var, default = MAXIMA[name]
    raw = os.environ.get(var)
    try:
        return float(raw) if raw else float(default)
    except ValueError:
        raise CardError(f"{var}={raw!r} is not a number", where=var,
                        fix=f"set {var} to a number (default {default})") from None


def image_steps(card: TaskCard) -> list[object]:
    """The card's image as sandbox build steps (``files: true`` -> the root/ files, plus a
    default ``.gitconfig`` in the home folder when ``git_identity`` and none is there)."""
    from ..sandbox import FilesStep, RunStep, RuntimeStep, python_version

    env = card.environment
    root: FileTree = dict(card.root_files)
    if env.git_identity and env.home != "/tmp":
        key = f"{env.home.strip('/')}/.gitconfig"
        root.setdefault(key, FileEntry(GITCONFIG))
    steps: list[object] = []
    placed = False
    for st in env.image:
        if st.files:
            steps.append(FilesStep(root))
            placed = True
        elif st.runtime:
            steps.append(RuntimeStep(python_version(env.python or "/usr/bin/python3")))
        else:
            steps.append(RunStep(st.run or "", cwd=st.cwd, env=tuple(sorted(st.env.items())),
                                 workspace=st.workspace, timeout_s=st.timeout_s))
    if root and not placed:
        steps.append(FilesStep(root))
    return steps


def card_limits(card: TaskCard, base: Limits | None = None) -> Limits:
    """``base`` (default :class:`Limits`) with ``card.environment`` applied (module doc).
    Raises CardError for a limit above the operator's maximum; image build errors
    (``ImageBuildError``, ``SandboxUnavailable``) pass through."""
    base = base or Limits()
    env = card.environment
    if env == Environment():
        return base
    update: dict[str, object] = {}
    for name in ("memory_mb", "cpu_s", "disk_mb", "wall_s"):
        value = getattr(env.limits, name)
        if value is None:
            continue
        top = operator_max(name)
        if value > top:
            var = MAXIMA[name][0]
            raise CardError(f"environment.limits.{name} {value:g} is above the operator's "
                            f"maximum {top:g}", where=f"{card.id}: environment.limits.{name}",
                            fix=f"raise {var} if this machine can give it, or lower the card's")
        if name != "wall_s":
            update[name] = int(value)
    update.update(workdir=env.workdir, home=env.home, env=dict(env.env), python=env.python)
    steps = image_steps(card)
    if steps:
        from ..sandbox import build_image

        # the workspace the steps start from is build/ (empty when absent); the card's own
        # workspace/ is what they produced, so ids match the import's
        img = build_image(steps, workdir=env.workdir,  # type: ignore[arg-type]
                          workspace=card.build_workspace)
        update["rootfs"] = img.layers
    return base.model_copy(update=update)


__all__ = ["GITCONFIG", "MAXIMA", "card_limits", "image_steps", "operator_max"]
