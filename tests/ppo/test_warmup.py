"""Fine-tuning warm-ups: the actor and the critic as optimiser groups; through ppo.critic_warmup_updates the actor, and
the observation statistics it sees, stay fixed (its greedy actions and log-probs unchanged) while the critic,
re-initialised by ppo.reset_critic, learns; afterwards the actor learns, its rate ramped by ppo.actor_warmup_updates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from testutil import TINY, as_overrides, save_checkpoint, trainer_in_process

from ddppo.ppo.update import CRITIC_PREFIXES, actor_critic_groups, actor_lr_factor


def test_actor_lr_factor_holds_then_ramps():
    assert [actor_lr_factor(u, 2, 4) for u in range(8)] == [0, 0, 0.25, 0.5, 0.75, 1, 1, 1]
    assert [actor_lr_factor(u, 0, 0) for u in range(2)] == [1, 1]
    assert [actor_lr_factor(u, 3, 0) for u in range(5)] == [0, 0, 0, 1, 1]


def source_checkpoint(run_dir: Path, overrides: list[str]) -> Path:
    """A checkpoint as a behaviour-cloning run leaves: trained-looking weights and observation statistics."""
    from ddppo.config import load_config
    from ddppo.model.build import saved_policy
    from ddppo.config import to_yaml  # noqa: F401 - the config is stored through save_checkpoint
    import gymnasium

    cfg = load_config("gridnav", overrides)
    rays = cfg.env.gridnav.num_rays
    space = gymnasium.spaces.Dict({
        "pointgoal": gymnasium.spaces.Box(np.array([0, -1, -1], np.float32), np.array([np.inf, 1, 1], np.float32)),
        "depth": gymnasium.spaces.Box(0.0, 1.0, (rays,), np.float32)})
    policy = saved_policy(cfg, space, gymnasium.spaces.Discrete(4))
    torch.manual_seed(3)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.3 * torch.randn_like(p))
        for key, stats in policy.obs_norm.stats.items():
            x = torch.rand(50, *stats.mean.shape, dtype=torch.float64) * 3
            stats.merge(torch.tensor(50.0), x.mean(0), ((x - x.mean(0)) ** 2).sum(0))
    return save_checkpoint(run_dir, 5, policy.state_dict(), cfg)


def greedy(policy, obs: dict[str, torch.Tensor]) -> torch.Tensor:
    n = next(iter(obs.values())).shape[0]
    params, _ = policy.sequence_params({k: v[None] for k, v in obs.items()}, policy.initial_memory(n),
                                       torch.ones(1, n))
    return params[0]


@pytest.mark.parametrize("actor_warmup", [0])
def test_critic_warmup_keeps_greedy_actions_then_the_actor_learns(tmp_path: Path, actor_warmup: int):
    from ddppo.config import load_config

    base = [*as_overrides(TINY), "normalize.obs=on", "log.tensorboard=false"]
    ckpt = source_checkpoint(tmp_path / "bc", base)
    cfg = load_config("gridnav", [*base, f"run.dir={tmp_path / 'ft'}", f"checkpoint.path={ckpt}",
                                  "ppo.critic_warmup_updates=2", f"ppo.actor_warmup_updates={actor_warmup}",
                                  "ppo.reset_critic=true", "ppo.lr=1e-2", "run.total_env_steps=100000"])
    saved = torch.load(ckpt, weights_only=True)["model"]
    g = torch.Generator().manual_seed(0)
    obs = {"pointgoal": torch.rand(64, 3, generator=g) * 2 - 0.5,
           "depth": torch.rand(64, cfg.env.gridnav.num_rays, generator=g)}
    with trainer_in_process(cfg) as tr:
        policy = tr.policy
        state = {k: v.clone() for k, v in policy.state_dict().items()}
        actor = [k for k in state if not k.startswith(CRITIC_PREFIXES)]
        assert all(torch.equal(state[k], saved[k]) for k in actor)  # the checkpoint's actor and statistics
        assert not torch.equal(state["critic.weight"], saved["critic.weight"])  # ppo.reset_critic
        names = [g["name"] for g in tr.updater.optimizer.param_groups]
        assert names == ["actor", "critic"]
        before = greedy(policy, obs)
        critic = policy.critic.weight.clone()
        for update in (1, 2):
            tr.learning.step(update)
            tr.progress.advance(update, cfg.steps_per_rank_update, 0)
            now = policy.state_dict()
            assert all(torch.equal(now[k], state[k]) for k in actor), f"update {update} moved the actor"
            assert torch.equal(greedy(policy, obs), before)
            assert torch.equal(greedy(policy, obs).argmax(-1), before.argmax(-1))
            assert not torch.equal(policy.critic.weight, critic), f"update {update} did not train the critic"
            critic = policy.critic.weight.clone()
        tr.learning.step(3)
        assert not torch.equal(greedy(policy, obs), before), "the actor did not learn after the warm-up"
        assert not torch.equal(policy.state_dict()["obs_norm.stats.depth.mean"], state["obs_norm.stats.depth.mean"])


def test_groups_split_every_trainable_parameter_once():
    from ddppo.config import load_config
    from ddppo.model.build import make_policy
    import gymnasium

    cfg = load_config("gridnav", as_overrides(TINY))
    space = gymnasium.spaces.Dict({"x": gymnasium.spaces.Box(-1, 1, (3,), np.float32)})
    policy = make_policy(space, gymnasium.spaces.Discrete(3), cfg.policy)
    groups = actor_critic_groups(policy)
    ids = [id(p) for g in groups for p in g["params"]]
    assert sorted(ids) == sorted(id(p) for p in policy.parameters()) and len(set(ids)) == len(ids)
    assert [id(p) for p in groups[1]["params"]] == [id(policy.critic.weight), id(policy.critic.bias)]


def test_warmups_refused_without_a_critic_or_a_checkpoint():
    from ddppo.config import load_config
    from ddppo.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        load_config("gridnav", ["ppo.reset_critic=true", "ppo.advantage=grpo", "ppo.critic_warmup_updates=3",
                                "ppo.group_size=4", "env.num_envs=8"])
    message = str(err.value)
    assert "ppo.reset_critic=true re-initialises the critic of the policy checkpoint.path names" in message
    assert "ppo.critic_warmup_updates=3 needs a critic, which ppo.advantage=grpo has not" in message
