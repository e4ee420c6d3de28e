# Two commands for a newcomer: `make demo` and `make test`. Both install what they need first.
.PHONY: setup demo test lint typecheck bench

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/ceiling demo

test: setup
	.venv/bin/python -m pytest --durations=25 tests

lint: setup
	.venv/bin/ruff check src tests

typecheck: setup
	.venv/bin/mypy

bench: setup
	.venv/bin/ceiling bench sandbox --json
