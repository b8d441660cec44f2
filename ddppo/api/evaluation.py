"""`evaluate(agent, env, episodes)`: an `Agent` played in a gymnasium env, summarised as `ddppo eval` summarises
(ddppo.eval.stats: mean, sample std, count and a 95% interval per metric; Wilson's for success, Student's t
otherwise), under the names `ddppo eval` reports them (reward, episode_length, success, spl, ...)."""

from __future__ import annotations

from typing import Any

from ddppo.eval.stats import finite_or_none, summarize_episodes


def evaluate(agent: Any, env: Any, episodes: int = 10, deterministic: bool = True, seed: int | None = None
             ) -> dict[str, dict[str, Any]]:
    """Play `episodes` whole episodes of the gymnasium `env` (one env) with `agent` (ddppo.api.Agent), resetting
    with `seed + i` for episode i (None: the env's own stream); per metric its summary as `ddppo eval` writes it.

    An episode's metrics: its return and length; success where the last step's info has `success` or
    `is_success` (SB3's name); and whatever the last info's `metrics` dict holds (ddppo's gridnav gymnasium ids,
    ddppo.envs.gridnav.gym_ids: success, spl, distance_to_goal, collisions), as ddppo's envs report them.
    """
    if episodes < 1:
        raise ValueError(f"episodes={episodes} must be >= 1")
    played = []
    for i in range(episodes):
        obs, _ = env.reset(seed=None if seed is None else seed + i)
        state, total, length = None, 0.0, 0
        while True:
            action, state = agent.act(obs, state, deterministic=deterministic)
            obs, reward, terminated, truncated, info = env.step(action)
            total, length = total + float(reward), length + 1
            if terminated or truncated:
                break
        metrics = {"return": total, "length": float(length)}
        for key in ("is_success", "success"):
            if key in info:
                metrics["success"] = float(info[key])
        metrics.update(info.get("metrics", {}))
        played.append({"metrics": finite_or_none(metrics)})
    return summarize_episodes(played)
