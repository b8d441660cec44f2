"""Atari side by side: ddppo (configs/atari.yaml) against stable-baselines3 PPO at RL Zoo's Atari settings (8 envs x
128 steps, 4 epochs, minibatches of 256, lr 2.5e-4 and clip 0.1 both decayed linearly, entropy 0.01, value
coefficient 0.5), both on the standard preprocessing (noop and FIRE resets, frame skip 4 with max-pooling, 84x84
grayscale, 4 stacked frames, the rewards' signs and a termination at each lost life for the learner, whole games as
episodes) and the Nature CNN:

    ddppo bench atari [--env ALE/Breakout-v5] [--seeds 1 2 3] [--budget 100000] [--jobs 1] [--out FILE]
                      [--set KEY=VALUE ...]   (ddppo's side: overrides of configs/atari.yaml)

The protocol (a process per run with one torch thread, timed from start to exit; steps/s, steps per CPU second,
the return at the budget and the learning curve) is side_by_side.py's. SB3's side is RL Zoo's recipe:
`make_atari_env` (SB3's AtariWrapper in gymnasium wrappers, a DummyVecEnv) with `VecFrameStack(4)` on the same
ALE id made with frameskip=1 (so sticky actions are the id's on both sides), `CnnPolicy`; ddppo's side is
configs/atari.yaml as shipped (ale-py's AtariVectorEnv; run.precision=auto: bf16 where the CPU computes it
natively). Needs the extras `bench` and `atari`. Prints figures and writes them as JSON; nothing is asserted.
"""

from __future__ import annotations

import sys

from ddppo.benchmarks.peers.side_by_side import Task, main as side_by_side, sb3_curve, sb3_figures

NAME = "atari"
HELP = ("ddppo vs stable-baselines3 PPO on Atari at RL Zoo's settings (the standard preprocessing, the Nature"
        " CNN): wall-clock steps/s, return and learning curve at equal steps (extras `bench`, `atari`)")

NUM_ENVS = 8


def sb3_run(env_id: str, seed: int, budget: int) -> dict:
    """One SB3 PPO run at RL Zoo's Atari settings (in this process, one torch thread); its figures and curve."""
    import ale_py
    import gymnasium
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gymnasium.register_envs(ale_py)
    envs = VecFrameStack(make_atari_env(env_id, n_envs=NUM_ENVS, seed=seed, env_kwargs={"frameskip": 1}), n_stack=4)
    model = PPO("CnnPolicy", envs, n_steps=128, n_epochs=4, batch_size=256, ent_coef=0.01, vf_coef=0.5,
                learning_rate=lambda remaining: 2.5e-4 * remaining, clip_range=lambda remaining: 0.1 * remaining,
                seed=seed, device="cpu", verbose=0)
    curve = sb3_curve()
    model.learn(budget, callback=curve)
    return sb3_figures(model, curve)


TASK = Task(name="atari", module="atari", description=__doc__.splitlines()[0], default_env="ALE/Breakout-v5",
            needs=("ale_py",), extras="atari", config="atari", env_name=lambda env: f"gym:ale_py:{env}", window=20,
            sb3_run=sb3_run)


def main(argv: list[str] | None = None) -> int:
    return side_by_side(TASK, argv)


if __name__ == "__main__":
    sys.exit(main())
