"""The GPUs a process may use, without starting CUDA: CUDA_VISIBLE_DEVICES first, else `nvidia-smi -L`.

`nvidia-smi` lists every GPU of the machine whatever CUDA_VISIBLE_DEVICES says, so it is asked only when the
variable is unset. CUDA reads the variable as a comma-separated list of indices or UUIDs and stops at the first
entry it cannot use; an empty value hides every GPU. Read by the local sweep launcher (one GPU set per parallel
run) and `python -m ddppo.distributed.visible` (slurm/single_node.sh's rank count), so both count alike.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Callable, Mapping

_ENTRY = re.compile(r"^(?:\d+|GPU-[0-9A-Fa-f-]+|MIG-[0-9A-Za-z/-]+)$")


def from_cuda_visible_devices(value: str) -> list[str]:
    """The entries CUDA uses of a CUDA_VISIBLE_DEVICES value (up to the first it cannot)."""
    entries = []
    for entry in value.split(","):
        entry = entry.strip()
        if not _ENTRY.match(entry):
            break
        entries.append(entry)
    return entries


def _nvidia_smi() -> str:
    if shutil.which("nvidia-smi") is None:  # no driver tools here: no GPU, and no process started to learn it
        return ""
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def visible_gpus(environ: Mapping[str, str] | None = None, nvidia_smi: Callable[[], str] = _nvidia_smi) -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (indices or UUIDs); [] for none."""
    env = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in env:
        return from_cuda_visible_devices(env["CUDA_VISIBLE_DEVICES"])
    return [m.group(1) for m in re.finditer(r"^GPU (\d+):", nvidia_smi(), re.M)]


if __name__ == "__main__":
    print(len(visible_gpus()))
    sys.exit(0)
