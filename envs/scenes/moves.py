"""The (rank, worker) groups a dataset's episodes are dealt to, and moving whole scenes between them during a run:
what habitat's and habitat-lab's VecEnvs share (episode_split=cost; envs/placement.py decides, the trainer offers
the measured costs through `ddppo.envs.base.place_by_cost`).

`SceneMoves` is the part of such an env that moves its scenes. The env sets `_spec` (its EnvSpec), `_movable`
(episode_split=cost and a dataset it reads itself) and `_placed_by` (the costs its scenes are placed by now), and
implements `_scene_units()` (the scene names the cost split places whole, in the order it places them),
`_read_share(costs)` (this group's episodes placed by `costs`, checked), `_assign(episodes)` (take them: one run
per env) and `assigned_episodes()`.
"""

from __future__ import annotations

from typing import Any

from ddppo.envs.placement import saved_placement
from ddppo.envs.scenes.dataset import moved_placement


def group_of(spec: Any) -> tuple[int, int]:
    """(group, groups): this batch's share of the whole job, one per (rank, worker)."""
    workers = int(getattr(spec, "worker_count", 1) or 1)
    worker = int(getattr(spec, "worker_index", 0) or 0)
    return spec.rank * workers + worker, spec.world_size * workers


class SceneMoves:
    _spec: Any
    _movable: bool
    _placed_by: dict[str, float] | None
    _units: list[str] | None = None  # `_scene_units()`, asked at the first offer and kept

    def _scene_units(self) -> list[str]:
        raise NotImplementedError

    def _read_share(self, costs: dict[str, float]) -> list[Any]:
        raise NotImplementedError

    def _assign(self, episodes: list[Any]) -> Any:
        raise NotImplementedError

    def assigned_episodes(self) -> list[list[Any]]:
        raise NotImplementedError

    def _assigned_keys(self) -> list[list[str]]:
        """Which episodes each env plays, as `scene_id/episode_id`."""
        return [[f"{ep.scene_id}/{ep.episode_id}" for ep in eps] for eps in self.assigned_episodes()]

    def place_by_cost(self, measured: dict[str, float]) -> bool:
        """episode_split=cost: the scenes re-placed by the measured costs where that makes the slowest group
        measurably faster (ddppo.envs.base.place_by_cost; `moved_placement` decides from the scene names alone, the
        same way in every group); True where this group's episodes changed."""
        if not self._movable or not measured:
            return False
        if self._units is None:  # asked once (it may read the dataset)
            self._units = self._scene_units()
        if moved_placement(self._units, group_of(self._spec)[1], self._placed_by or {}, measured) is None:
            return False
        return self._place(measured)

    def _place(self, costs: dict[str, float]) -> bool:
        """This group's episodes placed by `costs`; True where they changed (the envs' running episodes are then of
        the old placement: the caller starts fresh ones)."""
        before = self._assigned_keys()
        episodes = self._read_share(costs)
        self._placed_by = dict(costs)
        self._assign(episodes)
        return self._assigned_keys() != before

    def _place_as_saved(self, state: dict[str, Any]) -> None:
        """Place as a saved state's episodes were placed (by the costs saved with them), before it is restored; a
        state that still does not fit is refused by the caller's own checks."""
        saved = saved_placement(state, self._movable, self._placed_by)
        if saved is not None:
            self._place(saved)
