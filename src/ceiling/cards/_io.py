"""Reading and writing card folders.

Folder format (see ``docs/task-cards.md``)::

    my-task/
      task.yaml      # every TaskCard field except the files
      workspace/     # initial state (the top layer)
      layers/NAME/   # optional shared lower layers, listed in task.yaml as base_layers
      tests/         # hidden tests: enter the sandbox only when the episode is over
      solution.sh    # oracle solution, never shown to the agent
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .._errors import CardError
from .._yaml import first_error, load_yaml
from ._files import check_relpath, read_tree, write_tree
from ._schema import TaskCard


def _field_fix(e: ValidationError) -> tuple[str, str, str]:
    """(location, pydantic's message, fix) of the first error."""
    kind, loc, hint, err = first_error(e, TaskCard)
    if kind == "missing":
        return loc, str(err.get("msg")), f"add the required field '{loc}'"
    if kind == "extra_forbidden":
        name = str(err["loc"][-1])
        return loc, str(err.get("msg")), f"remove unknown field '{name}'" + (
            f" (did you mean '{hint}'?)" if hint else "")
    return loc, str(err.get("msg")), str(err.get("msg", "invalid value"))


def card_from_dict(data: Any, *, where: str = "<card>") -> TaskCard:
    """Validate a mapping into a TaskCard, turning the first pydantic error into a CardError."""
    if not isinstance(data, dict):
        raise CardError("task.yaml must be a mapping of fields", where=where,
                        fix="start the file with 'id: family/name-v1'")
    try:
        return TaskCard.model_validate(data)
    except ValidationError as e:
        field, msg, fix = _field_fix(e)
        raise CardError(f"field '{field}' is invalid: {msg}", where=where, fix=fix) from None


def load_card(path: str | os.PathLike[str]) -> TaskCard:
    """Load a card folder (or its ``task.yaml``). Errors name the file, the field and the fix."""
    folder = Path(path)
    if folder.name == "task.yaml":
        folder = folder.parent
    spec = folder / "task.yaml"
    if not spec.is_file():
        raise CardError("no task.yaml here", where=str(folder),
                        fix="point at a card folder that holds task.yaml")
    raw = load_yaml(spec, error=CardError)
    base_names = raw.pop("base_layers", []) if isinstance(raw, dict) else []
    card = card_from_dict(raw, where=str(spec))
    ws = folder / "workspace"
    if not ws.is_dir():
        raise CardError("the card has no workspace/ folder", where=str(folder),
                        fix="create workspace/ with the task's initial files (it may be empty)")
    card.workspace = read_tree(ws)
    for name in base_names or []:
        rel = check_relpath(str(name), where=f"{spec}: base_layers")
        card.base_layers.append(read_tree(folder / rel))
    if (folder / "tests").is_dir():
        card.tests = read_tree(folder / "tests")
    if card.acceptance.tests and not card.tests:
        raise CardError("acceptance.tests names tests but tests/ is missing or empty",
                        where=str(spec), fix="add the hidden test files under tests/")
    sol = folder / "solution.sh"
    card.solution = sol.read_text() if sol.is_file() else ""
    for attr, name in (("root_files", "root"), ("build_workspace", "build")):
        if (folder / name).is_dir():
            setattr(card, attr, read_tree(folder / name, allow_outside_links=name == "root"))
    if card.root_files and not any(st.files for st in card.environment.image):
        raise CardError("root/ holds files but no image step places them", where=str(spec),
                        fix="add '- files: true' to environment.image")
    return card


def save_card(card: TaskCard, path: str | os.PathLike[str]) -> Path:
    """Write a card folder atomically (a temp folder renamed into place) and return it."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        data = card.fields_dump()
        if card.base_layers:
            data["base_layers"] = [f"layers/{i:02d}" for i in range(len(card.base_layers))]
            for i, layer in enumerate(card.base_layers):
                write_tree(layer, tmp / "layers" / f"{i:02d}")
        (tmp / "task.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        write_tree(card.workspace, tmp / "workspace")
        if card.tests:
            write_tree(card.tests, tmp / "tests")
        for tree, name in ((card.root_files, "root"), (card.build_workspace, "build")):
            if tree:
                write_tree(tree, tmp / name)
        if card.solution:
            (tmp / "solution.sh").write_text(card.solution)
            os.chmod(tmp / "solution.sh", 0o755)
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old")
            dest.rename(old)
            tmp.rename(dest)
            shutil.rmtree(old)
        else:
            tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest
