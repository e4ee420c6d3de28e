"""Template ``terminal_ops/config-edit``: targeted edits to configuration files.

Each change is one of: set a key in a section (the same key name may also exist in another
section, which must keep its value), add a key to a section, or delete a key. Comments and
every other key must survive. The hidden tests parse the files and check one change each,
plus that nothing else moved. The oracle makes one ``sed -i`` edit per change; difficulty
(2-4 changes in one file; 10-20 over 3-5 files; 32-40 over 8-10 files) sets the horizon.

Variants: ``train`` files are INI (``etc/SVC.conf``, ``[section]`` / ``key = value``);
``heldout`` files are dotenv-style (``env/SVC.env``, ``export KEY=value``) — a format train
never shows; ``fault`` makes the first ``sed`` fail; ``infeasible`` asks for a change in a
config file that does not exist.
"""

from __future__ import annotations

import random
from typing import ClassVar

from ...cards import TaskCard
from .._common import TestModule, finish_card, pick, retry, transient, unique_names, word_pool
from .._registry import Template, Variant, register

_CHANGES = {1: (1, 1, 2, 4), 2: (3, 5, 10, 20), 3: (8, 10, 32, 40)}  # files lo/hi, changes lo/hi
_SECTIONS = ("server", "client", "database", "cache", "log", "auth", "queue", "metrics")
_KEYS = ("port", "host", "timeout", "retries", "level", "workers", "user", "path", "size",
         "mode", "ttl", "limit")

_INI_HELPERS = '''
import configparser


def load(path):
    p = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    p.read_string(read_regular(path))
    return {s: dict(p[s]) for s in p.sections()}


def comments(path):
    return [ln for ln in read_regular(path).splitlines() if ln.lstrip().startswith("#")]
'''
_ENV_HELPERS = '''

def load(path):
    out = {}
    for ln in read_regular(path).splitlines():
        ln = ln.strip()
        if ln and not ln.startswith("#"):
            k, _, v = ln.removeprefix("export ").partition("=")
            out[k.strip()] = v.strip().strip('"')
    return {"": out}


def comments(path):
    return [ln for ln in read_regular(path).splitlines() if ln.lstrip().startswith("#")]
'''


_CHECK_HELPER = '''def intact(path):
    """Parse a config; its comments and every key no change touches must be as they were."""
    conf = load(path)
    assert comments(path) == COMMENTS[path]
    for sec, kv in UNTOUCHED[path].items():
        for key, value in kv.items():
            assert conf.get(sec, {}).get(key) == value, (sec, key)
    return conf
'''


def _value(rng: random.Random, key: str) -> str:
    if key in ("port",):
        return str(rng.randint(1025, 65000))
    if key in ("timeout", "retries", "workers", "size", "ttl", "limit"):
        return str(rng.randint(1, 999))
    if key == "level":
        return rng.choice(("debug", "info", "warning", "error"))
    return rng.choice(("alpha", "beta", "gamma", "delta", "omega", "north", "south")) + str(
        rng.randint(1, 99))


@register
class ConfigEdit(Template):
    family = "terminal_ops"
    name = "config-edit"
    summary = "set, add and delete keys in config files without disturbing anything else"
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("files", "config")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        env = variant == "heldout"
        flo, fhi, clo, chi = _CHANGES[difficulty]
        svcs = unique_names(rng, word_pool(variant), rng.randint(flo, fhi))
        n_changes = rng.randint(clo, chi)
        # the configs: file -> section -> key -> value ("" section for dotenv)
        conf: dict[str, dict[str, dict[str, str]]] = {}
        for svc in svcs:
            path = f"env/{svc}.env" if env else f"etc/{svc}.conf"
            secs = [""] if env else pick(rng, _SECTIONS, rng.randint(2, 4))
            conf[path] = {}
            for s in secs:
                keys = pick(rng, _KEYS, rng.randint(4, 8) if env else rng.randint(3, 6))
                conf[path][s] = {k.upper() if env else k: _value(rng, k) for k in keys}
        # plan the changes, one (file, section, key) at most once
        changes: list[tuple[str, str, str, str, str | None]] = []  # (op, file, sec, key, value)
        used: set[tuple[str, str, str]] = set()
        files = list(conf)
        while len(changes) < n_changes:
            f = files[len(changes) % len(files)] if len(changes) < len(files) else rng.choice(files)
            s = rng.choice(list(conf[f]))
            op = rng.choice(("set", "set", "add", "delete"))
            present = list(conf[f][s])
            absent = [k.upper() if env else k for k in _KEYS if (k.upper() if env else k) not in present]
            if op == "add" and not absent:
                continue
            key = rng.choice(absent if op == "add" else present)
            if (f, s, key) in used or (op == "delete" and len(present) < 2):
                continue
            used.add((f, s, key))
            val = None
            if op != "delete":
                val = _value(rng, key.lower())
                while val == conf[f][s].get(key):
                    val = _value(rng, key.lower())
            changes.append((op, f, s, key, val))
        workspace = {f: self._render(rng, f, secs, env) for f, secs in conf.items()}
        # each test checks one change plus every key no change touches (partial credit)
        touched = {(f, sec, k) for _, f, sec, k, _ in changes}
        untouched = {f: {sec: {k: v for k, v in kv.items() if (f, sec, k) not in touched}
                         for sec, kv in secs.items()} for f, secs in conf.items()}
        comments = {f: [ln for ln in text.splitlines() if ln.startswith("#")]
                    for f, text in workspace.items()}
        tm = TestModule(helpers=(_ENV_HELPERS if env else _INI_HELPERS)
                        + f"\n\nUNTOUCHED = {untouched!r}\nCOMMENTS = {comments!r}\n\n\n"
                        + _CHECK_HELPER)
        lines: list[str] = []
        asks: list[str] = []
        sed = (lambda x: retry(x)) if variant == "fault" else (lambda x: x)
        for i, (op, f, s, key, val) in enumerate(changes):
            where = f"in {f}" if env else f"in section [{s}] of {f}"
            if op == "set":
                asks.append(f"set {key} to {val} {where}")
            elif op == "add":
                asks.append(f"add {key}={val} {where}" if env else f"add {key} = {val} {where}")
            else:
                asks.append(f"delete {key} {where}")
            lines.append(sed(self._sed(op, f, s, key, val, env)))
            want = "assert key not in conf.get(sec, {})" if op == "delete" else \
                f"assert conf.get(sec, {{}}).get(key) == {val!r}"
            tm.add(f"change_{i}", f"conf = intact({f!r})\nsec, key = {s!r}, {key!r}\n{want}")
        instr = ("Edit the configuration files: " + "; ".join(asks) + ". Keep every other "
                 "line, key and comment as it is" + (" (lines look like export KEY=value)." if env
                                                     else " (lines look like key = value)."))
        reason = None
        if variant == "infeasible":
            missing = f"etc/{rng.choice([w for w in word_pool(variant) if w not in svcs])}.conf"
            instr = instr[:-1] + f"; and set port to 8080 in section [server] of {missing}."
            reason = f"{missing} does not exist, so the change asked for it cannot be made"
        return finish_card(type(self), variant=variant, instruction=instr, workspace=workspace,
                           tests=tm, solution=lines,
                           faults=[transient("sed")] if variant == "fault" else [],
                           infeasible_reason=reason)

    @staticmethod
    def _render(rng: random.Random, path: str, secs: dict[str, dict[str, str]], env: bool) -> str:
        out = [f"# {path}: managed by hand, keep comments"]
        for s, kv in secs.items():
            if not env:
                out += ["", f"[{s}]"]
            for k, v in kv.items():
                if rng.random() < 0.2:
                    out.append(f"# {k.lower()} is read at start-up")
                out.append(f"export {k}={v}" if env else f"{k} = {v}")
        return "\n".join(out) + "\n"

    @staticmethod
    def _sed(op: str, f: str, s: str, key: str, val: str | None, env: bool) -> str:
        if env:
            if op == "set":
                return f"sed -i 's/^export {key}=.*/export {key}={val}/' {f}"
            if op == "add":
                return f"sed -i '$a export {key}={val}' {f}"
            return f"sed -i '/^export {key}=/d' {f}"
        rng_ = rf"/^\[{s}\]/,/^\[/"
        if op == "set":
            return f"sed -i '{rng_} s/^{key} = .*/{key} = {val}/' {f}"
        if op == "add":
            return f"sed -i '/^\\[{s}\\]/a {key} = {val}' {f}"
        return f"sed -i '{rng_} {{/^{key} = /d}}' {f}"
