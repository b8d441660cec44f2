"""Checkpoints: the file format (format.py), whether a file fits a config (fits.py), RNG states (rng.py), and
the checkpoint manager (manager.py), which is given the saved-state owners and alone saves, loads, prunes and
picks the file to resume (evaluation, the KL reference and ddppo.api only read files: `load`, `newest_valid`).
docs/reference/checkpoint-format.md describes the file key by key.

This module re-exports the names callers use as `from ddppo import checkpoint as ckpt; ckpt.load(...)`.
"""

from __future__ import annotations

from ddppo.checkpoint.fits import (ACTION_KEYS, ENV_LAYOUT_KEYS, check_fits, foreign, setting_changes, shape_changes,
                                   stored_config, tensor_problems)
from ddppo.checkpoint.format import (COUNTER_DEFAULTS, FILE_KEYS, FORMAT, READABLE, all_finite, checkpoint_dir,
                                     counters_of, file_contents, format1_namespaces, from_bytes, from_storable,
                                     list_checkpoints, load, newest_valid, save, to_bytes, to_storable,
                                     upgrade)
from ddppo.checkpoint.rng import RngState, rng_state, set_rng_state

__all__ = [
    "ACTION_KEYS", "COUNTER_DEFAULTS", "ENV_LAYOUT_KEYS", "FILE_KEYS", "FORMAT", "READABLE",
    "RngState", "all_finite", "check_fits", "checkpoint_dir", "counters_of", "file_contents", "foreign",
    "format1_namespaces", "from_bytes", "from_storable", "list_checkpoints", "load", "newest_valid",
    "rng_state", "save", "set_rng_state", "setting_changes", "shape_changes", "stored_config", "tensor_problems",
    "to_bytes", "to_storable", "upgrade",
]
