"""Each scene's measured cost, kept in the run directory for placing scenes by cost (episode_split=cost).

A scene's cost is its mean env step time: the seconds the envs spent stepping its finished episodes over their
steps (the step_s / step_n columns of the per-scene table, ddppo/rollout/scenes.py), summed over ranks by the
once-per-update stats collective, so every rank holds the same sums and no collective is added. Rank 0 writes them
to RUN_DIR/scene_costs.json (`{scene: seconds per env step}`) at every checkpoint, over the whole of this job's
updates; scenes this job has not timed keep the cost the file held (an earlier job's). A resumed run's envs read
the file when their options name none (train/builder.py passes its path in the env spec).
"""

from __future__ import annotations

import logging

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
