"""``TaskEnv``: one task card as a Gymnasium environment.

``reset(seed=, options=)`` opens (or resets) a sandbox over the card's layers, injects the
card's faults and returns the instruction. ``step(action)`` runs one tool call (an
:class:`~ceiling.tools.Action`, a ``{"tool", "args"}`` dict or its JSON text) and returns
``(obs, reward, terminated, truncated, info)``:

- ``terminated`` after ``submit`` or ``give_up``; ``truncated`` when the budget runs out
  (``max_steps`` steps, ``episode_timeout_s`` seconds). Either way the verifier grades the
  final state and ``reward`` is its reward; every earlier step has reward 0.
- An invalid action (not a tool call, an unknown tool, missing or mistyped arguments, a
  path outside the workspace, a binary file read as text, a command past
  ``command_timeout_s``) is a *failed step*: the observation says what went wrong,
  ``info["error"]`` repeats it, and the episode goes on until its budget ends. ``step``
  never raises for what the policy sent.
- ``info`` always has ``step`` (1-based count), ``tool`` and ``error`` (None on success);
  the final step adds ``verdict`` (a :class:`~ceiling.verify.Verdict`) and ``outcome``.

Observations follow the line protocol's body format (``ceiling.harness``): stdout lines,
stderr lines, ``[output truncated]``, ``[timed out]``, ``[exit N]`` when N != 0, and
``[ok]`` for empty successful output; each is capped at ``budget.max_output_bytes``.
The ending step's observation is empty.

Limits: ``read``/``write``/``edit`` go through the sandbox's file API (never its shell), and
honour the owner permission bits of the target, so a ``permission`` fault binds for them
even where the backend runs commands as root.
"""

from __future__ import annotations

import os
import stat
import time
from typing import Any, cast

import gymnasium as gym
from gymnasium import spaces

from ._faults import inject
from .cards import TaskCard, card_limits
from .sandbox import Limits, open_sandbox
from .tools import ENDING_TOOLS, Action, card_tools, check_args, run_card_tool
from .verify import Ended, RewardSpec, Verdict, Verifier

MAX_TEXT = 1 << 24


class AnyText(spaces.Text):
    """A Text space that admits every string up to ``max_length`` characters (Gymnasium's
    Text restricts characters to a charset; observations and actions are free text)."""

    def __init__(self, max_length: int = MAX_TEXT) -> None:
        super().__init__(max_length, min_length=0)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length


def _cap(text: str, limit: int) -> tuple[str, bool]:
    data = text.encode()
    if len(data) <= limit:
        return text, False
    return data[:limit].decode(errors="ignore"), True


def format_exec(res: Any, limit: int) -> str:
    """The observation body of a command result (same format as the line protocol)."""
    lines: list[str] = []
    for stream in (res.stdout, res.stderr):
        if stream:
            lines.extend(stream.rstrip("\n").split("\n"))
    body, cut = _cap("\n".join(lines), limit)
    lines = [body] if body else []
    if cut or res.truncated:
        lines.append("[output truncated]")
    if res.timed_out:
        lines.append("[timed out]")
    if res.exit_code != 0:
        lines.append(f"[exit {res.exit_code}]")
    return "\n".join(lines) if lines else "[ok]"


class TaskEnv(gym.Env[str, Any]):
    """A task card as an environment. See the module docstring for the contract.

    ``backend`` picks the sandbox backend (``namespace`` by default, ``local`` has no
    isolation); ``limits`` overrides the sandbox limits (the card's budget still sets the
    per-command timeout); ``verifier`` replaces the default :class:`~ceiling.verify.Verifier`.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"]}  # noqa: RUF012 - gymnasium API

    def __init__(self, card: TaskCard, backend: str = "namespace",
                 reward_spec: RewardSpec | None = None, limits: Limits | None = None,
                 verifier: Verifier | None = None, render_mode: str | None = None) -> None:
        self.card = card
        self.backend = backend
        self.reward_spec = reward_spec or RewardSpec()
        self.verifier = verifier or Verifier(self.reward_spec)
        b = card.budget
        base = card_limits(card, limits or Limits())  # the card's layout and resources
        self.limits = base.model_copy(update={
            "command_timeout_s": b.command_timeout_s,
            "max_output_bytes": max(b.max_output_bytes + 1, 64)})
        self.observation_space = AnyText()
        self.action_space = AnyText()
        self.render_mode = render_mode
        self.tools = card_tools(card)
        self._specs = {t.name: t for t in card.tools}
        self._sb: Any = None
        self._env: dict[str, str] = {}
        self._steps = 0
        self._t0 = 0.0
        self._done = True
        self._last_obs = ""
        self.history: list[tuple[Action, str]] = []
        self.verdict: Verdict | None = None

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode on a fresh copy of the card's workspace (faults injected).
        Sandbox failures raise (infrastructure, not a step)."""
        super().reset(seed=seed)
        if self._sb is None:
            self._sb = open_sandbox(self.card.layers, backend=self.backend, limits=self.limits)
        else:
            self._sb.reset()
        self._env = inject(self._sb, self.card.faults)
        self._steps, self._t0, self._done = 0, time.monotonic(), False
        self.history, self.verdict = [], None
        self._last_obs = self.card.instruction
        return self.card.instruction, {"card_id": self.card.id, "step": 0,
                                       "tools": card_tools(self.card),
                                       "budget": self.card.budget.model_dump()}

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done:
            return ("[error] the episode is over; call reset()", 0.0, True, False,
                    {"step": self._steps, "tool": None, "error": "the episode is over"})
        self._steps += 1
        act, obs, err = self._dispatch(action)
        self.history.append((act, obs))
        info: dict[str, Any] = {"step": self._steps, "tool": act.tool, "error": err}
        terminated = err is None and act.tool in ENDING_TOOLS
        truncated = not terminated and (
            self._steps >= self.card.budget.max_steps or self.elapsed()
            >= self.card.budget.episode_timeout_s)
        reward = 0.0
        if terminated or truncated:
            self._done = True
            ended = cast(Ended, act.tool if terminated else "truncated")
            self.verdict = self.verifier.verify(self.card, self._sb, ended=ended,
                                                history=self.history)
            reward = float(self.verdict.reward)
            info["verdict"] = self.verdict
            info["outcome"] = self.verdict.outcome.value
        self._last_obs = obs
        return obs, reward, terminated, truncated, info

    def render(self) -> str | None:
        return self._last_obs if self.render_mode == "ansi" else None

    def close(self) -> None:
        if self._sb is not None:
            try:
                self._sb.close()
            finally:
                self._sb = None
        self._done = True

    # ------------------------------------------------------------------ helpers
    @property
    def sandbox(self) -> Any:
        """The episode's sandbox (None before the first reset)."""
        return self._sb

    @property
    def steps(self) -> int:
        return self._steps

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def _timeout(self) -> float:
        left = self.card.budget.episode_timeout_s - self.elapsed()
        return max(0.1, min(self.card.budget.command_timeout_s, left))

    def _dispatch(self, raw: Any) -> tuple[Action, str, str | None]:
        try:
            act = Action.parse_obj(raw)
        except ValueError as e:
            msg = str(e)
            return Action("invalid", {"raw": str(raw)[:200]}), f"[error] {msg}", msg
        bad = check_args(act.tool, act.args, self.tools)
        if bad is not None:
            return act, f"[error] {bad}", bad
        try:
            obs, err = self._run_tool(act)
        except Exception as e:  # noqa: BLE001 - sandbox trouble is reported, the episode goes on
            msg = f"{type(e).__name__}: {e}"
            return act, f"[error] {msg}", msg
        return act, obs, err

    def _run_tool(self, act: Action) -> tuple[str, str | None]:
        limit = self.card.budget.max_output_bytes
        a = act.args
        if act.tool in ENDING_TOOLS:
            return "", None
        if act.tool == "run":
            res = self._sb.exec(a["cmd"], timeout=self._timeout(), env=self._env or None)
            err = f"the command did not finish within {self._timeout():g}s" \
                if res.timed_out else None
            return format_exec(res, limit), err
        if act.tool in self._specs:
            res = run_card_tool(self._sb, self._specs[act.tool], a, self._timeout())
            return format_exec(res, limit), ("the tool timed out" if res.timed_out else None)
        path = a["path"]
        if act.tool == "read":
            return self._read(path, limit)
        if act.tool == "write":
            return self._write(path, a["content"].encode())
        if act.tool == "edit":
            return self._edit(path, a["old"], a["new"])
        return f"[error] tool {act.tool!r} is not available", f"no runner for {act.tool!r}"

    def _denied(self, path: str, want: int) -> bool:
        """True when the owner permission bits of ``path`` (or a parent) forbid access."""
        root = self._sb.host_path()
        rel = path[len("/workspace"):].lstrip("/") if path.startswith("/workspace") else path
        if rel.startswith("/"):
            return False
        full = root / rel
        try:
            for parent in [*reversed(full.relative_to(root).parents), full.relative_to(root)]:
                p = root / parent
                if p == root:
                    continue
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    return False
                need = stat.S_IXUSR if p != full else want
                if stat.S_ISDIR(st.st_mode) and p == full:
                    need = stat.S_IXUSR
                if not st.st_mode & need:
                    return True
        except (OSError, ValueError):
            return False
        return False

    def _read(self, path: str, limit: int) -> tuple[str, str | None]:
        if self._denied(path, stat.S_IRUSR):
            return f"[error] {path}: Permission denied", "permission denied"
        try:
            data = self._sb.read(path)
        except FileNotFoundError:
            return f"[error] {path}: no such file", "no such file"
        except IsADirectoryError:
            return f"[error] {path}: is a directory (use run: ls)", "is a directory"
        except PermissionError as e:
            return f"[error] {path}: {e.strerror or e}", "permission denied"
        if b"\0" in data[:8192]:
            return (f"[error] {path} is a binary file ({len(data)} bytes); inspect it with "
                    "run (od, xxd, base64)"), "binary file"
        try:
            text = data.decode()
        except UnicodeDecodeError:
            return (f"[error] {path} is not UTF-8 text ({len(data)} bytes); inspect it with "
                    "run (od, iconv)"), "binary file"
        body, cut = _cap(text, limit)
        body = body.rstrip("\n")
        if cut:
            body += "\n[output truncated]"
        return body if body.strip() else "[empty file]", None

    def _write(self, path: str, data: bytes) -> tuple[str, str | None]:
        if self._denied(path, stat.S_IWUSR):
            return f"[error] {path}: Permission denied", "permission denied"
        try:
            self._sb.write(path, data)
        except IsADirectoryError:
            return f"[error] {path}: is a directory", "is a directory"
        except (PermissionError, FileNotFoundError, NotADirectoryError) as e:
            return f"[error] {path}: {e.strerror or e}", "cannot write"
        return f"wrote {len(data)} bytes to {path}", None

    def _edit(self, path: str, old: str, new: str) -> tuple[str, str | None]:
        obs, err = self._read(path, 1 << 30)
        if err is not None:
            return obs, err
        text = self._sb.read(path).decode()
        if not old:
            return "[error] edit: 'old' must not be empty", "empty old text"
        n = text.count(old)
        if n != 1:
            msg = ("the old text does not occur" if n == 0 else
                   f"the old text occurs {n} times; include more context")
            return f"[error] edit {path}: {msg}", msg
        return self._write(path, text.replace(old, new, 1).encode())


__all__ = ["AnyText", "TaskEnv", "card_tools", "format_exec"]
