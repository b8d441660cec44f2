"""Which GPUs each parallel run of a local sweep gets.

A local sweep runs `max_parallel` runs at a time, each of `ranks` ranks (one GPU per rank). Slot i of the
`max_parallel` slots owns visible GPUs [i * ranks, (i + 1) * ranks); a run started in a slot gets them as its
CUDA_VISIBLE_DEVICES (the same entries, indices or UUIDs, as the launcher's own). More ranks at a time than
visible GPUs is refused before anything starts, unless sharing was asked for (`share_gpus: true` in the spec,
or --share-gpus), when the slots take the GPUs round robin. No GPU visible, or runs on dist.device=cpu: nothing
is placed (CPU runs).
"""

from __future__ import annotations

from typing import Sequence

from ddppo.errors import SweepError


def gpu_slots(gpus: Sequence[str], parallel: int, ranks: int, share: bool, what: str = "") -> list[list[str]]:
    """The GPUs of each of `parallel` slots; [] per slot where there is no GPU to place.

    SweepError (one line, naming the counts and the fixes) where `parallel * ranks` exceeds the GPUs and
    `share` is off."""
    if not gpus:
        return [[] for _ in range(parallel)]
    need = parallel * ranks
    if need > len(gpus) and not share:
        shown = f" ({what})" if what else ""
        fit = len(gpus) // ranks
        lower = f"lower --max-parallel to {fit}, " if fit >= 1 else ""
        raise SweepError(f"{parallel} run(s) at a time x {ranks} rank(s) need {need} GPUs (one per rank), but "
                         f"{len(gpus)} are visible{shown}: {lower}or pass --share-gpus (spec: share_gpus: true) "
                         f"to run them on shared GPUs, or set dist.device=cpu")
    return [[gpus[(i * ranks + r) % len(gpus)] for r in range(ranks)] for i in range(parallel)]
