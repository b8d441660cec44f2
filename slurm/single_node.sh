#!/bin/bash
# The train.sbatch job on one machine, without SLURM: torchrun --standalone, one rank per GPU. For debugging.
#
#   slurm/single_node.sh [CONFIG] [key=value ...]
#   NPROC=2 slurm/single_node.sh configs/gridnav.yaml run.dir=runs/debug run.total_env_steps=100000
#
# NPROC: number of ranks (default: the number of GPUs this job can see, or 2 without GPUs; gloo is chosen on CPU).
#   The GPUs it can see: CUDA_VISIBLE_DEVICES where set (an empty value: none), else `nvidia-smi -L`
#   (`python -m ddppo.distributed.visible` counts them). NPROC above that count is refused (exit 2): NCCL needs a
#   GPU per rank. To share GPUs anyway (gloo through host memory), pass dist.backend=gloo; dist.device=cpu
#   trains on the CPU.
# DDPPO_PYTHON: the python to use (default `python`; may hold extra words). Run from the repository root.
# CONFIG defaults to configs/gridnav.yaml; the run dir defaults to runs/single-<date>-<time> unless run.dir= is
# given (re-running on the same run.dir resumes from its newest checkpoint). Logs go to the terminal.
# Ctrl-C / SIGTERM: torchrun passes SIGTERM on to every rank, which checkpoint and exit. There is no requeue
# here; SIGUSR1 goes to the ranks directly (kill -USR1 <rank pid>), not through torchrun.
# Inside a SLURM allocation (salloc) this runs on the current node only; use train.sbatch for several nodes.

set -euo pipefail

config=configs/gridnav.yaml
if [ $# -gt 0 ] && [[ $1 != *=* ]]; then config=$1; shift; fi
overrides=("$@")
if ! printf '%s\n' "${overrides[@]}" | grep -q '^run\.dir='; then
  overrides+=("run.dir=runs/single-$(date +%Y%m%d-%H%M%S)")
fi
read -r -a python <<<"${DDPPO_PYTHON:-python}"

gpus=$("${python[@]}" -m ddppo.distributed.visible) || exit 1
if [ -z "${NPROC:-}" ]; then
  NPROC=$gpus
  [ "$NPROC" -gt 0 ] || NPROC=2
elif [ "$gpus" -gt 0 ] && [ "$NPROC" -gt "$gpus" ] \
  && [ "$(printf '%s\n' "${overrides[@]}" | grep '^dist\.backend=' | tail -n 1)" != dist.backend=gloo ] \
  && [ "$(printf '%s\n' "${overrides[@]}" | grep '^dist\.device=' | tail -n 1)" != dist.device=cpu ]; then
  shown=${CUDA_VISIBLE_DEVICES+CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES}
  echo "single_node.sh: NPROC=$NPROC ranks but this job sees $gpus GPU(s) (${shown:-nvidia-smi -L}): NCCL needs one" \
    "GPU per rank; set NPROC=$gpus or fewer, or pass dist.backend=gloo to share GPUs, or dist.device=cpu" >&2
  exit 2
fi
# torchrun's RANK/WORLD_SIZE/MASTER_* take precedence over SLURM's in the trainer; drop stale ones anyway
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

echo "[single_node.sh $(date +%FT%T)] nproc=$NPROC gpus=$gpus config=$config ${overrides[*]}" >&2
exec "${python[@]}" -m torch.distributed.run --standalone --nnodes=1 --nproc_per_node="$NPROC" \
  -m ddppo train "$config" "${overrides[@]}"
