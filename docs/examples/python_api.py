"""Train on the corridor of corridor.py from Python, then act with the trained policy in plain gymnasium.

Run it from the folder that holds corridor.py: `python python_api.py`.
"""

import logging

import gymnasium as gym
import numpy as np

import corridor  # noqa: F401  (registers Corridor-v0)
from ddppo.api import Agent, load_config, train

logging.basicConfig(level=logging.INFO)  # ddppo logs its progress lines through `logging`

# the same config `ddppo train cartpole KEY=VALUE ...` would build: a shipped config (or a YAML file) + overrides
cfg = load_config("cartpole", [
    "run.dir=runs/corridor", "env.name=gym:corridor:Corridor-v0", "env.gym.episode_metrics=[success]",
    "env.num_envs=4", "rollout.num_steps=32", "ppo.num_mini_batch=2", "ppo.epochs=4", "policy.rnn_type=gru",
    "run.total_env_steps=4096",
])
assert train(cfg) == 0  # into runs/corridor; run again and it resumes there (finished: it trains nothing)

# the newest checkpoint of the run, acting as `ddppo eval` acts (greedy; normalisation as trained)
agent = Agent.from_checkpoint("runs/corridor", device="cpu")

env = gym.make("Corridor-v0")
successes = []
for episode in range(5):
    obs, _ = env.reset(seed=episode)
    state, done = None, False  # state=None: an episode starts (the recurrent state is zeroed)
    while not done:
        action, state = agent.act(obs, state)
        obs, reward, terminated, truncated, info = env.step(int(action))
        done = terminated or truncated
    successes.append(info["success"])
print(f"success over {len(successes)} episodes: {np.mean(successes):.2f}")

# a batch: N observations at once (here gymnasium's vector env), `episode_start` where an episode began
envs = gym.make_vec("Corridor-v0", num_envs=3, vectorization_mode="sync",
                    vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
obs, _ = envs.reset(seed=0)
state, start = None, np.ones(3, bool)
for _ in range(40):
    actions, state = agent.act(obs, state, episode_start=start)
    obs, reward, terminated, truncated, _ = envs.step(actions)
    start = terminated | truncated  # same-step autoreset: `obs` is already the next episode's first
envs.close()
