"""The Python API: `Agent` (agent.py: a checkpoint's policy acting on your observations, as `ddppo eval` acts),
`evaluate` (evaluation.py: an Agent played in a gymnasium env, with `ddppo eval`'s statistics), `load_config` and
`train` (training.py: what `ddppo train` runs), and the decorators that register your own policy, encoders and
memory cores by name (`register_policy`, `register_encoder`, `register_core`, from ddppo.model.build).

    from ddppo.api import Agent, load_config, train

    train(load_config("gridnav", ["run.dir=runs/mine", "run.total_env_steps=100000"]))
    agent = Agent.from_checkpoint("runs/mine")
    evaluate(agent, gymnasium.make("GridNav-v0"), episodes=20)  # gridnav's ids: import ddppo.envs
"""

from ddppo.api.agent import Agent
from ddppo.api.evaluation import evaluate
from ddppo.api.training import load_config, train
from ddppo.model.build import register_core, register_encoder, register_policy

__all__ = ["Agent", "evaluate", "load_config", "register_core", "register_encoder", "register_policy", "train"]
