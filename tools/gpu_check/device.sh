#!/usr/bin/env bash
# The GPU check from a bare checkout, on a machine with a CUDA GPU, torch and no network (omegaconf, gymnasium,
# numpy... need not be installed): the checks in three parts, one command each (at most 300 s a command).
#
#   python tools/gpu_check/prepare_deps.py download --python-version 3.12   # before, where there is network:
#                                                   # the wheels into .gpu_check/ (git-ignored; carry it along)
#   bash tools/gpu_check/device.sh essential   # command 1: the essential checks (planned 265 s)
#   bash tools/gpu_check/device.sh rest        # command 2: the rest (planned 270 s)
#   bash tools/gpu_check/device.sh models      # command 3: bf16 + compile + transformer (planned 45 s)
#   ... --dry-run                                   # the same on CPU + gloo (CI-sized)
#
# Each command unpacks the wheels this Python lacks into .gpu_check/site, puts that folder and
# tools/gpu_check/checkout_shim (which maps ddppo.envs / ddppo.benchmarks to the checkout's folders) and tools/ on
# PYTHONPATH, and runs tools/gpu_check/run.py --part PART. Results JSON, every check's logs and this command's output
# go to one folder: $OUT/gpu_check (the device tool's $OUT), else gpu_check_out/ in the checkout.
# Environment: PYTHON (default python3), OUT, DDPPO_GPU_CHECK_DEPS (default .gpu_check).
set -euo pipefail
cd "$(dirname "$0")/../.."
part=${1:?usage: bash tools/gpu_check/device.sh essential|rest|models|all [run.py options]}
shift
py=${PYTHON:-python3}
deps=${DDPPO_GPU_CHECK_DEPS:-.gpu_check}
results=${OUT:-$PWD/gpu_check_out}/gpu_check
mkdir -p "$results"
"$py" tools/gpu_check/prepare_deps.py unpack --dest "$deps" 2>&1 | tee -a "$results/$part.out"
shim="$PWD/tools/gpu_check/checkout_shim"
export PYTHONPATH="$shim:$(cd "$deps" && pwd)/site:$PWD/tools:$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$py" -m gpu_check.run --part "$part" --work "$results" "$@" 2>&1 | tee -a "$results/$part.out"
