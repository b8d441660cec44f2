"""The gym family's options (`env.gym.*`): a frozen dataclass, each field's rules in its metadata
(ddppo/field_metadata.py `doc`). Kept free of heavy imports: ddppo's config schema is built from it."""

from __future__ import annotations

import dataclasses

from ddppo.field_metadata import doc


def _episode_metric_problem(item: object) -> str | None:
    """None for an info key ddppo does not count itself."""
    if isinstance(item, str) and item and item not in ("return", "length"):
        return None
    return "must be info keys other than return and length (ddppo counts those itself)"


def _key_problem(item: object) -> str | None:
    return None if isinstance(item, str) and item else "must be observation key names"


@dataclasses.dataclass(frozen=True)
class GymOptions:
    """Any gymnasium environment id, each env made by gymnasium.make (env.name: gym:<id>)."""

    vectorization_mode: str = dataclasses.field(default="sync",
                                                metadata=doc("sync (stepped in turn in this process) or async "
                                                             "(gymnasium's AsyncVectorEnv: one subprocess per env)",
                                                             choices=("sync", "async")))
    max_episode_steps: int = dataclasses.field(default=0,
                                               metadata=doc("0 = the env's registered limit; >0 overrides it", ge=0))
    kwargs: dict = dataclasses.field(default_factory=dict, metadata=doc("passed to gymnasium.make"))
    episode_metrics: list = dataclasses.field(default_factory=list,
                                              metadata=doc("info keys whose numbers at an episode's last step are "
                                                           "episode metrics (train/<key>, ddppo eval's <key>), e.g. "
                                                           "[success]", each=_episode_metric_problem))
    atari: bool = dataclasses.field(default=False,
                                    metadata=doc("ALE ids (gym:ale_py:ALE/Breakout-v5, pip install ale-py): ale-py's "
                                                 "vectorised AtariVectorEnv with the standard preprocessing (noop "
                                                 "reset, FIRE reset, frame skip 4 with max-pooling, 84x84 grayscale, "
                                                 "4 stacked frames); the learner gets the rewards' signs and a "
                                                 "termination at each lost life, while episodes, their returns and "
                                                 "ddppo eval are whole games; env.gym.kwargs go to AtariVectorEnv "
                                                 "(e.g. {repeat_action_probability: 0.0})", shape=True))
    drop_keys: list = dataclasses.field(default_factory=list,
                                        metadata=doc("keys of a Dict observation to leave out (gymnasium's "
                                                     "FilterObservation), e.g. [mission] for MiniGrid's mission "
                                                     "string; a key the env lacks is an error naming its keys",
                                                     shape=True, each=_key_problem))

