"""Evaluation: metrics with confidence intervals, the SQLite store, compare and gate,
HTML reports and the run viewer (see docs/evaluation.md)."""

from ._compare import GateResult, compare, compare_records, gate
from ._diagnose import diagnose_rows, diagnosis_cards, diagnosis_html, format_table
from ._evaluate import record_run, run_eval, verifier_version
from ._metrics import CardStats, card_stats, summarize
from ._report import REPORT_CSS, html_table, render_report, write_report
from ._stats import bootstrap_ci, mcnemar_exact, pass_at_k
from ._store import RunRecord, Store, comparability_key, load_trajectories
from ._suite import resolve_suite
from ._svg import svg_bar_chart, svg_line_chart
from ._view import make_server

__all__ = [
    "REPORT_CSS", "CardStats", "GateResult", "RunRecord", "Store", "bootstrap_ci", "card_stats",
    "comparability_key", "compare", "compare_records", "diagnose_rows", "diagnosis_cards",
    "diagnosis_html", "format_table", "gate", "html_table", "load_trajectories", "make_server",
    "mcnemar_exact", "pass_at_k", "record_run", "render_report", "resolve_suite",
    "run_eval", "summarize", "svg_bar_chart", "svg_line_chart", "verifier_version",
    "write_report"
]
