"""Environments for ddppo. Never imports `ddppo`.

field_metadata.py holds the config's field metadata and its validation idiom (`doc`, `section_problems`): here,
below both, because the environments' option sections and ddppo's config sections declare their fields with it.
"""

from ddppo.envs.gym_ids import register as _register_gym_ids

_register_gym_ids()  # gridnav's gymnasium ids (envs/gym_ids.py): lazy entry points, nothing built here
