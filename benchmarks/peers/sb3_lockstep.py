"""ddppo against stable-baselines3 step for step (`ddppo bench sb3-lockstep`, extra `bench`): one run each, the same
initial weights, the same env reset seed, the same random streams, and per update the rollout (actions, scaled
rewards, values, log-probabilities, advantages, returns) and the weights after the update, compared.

The ddppo side is configs/mujoco.yaml with the settings of `ddppo bench mujoco` (benchmarks/peers/mujoco.py); the SB3
side is PPO with VecNormalize as that benchmark runs it, with two changes that make the streams comparable and one that
makes the algorithms meet:

- both sides draw the actions from torch's global generator seeded alike (1234) after construction, and the
  minibatch permutations from numpy's legacy generator seeded alike (777) (ddppo draws them with torch.randperm:
  replaced here by numpy's permutation for the run);
- ddppo anneals the learning rate from the env steps before the rollout (as CleanRL), SB3 from those after it:
  ddppo is given SB3's here;
- VecNormalize starts from count 0 instead of its prior count of 1e-4 (that prior weighs its initial mean 0 and
  variance 1 into the first steps' statistics). With normalize.update=rollout (`--update rollout`) SB3's statistics
  are also frozen for each rollout and merged at its end, as ddppo keeps them (`FrozenNormalize`).

What remains is float rounding (ddppo sums in other orders, normalises in float32 where SB3 uses float64 for the
returns' statistics); the differences grow slowly with the updates, as in any two float implementations.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ddppo.benchmarks.peers import mujoco

NAME = "sb3-lockstep"
HELP = "ddppo and stable-baselines3 from the same weights and random streams: per-update differences"

ACTION_SEED, PERM_SEED = 1234, 777
TOTAL = 1_000_000  # run.total_env_steps: far more than the updates compared
KEYS = ("actions", "rewards", "values", "logp", "advantages", "returns")
# ddppo's parameter names -> SB3's MlpPolicy names (separate actor and critic of two hidden layers each)
SB3_NAMES = {"encoders.state.net.0": "mlp_extractor.policy_net.0", "fuse.0": "mlp_extractor.policy_net.2",
             "critic_trunk.encoders.state.net.0": "mlp_extractor.value_net.0",
             "critic_trunk.fuse.0": "mlp_extractor.value_net.2", "actor": "action_net", "critic": "value_net"}


def _sizes(task: str, settings: str, n_steps: int | None) -> tuple[int, int]:
    z, m = mujoco.hyper(task, settings), mujoco.MODEL[settings]
    n = int(n_steps or m["n_steps"])
    return n, n // int(z["batch_size"])


def run_ddppo(task: str, settings: str, seed: int, updates: int, update_mode: str, run_dir: Path,
              n_steps: int | None = None) -> dict[str, Any]:
    """ddppo's records: per update the rollout and the weights after it; its initial weights and reset seed."""
    from ddppo.config import load_config
    from ddppo.config.loading import shipped_config
    from ddppo.distributed import init_distributed
    from ddppo.train.builder import Trainer

    n, minibatches = _sizes(task, settings, n_steps)
    overrides = mujoco.ddppo_overrides(task, settings) + [
        f"rollout.num_steps={n}", f"ppo.num_mini_batch={minibatches}", f"normalize.update={update_mode}",
        f"run.seed={seed}", f"run.total_env_steps={TOTAL}", f"run.dir={run_dir}", "log.tensorboard=false",
        "checkpoint.interval_updates=100000"]
    cfg = load_config(str(shipped_config("mujoco")), overrides)
    if cfg.ppo.lr_schedule == "linear":
        # SB3 anneals by the steps counted after the rollout it learns on, ddppo by those before it: the same
        # learning rate, lr (1 - (s + n) / T) = lr (T - n) / T x (1 - s / (T - n)), from ddppo's own schedule
        cfg = load_config(str(shipped_config("mujoco")), overrides + [
            f"ppo.lr={cfg.ppo.lr * (TOTAL - n) / TOTAL!r}", f"run.total_env_steps={TOTAL - n}"])
    ctx = init_distributed("gloo", "cpu", 60, 60, cfg.run.seed)
    records: list[dict[str, Any]] = []
    try:
        trainer = Trainer(cfg, ctx)
        try:
            init = {k: v.clone() for k, v in trainer.policy.state_dict().items()}
            # the gymnasium env's first reset seed, derived from its spec's seed (envs/gym/env.py) as SB3 is given it
            reset_seed = int(np.random.SeedSequence([int(trainer.env_spec.seed), 0]).generate_state(1)[0])

            def record(update: int, out: Any) -> None:  # after each update: its rollout and the weights it left
                r, L = out.collected.rollout, out.collected.rollout.steps
                rec = {k: getattr(r, k).reshape(L, -1).clone() for k in ("actions", "rewards", "values", "logp")}
                rec.update(advantages=out.advantages.advantages.reshape(L, -1).clone(),
                           returns=out.advantages.returns.reshape(L, -1).clone(),
                           obs=r.obs["state"].reshape(L, -1).clone(),
                           params={k: v.clone() for k, v in trainer.policy.state_dict().items()})
                records.append(rec)
                if len(records) >= updates:
                    raise _Done

            trainer.loop.watchers.append(record)
            perms = np.random.RandomState(PERM_SEED)
            trainer.updater.order = lambda k, generator=None: torch.from_numpy(perms.permutation(k))  # SB3's
            torch.manual_seed(ACTION_SEED)
            try:
                trainer.train()
            except _Done:
                pass
        finally:
            trainer.close()
    finally:
        ctx.close()
    return {"records": records, "init": init, "reset_seed": reset_seed}


class _Done(Exception):
    """Enough updates recorded."""


def run_sb3(task: str, settings: str, seed: int, updates: int, update_mode: str, init: dict[str, torch.Tensor],
            reset_seed: int, n_steps: int | None = None) -> list[dict[str, Any]]:
    """SB3's records, from ddppo's initial weights and reset seed."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    n, _ = _sizes(task, settings, n_steps)
    frozen = update_mode == "rollout"
    env = (_frozen_normalize() if frozen else VecNormalize)(make_vec_env(task, n_envs=1, seed=reset_seed),
                                                             gamma=mujoco.hyper(task, settings)["gamma"])
    env.obs_rms.count = env.ret_rms.count = 0.0
    model = mujoco.sb3_ppo(env, task, seed, settings, n)
    env.seed(reset_seed)  # PPO(seed=...) seeded the env with the run seed
    state = model.policy.state_dict()
    with torch.no_grad():
        for ours, theirs in SB3_NAMES.items():
            for p in ("weight", "bias"):
                state[f"{theirs}.{p}"].copy_(init[f"{ours}.{p}"])
        state["log_std"].copy_(init["log_std"])
    records: list[dict[str, Any]] = []

    class Record(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_start(self) -> None:
            if records:
                records[-1]["params"] = {k: v.clone() for k, v in model.policy.state_dict().items()}
                if len(records) >= updates:
                    raise _Done

        def _on_rollout_end(self) -> None:
            b = model.rollout_buffer
            rec = {k: torch.as_tensor(np.asarray(getattr(b, a))).float().reshape(n, -1) for k, a in
                   (("actions", "actions"), ("rewards", "rewards"), ("values", "values"), ("logp", "log_probs"),
                    ("advantages", "advantages"), ("returns", "returns"), ("obs", "observations"))}
            records.append(rec)
            if frozen:
                env.merge()
                model._last_obs = env.normalize_obs(env.old_obs)

    torch.manual_seed(ACTION_SEED)
    np.random.seed(PERM_SEED)
    try:
        model.learn(total_timesteps=1_000_000, callback=Record())
    except _Done:
        pass
    env.close()
    return records


def _frozen_normalize():
    """VecNormalize with ddppo's normalize.update=rollout: statistics frozen during a rollout, merged at its end
    (`merge`) from the observations acted on and the rollout's discounted returns."""
    from stable_baselines3.common.vec_env import VecNormalize

    class FrozenNormalize(VecNormalize):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.obs_seen: list[np.ndarray] = []
            self.returns_seen: list[np.ndarray] = []

        def reset(self):
            obs = self.venv.reset()
            self.old_obs = obs
            self.returns = np.zeros(self.num_envs)
            self.obs_seen.append(obs.copy())
            return self.normalize_obs(obs)

        def step_wait(self):
            obs, rewards, dones, infos = self.venv.step_wait()
            self.old_obs, self.old_reward = obs, rewards
            self.obs_seen.append(obs.copy())
            self.returns = self.returns * self.gamma + rewards
            self.returns_seen.append(self.returns.copy())
            scaled = self.normalize_reward(rewards)
            for i, done in enumerate(dones):
                if done and "terminal_observation" in infos[i]:
                    infos[i]["terminal_observation"] = self.normalize_obs(infos[i]["terminal_observation"])
            self.returns[dones] = 0
            return self.normalize_obs(obs), scaled, dones, infos

        def merge(self) -> None:
            self.obs_rms.update(np.concatenate(self.obs_seen[:-1]))  # the last one starts the next rollout
            self.obs_seen = self.obs_seen[-1:]
            self.ret_rms.update(np.concatenate(self.returns_seen))
            self.returns_seen = []

    return FrozenNormalize


def compare(ours: list[dict[str, Any]], theirs: list[dict[str, Any]], update_mode: str) -> list[dict[str, float]]:
    """Per update: the largest absolute difference of each rollout quantity and of the weights after it."""
    rows = []
    keys = KEYS + (("obs",) if update_mode == "step" else ())  # rollout mode stores raw observations
    for a, b in zip(ours, theirs):
        row = {k: float((a[k].double() - b[k].double()).abs().max()) for k in keys}
        if "params" in b:
            row["weights"] = max(float((a["params"][f"{o}.{p}"] - b["params"][f"{t}.{p}"]).abs().max())
                                 for o, t in SB3_NAMES.items() for p in ("weight", "bias"))
            row["log_std"] = float((a["params"]["log_std"] - b["params"]["log_std"]).abs().max())
        rows.append(row)
    return rows


def lockstep(task: str, settings: str, seed: int, updates: int, update_mode: str, run_dir: Path,
             n_steps: int | None = None) -> list[dict[str, float]]:
    torch.set_num_threads(1)
    ours = run_ddppo(task, settings, seed, updates, update_mode, run_dir, n_steps)
    theirs = run_sb3(task, settings, seed, updates, update_mode, ours["init"], ours["reset_seed"], n_steps)
    return compare(ours["records"], theirs, update_mode)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ddppo bench sb3-lockstep", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="Hopper-v5", help="a gymnasium task with a Box observation and action space")
    p.add_argument("--settings", default="cleanrl", choices=mujoco.SETTINGS)
    p.add_argument("--update", default="step", choices=("step", "rollout"), help="ddppo's normalize.update")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--updates", type=int, default=5)
    p.add_argument("--n-steps", type=int, default=None, help="rollout length (default: the settings')")
    p.add_argument("--out", default="results/sb3_lockstep.json")
    a = p.parse_args(argv)
    run_dir = Path(f"/tmp/ddppo-bench-lockstep-{time.time_ns()}")
    rows = lockstep(a.task, a.settings, a.seed, a.updates, a.update, run_dir, a.n_steps)
    cols = list(rows[0])
    print(f"{a.task}, {a.settings} settings, normalize.update={a.update}, seed {a.seed}: largest |ddppo - SB3| per "
          "update")
    print("update  " + "  ".join(f"{c:>10s}" for c in cols))
    for i, r in enumerate(rows, 1):
        print(f"{i:6d}  " + "  ".join(f"{r.get(c, float('nan')):10.2e}" for c in cols))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": {"task": a.task, "settings": a.settings, "update": a.update, "seed": a.seed,
                                        "n_steps": a.n_steps, "argv": sys.argv[1:]}, "max_abs_diff": rows},
                              indent=1) + "\n")
    return 0
