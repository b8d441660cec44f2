"""Observation and reward normalisation (the `normalize` section), in one package:

    spaces.py        what `auto` resolves to on the envs' spaces (on for continuous control)
    moments.py       running mean and variance; the parallel-variance merge (rank order: the same everywhere)
    observations.py  ObsNormalizer, the statistics inside the policy (saved with its weights; `ddppo eval`,
                     exports and the KL reference apply them frozen), and the one rule that builds it
    live.py          normalize.update=step: observations counted and normalised on the acting path, step by step
    rewards.py       RewardScaler: rewards divided by the running std of the discounted return, on the host
    training.py      Normalization: built once from the config and the spaces, handed to the policy and the
                     collector at construction; the rank merge once per update; its saved-state owners

Below the model layer (the policy holds an ObsNormalizer); imports only the config and DistContext.
"""

from __future__ import annotations

from ddppo.normalization.live import LiveObsNormalizer
from ddppo.normalization.moments import RunningMoments, batch_moments, merge_moments
from ddppo.normalization.observations import ObsNormalizer, observation_normalizer
from ddppo.normalization.rewards import RewardScaler
from ddppo.normalization.spaces import continuous_control, is_vector, resolve
from ddppo.normalization.training import Normalization, build_normalization

__all__ = ["LiveObsNormalizer", "Normalization", "ObsNormalizer", "RewardScaler", "RunningMoments",
           "batch_moments", "build_normalization", "continuous_control", "is_vector", "merge_moments",
           "observation_normalizer", "resolve"]
