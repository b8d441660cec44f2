"""A stand-in for habitat-lab 0.3.x's habitat-sim simulator (CI has habitat-lab 0.3.x without habitat-sim), so
the adapter runs against 0.3.x's real config, Env, Nav task, sensors, measures and dataset classes.

The agent moves on a plane with no walls: MOVE_FORWARD 0.25 m along its heading, turns of 10 degrees; the
geodesic distance is the Euclidean one; depth images are the constant 0.5, RGB images a colour per scene. It
records how it was reconfigured (scene loads and whether habitat-lab asked it to close its renderer first).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

NAME = "DdppoStandInSim-v0"


def register(habitat: Any) -> str:
    """Register the stand-in simulator with habitat-lab's registry (once); its `habitat.simulator.type`."""
    import quaternion
    from gym import spaces
    from habitat.config.default import get_agent_config
    from habitat.core.simulator import AgentState, Sensor, SensorSuite, SensorTypes, Simulator

    if habitat.registry.get_simulator(NAME) is not None:
        return NAME

    class Camera(Sensor):
        def __init__(self, uuid: str, config: Any, kind: str):
            self._uuid, self._kind = uuid, kind
            self._shape = (int(config.height), int(config.width), 1 if kind == "depth" else 3)
            super().__init__(config=config)

        def _get_uuid(self, *args: Any, **kwargs: Any) -> str:
            return self._uuid

        def _get_sensor_type(self, *args: Any, **kwargs: Any) -> Any:
            return SensorTypes.DEPTH if self._kind == "depth" else SensorTypes.COLOR

        def _get_observation_space(self, *args: Any, **kwargs: Any) -> Any:
            if self._kind == "depth":
                return spaces.Box(0.0, 1.0, self._shape, np.float32)
            return spaces.Box(0, 255, self._shape, np.uint8)

        def get_observation(self, sim_obs: dict) -> Any:
            return sim_obs[self._uuid]

    @habitat.registry.register_simulator(name=NAME)
    class StandInSim(Simulator):
        def __init__(self, config: Any):
            self.habitat_config = config
            cameras = []
            for sensor in get_agent_config(config).sim_sensors.values():
                kind = {"HabitatSimDepthSensor": "depth", "HabitatSimRGBSensor": "rgb"}.get(sensor.type)
                if kind is not None:
                    cameras.append(Camera(kind, sensor, kind))  # habitat-sim names them rgb, depth
            self._sensor_suite = SensorSuite(cameras)
            self._position, self._yaw, self._scene = np.zeros(3), 0.0, None
            self.previous_step_collided = False
            self.scene_loads: list[tuple[str, bool]] = []  # (scene, should_close_on_new_scene)
            self.closed = False

        @property
        def sensor_suite(self) -> Any:
            return self._sensor_suite

        @property
        def action_space(self) -> Any:
            return spaces.Discrete(4)

        def reconfigure(self, config: Any, ep_info: Any = None, should_close_on_new_scene: bool = True) -> None:
            self.habitat_config = config
            if config.scene != self._scene:
                self._scene = config.scene
                self.scene_loads.append((str(config.scene), bool(should_close_on_new_scene)))
            agent = get_agent_config(config)
            if agent.is_set_start_state:
                self._position = np.asarray(agent.start_position, np.float64)
                x, y, z, w = (float(v) for v in agent.start_rotation)
                self._yaw = 2.0 * math.atan2(y, w)

        def _raw(self) -> dict:
            raw = {}
            for uuid, sensor in self._sensor_suite.sensors.items():
                shape = sensor.observation_space.shape
                if sensor.observation_space.dtype == np.uint8:
                    raw[uuid] = np.full(shape, hash(self._scene) % 200, np.uint8)
                else:
                    raw[uuid] = np.full(shape, 0.5, np.float32)
            return raw

        def _observe(self) -> Any:
            return self._sensor_suite.get_observations(self._raw())

        def reset(self) -> Any:
            return self._observe()

        def step(self, action: Any) -> Any:
            if action is not None:
                a = int(action)
                if a == 1:
                    self._position = self._position + 0.25 * np.array([-math.sin(self._yaw), 0.0,
                                                                       -math.cos(self._yaw)])
                elif a in (2, 3):
                    self._yaw += math.radians(10.0) * (1 if a == 2 else -1)
            return self._observe()

        def step_physics(self, dt: float) -> None:
            pass

        def get_observations_at(self, *args: Any, **kwargs: Any) -> Any:
            return self._observe()

        def get_agent_state(self, agent_id: int = 0) -> Any:
            rotation = quaternion.quaternion(math.cos(self._yaw / 2), 0.0, math.sin(self._yaw / 2), 0.0)
            return AgentState(self._position.copy(), rotation)

        def geodesic_distance(self, position_a: Any, position_b: Any, episode: Any = None) -> float:
            ends = np.asarray(position_b, np.float64).reshape(-1, 3)
            return float(np.min(np.linalg.norm(ends - np.asarray(position_a, np.float64), axis=1)))

        def seed(self, seed: int) -> None:
            pass

        def close(self, destroy: bool = True) -> None:
            self.closed = True

    return NAME
