#!/usr/bin/env bash
# The GPU check (issue 24): every CUDA path, for a machine with a CUDA GPU and no network; run from the repository
# root. The checks are in benchmarks/gpu_check.py (its docstring lists them and the defect each covers).
#
#   bash benchmarks/gpu_check.sh            # on the GPU machine: a table of what passed; exit 1 at the first failure
#   bash benchmarks/gpu_check.sh --dry-run  # the same checks on CPU + gloo, tiny budgets (CI runs this)
#
# Uses whatever Python and torch are installed (PYTHON=/path/to/python to choose; nothing is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" benchmarks/gpu_check.py "$@"
