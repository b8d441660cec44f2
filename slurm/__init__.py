"""The SLURM scripts (train.sbatch, sweep_array.sbatch, single_node.sh), installed as `ddppo.slurm` so that
`ddppo sweep --launcher slurm` finds them outside a clone. Data only: imports nothing."""

from pathlib import Path

HOME = Path(__file__).resolve().parent
