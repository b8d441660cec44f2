"""Which scene each env slot plays: scenes dealt whole in order, or spread by cost so every group runs alike.

A group is what runs at one speed (a rank in fixed mode: it waits for its slowest step); its envs' step costs
add up when they share a simulator process or a GPU, so a rank's speed follows the sum of its envs' costs.
`contiguous` deals the scenes in order, whole, the way the episode split deals scene files to (rank, worker)
groups: with as many scenes as ranks each rank plays one scene, and a slow scene makes a slow rank, which
straggler preemption then cuts (issue 44). `cost` gives every scene the same number of env slots but spreads
them by measured cost (step time x episode length: the time an episode of the scene takes), heaviest first,
each to the group with the smallest total cost that has a free slot (longest-processing-time-first), so the
groups' totals come out as equal as the slots allow and preemption rarely cuts anyone.
"""

from __future__ import annotations

from typing import Sequence

PLACEMENTS = ("contiguous", "cost")


def place_scenes(counts: Sequence[int], costs: Sequence[float], groups: int, placement: str = "contiguous"
                 ) -> list[list[int]]:
    """For each of `groups` groups, the scene index of each of its env slots (sum(counts) slots, dealt evenly:
    the first groups take one more when they do not divide). `counts[s]`: env slots of scene s; `costs[s]` its
    cost per slot (any unit)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement={placement!r}: use one of {', '.join(PLACEMENTS)}")
    if len(counts) != len(costs):
        raise ValueError(f"{len(counts)} scene counts but {len(costs)} costs")
    total = int(sum(counts))
    sizes = [total // groups + (1 if g < total % groups else 0) for g in range(groups)]
    slots = [s for s, n in enumerate(counts) for _ in range(int(n))]
    if placement == "contiguous":
        starts = [sum(sizes[:g]) for g in range(groups)]
        return [slots[a:a + n] for a, n in zip(starts, sizes)]
    out: list[list[int]] = [[] for _ in range(groups)]
    load = [0.0] * groups
    for s in sorted(slots, key=lambda s: (-float(costs[s]), s)):  # heaviest first; ties in scene order
        g = min((g for g in range(groups) if len(out[g]) < sizes[g]), key=lambda g: (load[g], g))
        out[g].append(s)
        load[g] += float(costs[s])
    return [sorted(o) for o in out]


def group_costs(placed: list[list[int]], costs: Sequence[float]) -> list[float]:
    """Each group's summed cost under a placement."""
    return [sum(float(costs[s]) for s in group) for group in placed]
