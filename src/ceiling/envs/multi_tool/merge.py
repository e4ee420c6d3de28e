"""multi_tool/account-merge: database reads *and writes* -> merge policy -> CRM API.

Duplicate customer accounts (same e-mail, ignoring case) are merged as
``docs/data/merge-policy.md`` says: keep one account, move the others' orders to it,
delete the others, record every merge through ``POST /merges`` and write the merge ids to
``merges.txt``. The hidden tests check the whole final state of both tables (exact rows) and
the merge tickets, so deleting everything or moving orders anywhere else fails. The card's
``sql`` tool is writable here.

- difficulty 1/2/3: 1 pair / 3 pairs / 7 triples of duplicates (short / medium / long);
- heldout: keep the account with the most orders (ties: created first), and e-mails also
  differ by surrounding spaces;
- fault: see :func:`._kit.pick_fault`;
- infeasible: two accounts of one duplicate group were created on the same day and the
  policy has no tie-break.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from ...cards import TaskCard
from .._common import shq
from .._registry import Template, Variant, register
from ._kit import (
    DB,
    WORK,
    build_card,
    build_db,
    field_expr,
    filler_docs,
    name_pool,
    pick_fault,
    post_line,
    prep_line,
    sql_line,
    start_lines,
)
from ._service import Action, new_service

GROUPS = {1: (1, 2), 2: (3, 2), 3: (7, 3)}  # difficulty -> (duplicate groups, accounts each)
_PY_EXEC = ("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]);"
            " c.commit()")


def _date(rng: random.Random, taken: set[str]) -> str:
    while True:
        d = f"20{rng.randint(15, 23)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        if d not in taken:
            taken.add(d)
            return d


@register
class AccountMerge(Template):
    family = "multi_tool"
    name = "account-merge"
    summary = "duplicate accounts in the db -> merge policy in docs -> update db + CRM API"
    difficulties = (1, 2, 3)
    horizons: ClassVar[dict[int, str]] = {1: "short", 2: "medium", 3: "long"}
    tags = ("sql", "search", "http", "db-write")

    def generate(self, rng: random.Random, difficulty: int, variant: Variant) -> TaskCard:
        n_groups, size = GROUPS[difficulty]
        by_orders, infeasible = variant == "heldout", variant == "infeasible"
        names = name_pool(rng, n_groups + 6)
        dates: set[str] = set()
        ids = rng.sample(range(10, 400), n_groups * size + 6)
        customers: list[tuple[int, str, str, str]] = []
        groups: list[list[int]] = []
        for g, nm in enumerate(names):
            email = f"{nm.replace('_', '.')}@example.com"
            members = size if g < n_groups else 1
            grp = []
            for _ in range(members):
                cid = ids.pop()
                shown = "".join(ch.upper() if rng.random() < 0.3 else ch for ch in email)
                if by_orders and rng.random() < 0.5:
                    shown = " " * rng.randint(1, 2) + shown
                customers.append((cid, nm.replace("_", " ").title(), shown, _date(rng, dates)))
                grp.append(cid)
            if members > 1:
                groups.append(grp)
        created = {c[0]: c[3] for c in customers}
        reason = None
        if infeasible:
            a, b = groups[0][0], groups[0][1]
            created[b] = created[a]
            customers = [(c[0], c[1], c[2], created[c[0]]) for c in customers]
            reason = (f"accounts {min(a, b)} and {max(a, b)} are duplicates created on the same "
                      "day; the merge policy has no tie-break")
        orders: list[tuple[int, int, int]] = []
        for c in customers:
            for _ in range(rng.randint(1, 4)):
                orders.append((len(orders) + 1, c[0], rng.randrange(500, 30000)))
        n_orders = {c[0]: sum(1 for o in orders if o[1] == c[0]) for c in customers}

        keep_of: dict[int, int] = {}
        for grp in groups:
            key = ((lambda c: (-n_orders[c], created[c], c)) if by_orders
                   else (lambda c: (created[c], c)))
            keep = min(grp, key=key)
            keep_of.update({c: keep for c in grp if c != keep})

        svc = new_service(rng, "CRM API")
        svc.actions.append(Action("merges", "MG", {"keep": "int", "drop": "int"},
                                  "record that account DROP was merged into account KEEP"))
        drops = sorted(keep_of)
        expected = [svc.ticket("merges", {"keep": keep_of[d], "drop": d}) for d in drops]
        final_customers = sorted((c[0],) for c in customers if c[0] not in keep_of)
        final_orders = sorted((o[0], keep_of.get(o[1], o[1])) for o in orders)
        db_checks: dict[str, tuple[str, list[tuple[Any, ...]]]] = {
            "customers": ("SELECT id FROM customers ORDER BY id", final_customers),
            "orders": ("SELECT id, customer_id FROM orders ORDER BY id", final_orders),
        }

        same = ("equal once surrounding spaces are trimmed and case is ignored" if by_orders
                else "equal ignoring case")
        keep_rule = ("the account with the most orders (if tied, the one created first)"
                     if by_orders else "the account created first (column created)")
        docs = filler_docs(rng)
        docs["docs/data/merge-policy.md"] = (
            "# Merging duplicate customer accounts\n\n"
            f"Two accounts are duplicates when their e-mails are {same}.\n"
            f"In each group of duplicates keep {keep_rule}.\n"
            "Move the orders of every other account of the group to the kept account, then "
            "delete those accounts.\nRecord each merge with the CRM API: POST /merges with "
            '{"keep": KEPT_ID, "drop": DELETED_ID}, one call per deleted account.\n')
        docs["docs/data/retention.md"] = (
            "# Retention\n\nOrders are kept for seven years. Never delete an order.\n")
        doc_dirs = ["docs", "docs/data"]
        db = build_db([
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT, created TEXT)",
            ("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, amount_cents "
             "INTEGER)")], {"customers": sorted(customers), "orders": orders})
        instruction = (
            "shop.db has duplicate customer accounts. Merge them as docs/data/merge-policy.md "
            "says: update shop.db (move orders, delete the duplicate accounts) and record every "
            f"merge through the CRM API (service.py, {svc.url()}, POST /merges). Write the "
            "returned merge ids to merges.txt, one per line.")

        norm = "lower(trim(email))" if by_orders else "lower(email)"
        rank = ("(SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id) DESC, c.created, c.id"
                if by_orders else "c.created, c.id")
        pairs_q = (f"WITH g AS (SELECT id, {norm} AS e FROM customers) "
                   f"SELECT g.id, (SELECT c.id FROM customers c WHERE {norm.replace('email', 'c.email')}"
                   f" = g.e ORDER BY {rank} LIMIT 1) AS keep FROM g "
                   "WHERE g.e IN (SELECT e FROM g GROUP BY e HAVING COUNT(*) > 1) "
                   "AND g.id != keep ORDER BY g.id")
        sol = [prep_line(doc_dirs), *start_lines(svc), sql_line(pairs_q, f"{WORK}/pairs.txt")]
        for i in range(1, len(drops) + 1):
            d, k = field_expr(f"{WORK}/pairs.txt", i, 1), field_expr(f"{WORK}/pairs.txt", i, 2)
            script = (f"UPDATE orders SET customer_id = {k} WHERE customer_id = {d}; "
                      f"DELETE FROM customers WHERE id = {d};")
            sol.append(f'{{ if command -v sqlite3 > /dev/null; then sqlite3 {DB} "{script}"; '
                       f'else python3 -c {shq(_PY_EXEC)} {DB} "{script}"; fi; }}')
            sol.append(post_line(svc, "merges", {"keep": k, "drop": d}, "merges.txt"))
        return build_card(type(self), difficulty=difficulty, variant=variant,
                          instruction=instruction, workspace={DB: db, **docs}, svc=svc,
                          solution=sol, answer="merges.txt", expected=expected,
                          db_checks=db_checks, db_writable=True,
                          faults=pick_fault(rng, doc_dirs[-1]) if variant == "fault" else [],
                          infeasible_reason=reason)
