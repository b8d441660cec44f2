"""Environments for ddppo. Never imports `ddppo`, but for the leaves ddppo.field_metadata and
ddppo.entry_points and the data package.

The interface ddppo sees: base.py (VecEnv, EnvSpec, EnvError), family.py (EnvFamily: what a family declares),
registry.py (the families found, `make_vec_env`). placement.py places scenes by their cost, for the families
that have scenes.
runtime/: what every family shares to run, knowing none of them (env workers in subprocesses, shared memory).
The families, one package each, each declaring its `FAMILY` (its options class: the config section
env.<section>; its factory): gridnav/, gym/, synthetic/, habitat/, habitat_lab/. scenes/ holds the scene files,
simulators and generators habitat/ and habitat_lab/ build on.

The option sections declare their fields with ddppo/field_metadata.py (`doc`, `section_problems`), the config's
one validation idiom: a leaf module (it imports nothing of the project) that both ddppo.config and envs import.
"""

from ddppo.envs.gridnav.gym_ids import register as _register_gym_ids

_register_gym_ids()  # gridnav's gymnasium ids (envs/gridnav/gym_ids.py): lazy entry points, nothing built here
