"""Each scene's measured cost, kept in the run directory for placing scenes by cost (episode_split=cost).

A scene's cost is its mean env step time: the seconds the envs spent stepping its finished episodes over their
steps (the step_s / step_n columns of the per-scene table, ddppo/rollout/scenes.py), summed over ranks by the
once-per-update stats collective, so every rank holds the same sums and no collective is added. Rank 0 writes them
to RUN_DIR/scene_costs.json (`{scene: seconds per env step}`) at every checkpoint, over the whole of this job's
updates; scenes this job has not timed keep the cost the file held (an earlier job's). A resumed run's envs read
the file when their options name none (train/builder.py passes its path in the env spec).

During the run (`ScenePlacement`), every env.placement_interval_updates updates the envs are offered this job's
measured costs (the collector's `place_by_cost`, ddppo.envs.base.place_by_cost): those that place scenes by measured cost move them where that
makes the slowest group measurably faster (envs/placement.py `replacement`, the same decision on every rank, since
every rank holds the same sums), and a rank whose envs moved starts fresh episodes. A job's placement thus follows
its own measurements from its first updates, not only the next job's. Step times are wall-clock, so where a run
moves its scenes depends on the machine: two runs of one seed can differ from the first move on.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ddppo.rollout.scenes import step_seconds
from ddppo.rundir import RunDir

log = logging.getLogger(__name__)


class SceneCosts:
    """The summed step seconds and steps of each scene since the job started; `save` writes them (rank 0)."""

    def __init__(self, names: tuple[str, ...], run_dir: RunDir, writes: bool):
        self.names, self.run_dir, self.writes = tuple(names), run_dir, writes
        self.seconds = np.zeros(len(self.names))
        self.steps = np.zeros(len(self.names))

    def add(self, table: np.ndarray) -> None:
        """One update's per-scene table, summed over ranks (the same on every rank)."""
        if self.names:
            seconds, steps = step_seconds(table)
            self.seconds += seconds
            self.steps += steps

    def measured(self) -> dict[str, float]:
        """{scene: mean seconds per env step} of the scenes timed so far."""
        return {n: float(s / k) for n, s, k in zip(self.names, self.seconds, self.steps) if k > 0}

    def save(self) -> None:
        """Rank 0: the file's costs updated with this job's measured ones, where it has any. A failed write is
        logged: the costs are an aid to the next job's placement, never a reason to stop training."""
        measured = self.measured()
        if not (self.writes and measured):
            return
        try:
            self.run_dir.write_scene_costs({**self.run_dir.scene_costs(), **measured})
        except OSError as err:
            log.warning("could not write %s (%s); the scene costs measured so far are not kept",
                        self.run_dir.scene_costs_path, err)


class ScenePlacement:
    """Offers the envs the measured costs once every scene has been timed (the first update where they all have),
    then every `interval` updates (0: never); where this rank's envs move, the collector starts fresh episodes
    (seeded from the update, as on a resume that cannot continue them)."""

    def __init__(self, costs: SceneCosts, collector: Any, interval: int):
        self.costs, self.collector, self.interval = costs, collector, int(interval)
        self.first_offered = False  # every scene timed and offered once

    def due(self, update: int, measured: dict[str, float]) -> bool:
        if self.interval <= 0 or not measured:
            return False
        if not self.first_offered and len(measured) == len(self.costs.names):
            self.first_offered = True
            return True
        return update % self.interval == 0

    def after_update(self, update: int) -> bool:
        """At the end of update `update` (after its stats were summed over the ranks): True if this rank's envs
        moved and start fresh episodes."""
        measured = self.costs.measured()
        if not self.due(update, measured) or not self.collector.place_by_cost(measured, update):
            return False
        log.info("update %d: scenes moved by their measured step times (%s); this rank's envs start fresh episodes",
                 update, ", ".join(f"{n} {1000 * c:.2f} ms" for n, c in sorted(measured.items())))
        return True
