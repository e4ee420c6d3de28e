"""The task card schema: everything an episode needs, validated by pydantic.

A card is the unit of environment scale. ``task.yaml`` holds every field below except the
file trees, which live beside it on disk (``workspace/``, ``tests/``, ``solution.sh``).
Unknown keys are errors (``extra="forbid"``) so a typo never silently drops a setting.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ._files import FileEntry, FileTree, check_relpath, tree_hash

TaskType = Literal["terminal_ops", "repo_refactor", "multi_tool", "security_audit"]
Horizon = Literal["short", "medium", "long"]
TASK_TYPES: tuple[str, ...] = ("terminal_ops", "repo_refactor", "multi_tool", "security_audit")
HORIZONS: tuple[str, ...] = ("short", "medium", "long")
ID_RE = re.compile(r"^[a-z0-9_]+/[a-z0-9][a-z0-9_.\-]*-v\d+(@[A-Za-z0-9_.:=\-]+)?$")


def horizon_for_steps(steps: int) -> Horizon:
    """DESIGN.md: short < 10 steps, medium 10-30, long > 30 (of the oracle's step count)."""
    return "short" if steps < 10 else "medium" if steps <= 30 else "long"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class Budget(_Model):
    max_steps: int = Field(default=30, ge=1, le=10_000)
    command_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    episode_timeout_s: float = Field(default=300.0, gt=0, le=86_400)
    max_output_bytes: int = Field(default=16_384, ge=64, le=64 * 1024 * 1024)


class LintPolicy(_Model):
    """Which workspace files ruff checks after the episode; the penalty lives in RewardSpec."""

    enabled: bool = False
    paths: list[str] = Field(default_factory=lambda: ["**/*.py"])
    select: list[str] = Field(default_factory=lambda: ["E", "F"])


class Acceptance(_Model):
    """How the final state is judged.

    ``tests`` are the pytest node ids (``test_task.py::test_rotated``) that the hidden tests
    must report; a missing id is a failure, never a pass. ``protected`` are glob patterns
    (relative to the workspace) whose content must not change.

    ``runner`` says where the hidden tests run (docs/verifier.md, "Trust boundary"):

    - ``subject`` (default): on the host, outside every sandbox; the tests never import
      workspace code, they reach it through the ``subject`` fixture (plain data across a
      process boundary) and read the final files under ``$WORKSPACE`` (a host copy).
    - ``files``: the same host grader, for tests that only read files.
    - ``inprocess`` (alias ``sandbox``): pytest runs inside the grading sandbox and imports
      workspace code (a repository's own tests); hardened, but reported as "in-process"
      because code in the same process can in principle forge its results.
    """

    tests: list[str] = Field(default_factory=list)
    protected: list[str] = Field(default_factory=list)
    lint: LintPolicy = Field(default_factory=LintPolicy)
    runner: Literal["subject", "files", "inprocess", "sandbox"] = "subject"
    test_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    # Grading-time services (issue 15): ``service`` is a shell command started in the
    # background in the grading sandbox before the tests (``service_ready``, a check polled
    # until it exits 0, at most ``service_wait_s``); ``keep_processes`` grades in the live
    # sandbox itself, so what the episode left running (a server it started) is still there,
    # as in a Harbor container. The trust that costs is in docs/import.md.
    service: str | None = None
    service_ready: str | None = None
    service_wait_s: float = Field(default=30.0, gt=0, le=600)
    keep_processes: bool = False
    # Host runners only: the hidden tests also see the card's initial workspace (its layers
    # merged; regular files and folders) as a copy under ``$INITIAL``, so a test can relate
    # the final state to the start ("b.txt holds what a.txt held") without pinning bytes.
    initial_state: bool = False
    # Host runners only: before the tests, the verifier runs the card's solution
    # (``solution.sh``) in a fresh sandbox opened from the card's initial layers (never from
    # the episode's state) and hands the tests its final workspace as a copy under
    # ``$REFERENCE``: "the end state the task's own steps produce from this start", for
    # tasks whose effect only running them tells (a sed script, an awk report, a tar file).
    reference: bool = False


class Milestone(_Model):
    """A process reward: ``check`` is a shell command run on the final state (exit 0 = hit)."""

    id: str
    check: str
    reward: float = Field(default=0.1, ge=-1, le=1)


class Fault(_Model):
    """A fault injected into the episode so recovery can be measured.

    - ``transient``: the first ``times`` commands matching ``target`` (a program name) fail
      with ``message``, then it works.
    - ``permission``: ``target`` (a workspace path) starts without permissions.
    - ``missing_tool``: ``target`` (a program name) is not on PATH; another way exists.
    """

    kind: Literal["transient", "permission", "missing_tool"]
    target: str
    times: int = Field(default=1, ge=1, le=100)
    message: str = ""


class ToolSpec(_Model):
    """A family tool beyond the core six, e.g. ``sql`` against a database in the workspace."""

    name: str
    description: str = ""
    args: dict[str, str] = Field(default_factory=dict)  # argument name -> description
    config: dict[str, Any] = Field(default_factory=dict)


class CardLimits(_Model):
    """Resources the card needs; each at most the operator's maximum (``CEILING_MAX_*``,
    checked when an episode opens: :func:`ceiling.cards.card_limits`). Unset: the default."""

    memory_mb: int | None = Field(default=None, ge=64)
    cpu_s: int | None = Field(default=None, ge=1)
    disk_mb: int | None = Field(default=None, ge=16)
    wall_s: float | None = Field(default=None, gt=0)


class ImageStep(_Model):
    """One step of the card's image (an image-style base layer, built once as root in a
    build sandbox and shared by content id; docs/import.md). Exactly one of ``run`` (a
    shell command), ``files: true`` (place the card's ``root/`` files, at their absolute
    paths, at this point) or ``runtime: true`` (the runtime's pytest, copied for
    ``environment.python``: the in-process grader's own, offline)."""

    run: str | None = None
    files: bool = False
    runtime: bool = False
    cwd: str = "/"
    env: dict[str, str] = Field(default_factory=dict)
    workspace: bool = False
    timeout_s: float = Field(default=1800.0, gt=0, le=86_400)

    @model_validator(mode="after")
    def _one(self) -> ImageStep:
        if (self.run is not None) + self.files + self.runtime != 1:
            raise ValueError("an image step has exactly one of 'run: COMMAND', 'files: true' "
                             "or 'runtime: true'")
        if not self.cwd.startswith("/") or ".." in self.cwd.split("/"):
            raise ValueError("cwd must be an absolute path without '..'")
        return self


class Environment(_Model):
    """Where things live in the card's sandbox (namespace backend; docs/task-cards.md).

    ``workdir``: the workspace's mount point (``/app``); ``home``: the home folder (a
    writable folder emptied at reset, seeded from the image; ``/tmp`` by default); ``env``:
    variables every command gets (``PATH`` included); ``python``: the interpreter that
    in-sandbox graders run (an image's python with its packages); ``image``: build steps;
    ``git_identity``: with a home folder, a ``.gitconfig`` naming a default author when the
    card's files hold none; ``limits``: see :class:`CardLimits`."""

    workdir: str = "/workspace"
    home: str = "/tmp"
    env: dict[str, str] = Field(default_factory=dict)
    python: str | None = None
    image: list[ImageStep] = Field(default_factory=list)
    git_identity: bool = True
    limits: CardLimits = Field(default_factory=CardLimits)

    @field_validator("workdir", "home")
    @classmethod
    def _point(cls, v: str, info: ValidationInfo) -> str:
        from ..sandbox import check_mount_point

        return check_mount_point(v, field=f"environment.{info.field_name}")


class TaskCard(_Model):
    """One task: the unit of environment scale (docs/task-cards.md).

    ``id`` is versioned (``family/name-v1``); ``type`` and ``horizon`` classify it. The
    agent sees ``instruction`` and the ``workspace`` files (over ``base_layers`` and the
    ``environment`` image); ``tests`` (hidden until the episode ends), ``acceptance``
    (protected paths, lint, runner), ``milestones`` and ``solution`` (the oracle) are for
    the verifier and validation only. ``budget`` caps steps, seconds and output; ``faults``
    are injected for recovery variants; ``feasible`` False means the right move is
    ``give_up`` (``infeasible_reason`` says why). Files are kept out of ``task.yaml`` and
    stored as folders beside it (:func:`~ceiling.cards.save_card`)."""

    id: str
    type: TaskType
    horizon: Horizon
    instruction: str = Field(min_length=1)
    budget: Budget = Field(default_factory=Budget)
    acceptance: Acceptance = Field(default_factory=Acceptance)
    milestones: list[Milestone] = Field(default_factory=list)
    faults: list[Fault] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
    feasible: bool = True
    infeasible_reason: str | None = None
    difficulty: int = Field(default=1, ge=0, le=10)
    tags: list[str] = Field(default_factory=list)
    split: Literal["train", "heldout"] = "train"
    template: str | None = None  # "terminal_ops/log-rotate-v1" for generated cards
    seed: int | None = None
    # Files: kept out of task.yaml, stored as folders beside it.
    workspace: FileTree = Field(default_factory=dict, exclude=True, repr=False)
    tests: FileTree = Field(default_factory=dict, exclude=True, repr=False)
    solution: str = Field(default="", exclude=True, repr=False)
    base_layers: list[FileTree] = Field(default_factory=list, exclude=True, repr=False)
    environment: Environment = Field(default_factory=Environment)
    # Files at absolute paths outside the workspace (folder root/, paths relative to "/"),
    # placed by the image step marked ``files: true``; the workspace the image steps start
    # from (folder build/, empty when absent; ``workspace/`` is what they produced).
    root_files: FileTree = Field(default_factory=dict, exclude=True, repr=False)
    build_workspace: FileTree = Field(default_factory=dict, exclude=True, repr=False)

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    @field_validator("id")
    @classmethod
    def _check_id(cls, v: str) -> str:
        if not ID_RE.match(v):
            raise ValueError("must look like 'family/name-v1' (lowercase, a version suffix "
                             "-vN, optional '@variant'), e.g. 'terminal_ops/log-rotate-v1'")
        return v

    @field_validator("acceptance")
    @classmethod
    def _check_protected(cls, v: Acceptance) -> Acceptance:
        for p in v.protected:
            check_relpath(p.replace("*", "x"), where="acceptance.protected")
        if v.initial_state and v.runner in ("inprocess", "sandbox"):
            raise ValueError("initial_state ($INITIAL) is given to the host runners only: "
                             "use runner 'files' or 'subject', or drop initial_state")
        if v.reference and v.runner in ("inprocess", "sandbox"):
            raise ValueError("reference ($REFERENCE) is given to the host runners only: "
                             "use runner 'files' or 'subject', or drop reference")
        return v

    @model_validator(mode="after")
    def _check_feasible(self) -> TaskCard:
        if not self.feasible and not self.infeasible_reason:
            raise ValueError("an infeasible card (feasible: false) needs infeasible_reason")
        for p in list(self.workspace) + list(self.tests) + list(self.root_files):
            check_relpath(p)
        if self.root_files and not any(st.files for st in self.environment.image):
            raise ValueError("the card has root/ files but no image step 'files: true' "
                             "places them")
        wall = self.environment.limits.wall_s
        if wall is not None and self.budget.episode_timeout_s > wall:
            raise ValueError(f"budget.episode_timeout_s {self.budget.episode_timeout_s:g} is "
                             f"above environment.limits.wall_s {wall:g}")
        return self

    @property
    def layers(self) -> list[FileTree]:
        """The initial workspace as a layer stack, lowest first (shared bases, then task)."""
        return [*self.base_layers, self.workspace]

    def fields_dump(self) -> dict[str, Any]:
        """The task.yaml fields as JSON data; a default ``environment`` and the grading-service
        fields at their defaults are left out, so cards without them keep their content ids
        and files."""
        data = self.model_dump(mode="json")
        if self.environment == Environment():
            data.pop("environment", None)
        acc, default = data["acceptance"], Acceptance().model_dump(mode="json")
        for key in ("service", "service_ready", "service_wait_s", "keep_processes",
                    "initial_state", "reference"):
            if acc.get(key) == default[key]:
                acc.pop(key, None)
        return data

    def content_id(self) -> str:
        """A stable hash of everything that defines the task (yaml fields and all files)."""
        import hashlib
        import json

        h = hashlib.sha256()
        h.update(json.dumps(self.fields_dump(), sort_keys=True).encode())
        for t in [*self.base_layers, self.workspace, self.tests]:
            h.update(tree_hash(t).encode())
        for t in (self.root_files, self.build_workspace):  # only when present: old ids stay
            if t:
                h.update(tree_hash(t).encode())
        h.update(self.solution.encode())
        return h.hexdigest()[:16]

    def with_files(self, *, workspace: dict[str, str | bytes | FileEntry] | None = None,
                   tests: dict[str, str | bytes | FileEntry] | None = None) -> TaskCard:
        """Convenience for generators: accept str/bytes values and wrap them as entries."""
        def conv(d: dict[str, str | bytes | FileEntry]) -> FileTree:
            out: FileTree = {}
            for k, v in d.items():
                out[k] = v if isinstance(v, FileEntry) else FileEntry(
                    v.encode() if isinstance(v, str) else v)
            return out
        if workspace is not None:
            self.workspace = conv(workspace)
        if tests is not None:
            self.tests = conv(tests)
        return self
