#!/usr/bin/env bash
# The GPU check of issue 16, for a machine with a CUDA GPU and no network: run from the repository root.
#
#   bash benchmarks/gpu_check.sh            # CUDA + NCCL, world size 1 (torchrun --nproc-per-node 1)
#   bash benchmarks/gpu_check.sh --dry-run  # the same steps on CPU + gloo, tiny budgets: checks the script
#
# Uses whatever Python and torch are installed (PYTHON=/path/to/python to choose; nothing is installed).
# Trains gridnav and the habitat PointNav paper config on the habitat grid double (no habitat-sim needed;
# scenes and episodes are generated into a temporary folder), then checks with benchmarks/phase_check.py
# that the phase timers' shares are plausible, and prints fps. Exits non-zero on the first failed check.
set -euo pipefail

PY=${PYTHON:-python3}
DRY=0
if [[ "${1:-}" == "--dry-run" ]]; then DRY=1; fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ddppo-gpu-check.XXXXXX")
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
echo "gpu_check: work folder $WORK"

if [[ $DRY == 1 ]]; then
  DEV=(dist.device=cpu dist.backend=gloo)
  GRID_STEPS=4096; HAB_STEPS=96; HAB=(env.num_envs=2 env.num_workers=0 rollout.num_steps=16
                                      env.habitat.depth_width=32 env.habitat.depth_height=32
                                      policy.hidden_size=32 policy.resnet_base_width=8)
else
  "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else "gpu_check: torch sees no CUDA device")'
  "$PY" -c 'import torch; print("gpu_check: torch", torch.__version__, torch.cuda.get_device_name(0),
        "nccl", torch.cuda.nccl.version())'
  DEV=(dist.device=cuda dist.backend=nccl)
  GRID_STEPS=200000; HAB_STEPS=6144; HAB=()
fi

run() {  # run NAME CONFIG STEPS OVERRIDES...
  local name=$1 config=$2 steps=$3
  shift 3
  "$PY" -m torch.distributed.run --standalone --nproc-per-node 1 -m ddppo train "$config" \
    "run.dir=$WORK/$name" "run.total_env_steps=$steps" "run.torch_threads=4" log.tensorboard=false \
    log.interval_s=10 log.bottleneck_interval_s=1 checkpoint.interval_updates=100000 "${DEV[@]}" "$@" \
    > "$WORK/$name.log" 2>&1 || { tail -30 "$WORK/$name.log"; echo "gpu_check: $name training FAILED"; exit 1; }
  grep -m1 "backend=" "$WORK/$name.log" || true
  grep "bottleneck:" "$WORK/$name.log" | tail -1 || true
  "$PY" benchmarks/phase_check.py "$WORK/$name" --label "$name"
}

run gridnav configs/gridnav.yaml "$GRID_STEPS"

"$PY" -m envs.habitat.scene_gen generate --out "$WORK/scenes/gen" --num-scenes 2 --seed 0 > /dev/null
"$PY" -m envs.habitat.episode_gen --scenes-dir "$WORK/scenes" --out "$WORK/episodes/train" \
  --episodes-per-scene 50 --seed 0 --backend grid > /dev/null
run habitat_grid configs/pointnav_habitat.yaml "$HAB_STEPS" env.habitat.backend=grid \
  "env.habitat.dataset=$WORK/episodes/train" "env.habitat.scenes_dir=$WORK/scenes" "${HAB[@]}"

echo "gpu_check: all checks passed (logs and metrics in $WORK)"
