"""Which scene each env slot plays: scenes dealt whole in order, or spread by cost so every group runs alike.

A group is what runs at one speed (a rank in fixed mode: it waits for its slowest step); its envs' step costs
add up when they share a simulator process or a GPU, so a rank's speed follows the sum of its envs' costs.
`contiguous` deals the scenes in order, whole, the way the episode split deals scene files to (rank, worker)
groups: with as many scenes as ranks each rank plays one scene, and a slow scene makes a slow rank, which
straggler preemption then cuts (issue 44). `cost` gives every scene the same number of env slots but spreads
them by cost (a slot's mean step time: a group's batched step costs the sum of its envs' step times, whatever
their episodes' lengths), heaviest first,
each to the group with the smallest total cost that has a free slot (longest-processing-time-first), so the
groups' totals come out as equal as the slots allow and preemption rarely cuts anyone.

Measured costs (habitat, habitat-lab: `episode_split=cost`; synthetic: `scene_placement=measured`): a trainer writes
each scene's mean env step time in seconds to its run directory's scene_costs.json (`{scene: seconds}`);
`read_scene_costs` reads such a file and `scene_costs` gives every scene its cost, the median of the measured ones
where a scene has none. During a run the trainer offers the costs it has measured so far to envs that can move
their scenes (`ddppo.envs.base.place_by_cost`); `replacement` says whether a new placement is worth the move.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
from typing import Sequence

from ddppo.envs.base import EnvError

log = logging.getLogger(__name__)

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


# a new placement must make the slowest group this much (a fraction) cheaper, under the same costs, to be taken:
# measured costs are noisy, and every move starts fresh episodes on the groups it changes
REPLACE_GAIN = 0.05


def replacement(current: list[list[int]], counts: Sequence[int], costs: Sequence[float], groups: int,
                gain: float = REPLACE_GAIN) -> list[list[int]] | None:
    """The `cost` placement under `costs` where its slowest group is more than `gain` cheaper than `current`'s
    under the same costs; None where `current` is as good within that margin (the same answer in every group for
    the same arguments)."""
    proposed = place_scenes(counts, costs, groups, "cost")
    if max(group_costs(proposed, costs)) < (1.0 - gain) * max(group_costs(current, costs)):
        return proposed
    return None


def saved_placement(state: dict, movable: bool, current: dict[str, float] | None) -> dict[str, float] | None:
    """The costs a saved env state's placement was made by (its `placed_by`), where the env places by measured
    costs and they differ from `current` (the costs it is placed by now): the env places by them again before it
    restores the state; None where nothing is to move."""
    placed_by = state.get("placed_by")
    if not movable or placed_by is None or placed_by == current:
        return None
    return {str(k): float(v) for k, v in placed_by.items()}


def read_scene_costs(path: str, key: str, run_dir_file: bool = False) -> dict[str, float]:
    """The costs in a scene costs file, `{scene: seconds}` (JSON, every value a finite number > 0); EnvError naming
    the file, `key` (the option that names one) and the fix where it is missing, not JSON or malformed.
    `run_dir_file`: the file is the run directory's own, read because `key` is unset."""
    what = f"the run directory's {path} (read as {key} is unset)" if run_dir_file else f"{key}={path}"
    fix = (f"give {key} a JSON file mapping scene names to seconds per env step (e.g. the scene_costs.json a "
           "training run writes in its run directory)" + (", or delete this one" if run_dir_file else ""))
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise EnvError(f"{what}: no such file; {fix}") from None
    except (OSError, ValueError) as err:
        raise EnvError(f"{what} is not readable JSON ({' '.join(str(err).split())}); {fix}") from None
    if not isinstance(data, dict):
        raise EnvError(f"{what} holds a JSON {type(data).__name__}, not an object; {fix}")
    bad = [name for name, v in data.items() if isinstance(v, bool) or not isinstance(v, (int, float))
           or not math.isfinite(v) or v <= 0]
    if bad:
        raise EnvError(f"{what}: the cost of {', '.join(repr(b) for b in bad[:3])}"
                       f"{' and others' if len(bad) > 3 else ''} is not a number > 0; {fix}")
    return {str(name): float(v) for name, v in data.items()}


def measured_costs(option_path: str, run_dir_path: str, key: str) -> dict[str, float]:
    """The scene costs to place by: the file the option `key` names, else the run directory's (`run_dir_path`,
    given where it exists: a resumed run), else none yet (every scene alike, one log line)."""
    if option_path:
        return read_scene_costs(option_path, key)
    if run_dir_path:
        return read_scene_costs(run_dir_path, key, run_dir_file=True)
    log.info("%s: no measured scene costs yet (none named, none in the run directory): scenes are placed as if alike "
             "in cost; the run writes its measured ones to scene_costs.json at every checkpoint, which a resumed run "
             "places by", key)
    return {}


def _measured_cost(name: str, measured: dict[str, float]) -> float | None:
    """A scene's measured cost, by its name, or by the name its episodes' scene files have where the dataset lists
    it under a longer one (habitat-lab lists HM3D's `00800-TEEsavR23oF`, whose episodes, and so train/scene/*,
    name `TEEsavR23oF`)."""
    if name in measured:
        return measured[name]
    longest = max((k for k in measured if name.endswith(k) and not name[-len(k) - 1].isalnum()), key=len, default=None)
    return None if longest is None else measured[longest]


def scene_costs(names: Sequence[str], measured: dict[str, float]) -> list[float]:
    """Each scene's cost: its measured one, else the median of the measured costs of these scenes (1 where none of
    them has one: every scene alike)."""
    found = [_measured_cost(n, measured) for n in names]
    known = [c for c in found if c is not None]
    if not known:
        return [1.0] * len(names)
    median = statistics.median(known)
    missing = [n for n, c in zip(names, found) if c is None]
    if missing:
        log.info("scenes without a measured cost, placed at the median (%.4g s per step): %s", median,
                 missing[:5] + (["..."] if len(missing) > 5 else []))
    return [median if c is None else c for c in found]
