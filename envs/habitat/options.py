"""Options of the habitat-sim PointNav environment (env.habitat.*)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class HabitatOptions:
    """habitat-sim PointNav (see envs/habitat/)."""

    dataset: str = ""  # PointNav episodes: a .json.gz file, or a folder with content/*.json.gz

    def problems(self) -> list[str]:
        return []
