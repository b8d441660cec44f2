#!/usr/bin/env bash
# The GPU check (issue 24): every CUDA path, for a machine with a CUDA GPU and no network; a tool of the repository
# (not installed with ddppo), run from a checkout. The checks are in tools/gpu_check/run.py (its docstring lists them
# and the defect each covers).
#
#   bash tools/gpu_check/run.sh            # on the GPU machine: a table of what passed; exit 1 at the first failure
#   bash tools/gpu_check/run.sh --dry-run  # the same checks on CPU + gloo, tiny budgets (CI runs this)
#
# Uses whatever Python and torch are installed (PYTHON=/path/to/python to choose; nothing is installed); the
# checkout's ddppo/ and tools/ go first on PYTHONPATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/tools:$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python3}" -m gpu_check.run "$@"
