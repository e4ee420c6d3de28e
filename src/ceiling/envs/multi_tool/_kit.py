"""Building blocks every multi_tool template shares.

A multi_tool card's workspace holds three sources the agent must chain: a SQLite database
(``shop.db``, also reachable through the card tool ``sql``), a document collection
(``docs/``, also reachable through the card tool ``search``) and a JSON API
(``service.py``, see :mod:`._service`) that the agent starts on the sandbox's loopback.

Oracle convention (that of :mod:`ceiling.envs._common`): the solution is a list of shell
lines, each complete on its own; state passes between lines through files under ``work/``.
The oracle *derives* every answer from the workspace (it never embeds the expected values),
so an oracle pass also proves the task is solvable from what the agent sees. It copes with
every fault a template may inject: ``sqlite3`` missing (falls back to ``python3``),
``curl`` failing transiently (retries), a ``docs`` folder without permissions (restores
0755 on the known folders first).

Hidden tests compare the final answer file (and, for some templates, the database) with
values computed at generation time. Every test needs real work: there is no "file exists"
test an empty answer could pass, an answer with more lines than expected fails every item,
and an infeasible card's tests fail whatever the workspace holds (its right move is
``give_up``).
"""

from __future__ import annotations

import os
import random
import sqlite3
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...cards import FileEntry, Milestone, TaskCard, ToolSpec
from .._common import TestModule, finish_card, missing_tool, permission, shq, transient
from ._service import ServiceSpec, render

if TYPE_CHECKING:
    from .._registry import Template

FIRST = ("ada", "bo", "cai", "dev", "eli", "fay", "gus", "hal", "ida", "jon", "kim", "lea",
         "max", "nia", "oto", "pam", "quin", "rex", "sol", "tia", "uma", "vic", "wes", "yul")
LAST = ("ames", "berg", "cole", "dunn", "east", "ford", "gray", "hale", "ives", "jett",
        "kerr", "lowe", "mott", "nash", "orr", "pike", "quay", "rudd", "shaw", "todd")
FILLER = (
    "All staff must complete the annual security training before the end of the quarter.",
    "The office kitchen is cleaned every Friday afternoon; label your food.",
    "Expense reports are due on the fifth working day of each month.",
    "Use the shared calendar to book meeting rooms at least a day ahead.",
    "The VPN client updates itself; restart it if the connection drops.",
    "Printers on the second floor need a badge to release jobs.",
    "New laptops are imaged by IT within three working days of the request.",
    "Parking permits are renewed in January and July.",
    "Customer data never leaves the production network without an approved ticket.",
    "The quarterly all-hands meeting is recorded and posted to the intranet.",
    "Holiday requests need two weeks' notice and a manager's approval.",
    "Report phishing emails with the button in the mail client toolbar.",
)
WORK = "work"
DB = "shop.db"


def name_pool(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct ``first_last`` names."""
    combos = [f"{f}_{lst}" for f in FIRST for lst in LAST]
    return rng.sample(combos, n)


def build_db(schema: Sequence[str], rows: dict[str, Sequence[Sequence[Any]]]) -> bytes:
    """A SQLite database file (bytes) with ``schema`` statements and ``rows`` per table."""
    fd, path = tempfile.mkstemp(suffix=".db")
    os.close(fd)
    try:
        con = sqlite3.connect(path)
        for stmt in schema:
            con.execute(stmt)
        for table, table_rows in rows.items():
            if table_rows:
                marks = ",".join("?" * len(table_rows[0]))
                con.executemany(f"INSERT INTO {table} VALUES ({marks})", table_rows)
        con.commit()
        con.close()
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)


def filler_docs(rng: random.Random, k: int = 4) -> dict[str, str]:
    """Unrelated documents that make ``search`` necessary (and grep output noisy)."""
    topics = ["onboarding", "it-help", "travel", "facilities", "security", "benefits", "events"]
    out = {}
    for topic in rng.sample(topics, k):
        body = "\n".join(rng.sample(FILLER, 4))
        out[f"docs/general/{topic}.md"] = f"# {topic.replace('-', ' ').title()}\n\n{body}\n"
    return out


# ---------------------------------------------------------------------------------------
# Oracle lines.

def prep_line(doc_dirs: Sequence[str]) -> str:
    """Create ``work/`` and give the known document folders back their 0755 mode (a
    permission fault takes it away; on an unfaulted card this changes nothing)."""
    dirs = " ".join(shq(d) for d in doc_dirs)
    return f"mkdir -p {WORK} && {{ chmod 755 {dirs} 2>/dev/null || true; }}"


def start_lines(svc: ServiceSpec) -> list[str]:
    """Start the service in the background, then wait until it answers (retrying curl)."""
    return ["python3 service.py > /dev/null 2>&1 &",
            (f"for i in $(seq 1 50); do curl -s -o /dev/null {svc.url()} && break; "
             "sleep 0.2; done")]


_PY_SQL = ("import sqlite3,sys; [print(*r) for r in "
           "sqlite3.connect(sys.argv[1]).execute(sys.argv[2])]")


def sql_line(query: str, out: str) -> str:
    """Run ``query`` on shop.db with the sqlite3 CLI, or python3 when sqlite3 is missing;
    rows go to ``out`` with fields separated by one space (values must not hold spaces)."""
    q = shq(query)
    return (f"{{ if command -v sqlite3 > /dev/null; then sqlite3 -separator ' ' {DB} {q}; "
            f"else python3 -c {shq(_PY_SQL)} {DB} {q}; fi; }} > {out}")


def field_expr(file: str, row: int, col: int) -> str:
    """Shell expression: field ``col`` (1-based) of line ``row`` (1-based) of ``file``."""
    return f"$(sed -n {row}p {file} | cut -d' ' -f{col})"


def post_line(svc: ServiceSpec, action: str, fields: dict[str, str], out: str,
              label: str | None = None) -> str:
    """POST ``fields`` (name -> shell expression for its value) to ``/<action>`` with curl,
    retrying up to 5 times, and append the ticket (prefixed by ``label``) to ``out``."""
    body = ", ".join(f'\\"{k}\\": \\"{v}\\"' for k, v in fields.items())
    show = ("print(t)" if label is None else "print(sys.argv[2], t)")
    py = f"import json,sys; t=json.load(open(sys.argv[1]))['ticket']; {show}"
    lab = "" if label is None else f' "{label}"'
    return (f'b="{{{body}}}"; for i in 1 2 3 4 5; do curl -sf -X POST '
            f"-H 'Content-Type: application/json' -d \"$b\" {svc.url(action)} "
            f"> {WORK}/resp.json && break; sleep 0.3; done; "
            f"python3 -c {shq(py)} {WORK}/resp.json{lab} >> {out}")


def get_line(svc: ServiceSpec, lookup: str, key_expr: str, py_expr: str, out: str) -> str:
    """GET ``/<lookup>/<key>`` (retrying curl) and write ``py_expr`` (over the JSON record
    ``r``) to ``out``."""
    py = f"import json,sys; r=json.load(open(sys.argv[1])); print({py_expr})"
    return (f'for i in 1 2 3 4 5; do curl -sf {svc.url(lookup)}/{key_expr} > {WORK}/get.json '
            f"&& break; sleep 0.3; done; python3 -c {shq(py)} {WORK}/get.json > {out}")


# ---------------------------------------------------------------------------------------
# Hidden tests.

_LINES_HELPERS = '''
ANSWER = {answer!r}
EXPECTED = {expected!r}
INFEASIBLE = {infeasible!r}


def _lines():
    if INFEASIBLE:
        raise AssertionError("infeasible card (" + INFEASIBLE + "): the right move is give_up")
    p = WS / ANSWER
    assert p.is_file() and not p.is_symlink(), ANSWER + " is missing (or not a regular file)"
    got = [" ".join(x.split()) for x in p.read_text(errors="replace").splitlines() if x.strip()]
    assert len(got) <= len(EXPECTED), (
        f"{{ANSWER}} has {{len(got)}} lines; the task has {{len(EXPECTED)}} answers")
    return got


def _has(i):
    """Whether answer i is present; failure messages never show an expected value."""
    return EXPECTED[i] in _lines()
'''

_DB_HELPERS = '''
import shutil
import sqlite3
import tempfile


def _rows(query):
    if INFEASIBLE:
        raise AssertionError("infeasible card (" + INFEASIBLE + "): the right move is give_up")
    p = WS / {db!r}
    assert p.is_file() and not p.is_symlink(), "the database is missing"
    tmp = Path(tempfile.mkdtemp()) / "db.sqlite"  # a private copy: the workspace stays as is
    shutil.copyfile(p, tmp)
    for side in ("-wal", "-journal"):
        q = Path(str(p) + side)
        if q.is_file() and not q.is_symlink():
            shutil.copyfile(q, Path(str(tmp) + side))
    con = sqlite3.connect(str(tmp))
    try:
        return [tuple(r) for r in con.execute(query)]
    finally:
        con.close()
'''


def answer_tests(answer: str, expected: Sequence[str], infeasible: str | None,
                 db_checks: dict[str, tuple[str, list[tuple[Any, ...]]]] | None = None,
                 ) -> TestModule:
    """One test per expected answer line (order-free, no extra lines allowed), plus one test
    per database check (``name -> (query, expected rows)``). Failure messages say which
    answer is wrong, never what it should be (verdict evidence may reach a policy)."""
    helpers = _LINES_HELPERS.format(answer=answer, expected=list(expected),
                                    infeasible=infeasible)
    if db_checks:
        helpers += _DB_HELPERS.format(db=DB)
    tm = TestModule(helpers=helpers)
    n = len(expected)
    for i in range(n):
        tm.add(f"answer_{i + 1:02d}",
               f"assert _has({i}), 'answer {i + 1} of {n} is missing or wrong in {answer}'")
    for name, (query, rows) in (db_checks or {}).items():
        tm.add(f"db_{name}", f"same = _rows({query!r}) == {rows!r}\n"
                             f"assert same, 'the {name} table is not in the expected final state'")
    return tm


# ---------------------------------------------------------------------------------------
# Cards.

def pick_fault(rng: random.Random, doc_dir: str) -> list[Any]:
    """The fault of a ``fault`` variant: curl fails once, sqlite3 is missing, or a document
    folder starts without permissions. The oracle copes with each."""
    return [rng.choice([transient("curl"), missing_tool("sqlite3"), permission(doc_dir)])]


def card_tools(db_writable: bool = False) -> list[ToolSpec]:
    return [
        ToolSpec(name="sql", description="Run one SQL statement on shop.db; rows come back "
                 "tab-separated with a header line.",
                 args={"query": "one SQL statement"},
                 config={"kind": "sql", "db": DB, "readonly": not db_writable}),
        ToolSpec(name="search", description="Case-insensitive text search over docs/; prints "
                 "path:line:text for each hit.", args={"query": "the text to look for"},
                 config={"kind": "search", "root": "docs"}),
    ]


def build_card(template: type[Template], *, difficulty: int, variant: str,
               instruction: str, workspace: dict[str, str | bytes], svc: ServiceSpec,
               solution: list[str], answer: str, expected: list[str],
               faults: list[Any], infeasible_reason: str | None,
               db_checks: dict[str, tuple[str, list[tuple[Any, ...]]]] | None = None,
               db_writable: bool = False) -> TaskCard:
    """Assemble the card: the service script and README join the workspace, every source
    file (docs, service, README, and the database unless the task writes it) is protected,
    the card tools ``sql``/``search`` are declared, the hidden tests are
    :func:`answer_tests`, and a milestone rewards the first correct answer line of a
    multi-answer task. Raises AssertionError when the oracle's length gives a horizon other
    than the template's declared one (a generator bug)."""
    ws: dict[str, str | bytes] = dict(workspace)
    ws["service.py"] = render(svc)
    ws["README.md"] = (
        f"# {svc.title}\n\nSources for this task:\n\n"
        f"- `{DB}`: a SQLite database (tool `sql`, the `sqlite3` CLI or python3's sqlite3).\n"
        "- `docs/`: the documentation (tool `search`, or grep).\n"
        f"- `service.py`: the JSON API. Start it with `python3 service.py > /dev/null 2>&1 &`;"
        f" it listens on {svc.url()} and `curl {svc.url()}` lists its endpoints.\n")
    protected = sorted(p for p in ws if p != DB or not db_writable)
    infeasible = infeasible_reason if variant == "infeasible" else None
    tests = answer_tests(answer, expected, infeasible, db_checks)
    card = finish_card(template, variant=variant, instruction=instruction,
                       workspace={k: FileEntry(v.encode() if isinstance(v, str) else v)
                                  for k, v in ws.items()},
                       tests=tests, solution=solution, faults=faults,
                       infeasible_reason=infeasible_reason, protected=protected,
                       runner="files", command_timeout_s=20.0)
    want = template.horizons[difficulty]
    assert card.horizon == want, (f"{template.template_id()} d{difficulty}: oracle gives "
                                  f"{card.horizon}, template declares {want}")
    card.tools = card_tools(db_writable)
    if infeasible is None and len(expected) >= 2:
        card.milestones = [Milestone(id="first_answer", reward=0.1, check=(
            f"{{ cat {shq(answer)} 2>/dev/null || true; }} | tr -s ' \\t' ' ' | "
            f"grep -qxF {shq(expected[0])}"))]
    return card
