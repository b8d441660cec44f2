"""Simulator backends by name: `make_simulator("habitat"|"grid", settings)`.

Apart from interface.py, so the interface (imported by both backends) does not import them back.
"""

from __future__ import annotations

from ddppo.envs.scenes.interface import NavSimulator, SimSettings


def make_simulator(backend: str, settings: SimSettings) -> NavSimulator:
    """A simulator of the named backend; no scene is loaded yet."""
    if backend == "habitat":
        from ddppo.envs.scenes.sim import HabitatSim

        return HabitatSim(settings)
    if backend == "grid":
        from ddppo.envs.scenes.gridsim import GridSim

        return GridSim(settings)
    raise ValueError(f"unknown simulator backend {backend!r}; use habitat or grid")
