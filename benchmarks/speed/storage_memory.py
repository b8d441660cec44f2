"""`ddppo bench memory`: the resident memory the rollout storage really takes vs its analytic size.

Figures are printed as a table and written as JSON; nothing is asserted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from ddppo.benchmarks import common
from ddppo.config import load_config
from ddppo.config.loading import shipped_config
from ddppo.model.memory import nbytes
from ddppo.model.policy import Policy
from ddppo.rollout.factory import storage_steps
from ddppo.rollout.storage import RolloutStorage
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec

NAME = "memory"
HELP = "rollout storage RSS vs analytic size"


def _release_free_heap() -> None:
    """Give freed heap pages back to the OS (glibc), so RSS deltas measure new allocations, not reuse."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name:
        try:
            ctypes.CDLL(name).malloc_trim(0)
        except (OSError, AttributeError):
            pass


def storage_memory(config: str, overrides: list[str]) -> dict[str, Any]:
    """Resident memory the rollout storage really takes vs its analytic size (sum of tensor sizes)."""
    import gc

    import psutil

    cfg = load_config(config, overrides)
    spec = EnvSpec(num_envs=cfg.env.num_envs, seed=0)
    envs = make_vec_env(cfg.env.name, cfg.env_options, spec)
    try:
        policy = Policy(envs.observation_space, envs.action_space, cfg.policy)
        memory = policy.initial_memory(spec.num_envs)
        gc.collect()
        _release_free_heap()
        proc = psutil.Process()
        before = proc.memory_info().rss
        storage = RolloutStorage(storage_steps(cfg.rollout), spec.num_envs, envs.observation_space,
                                 envs.action_space, memory, torch.device("cpu"))  # as train/builder.py makes it
        for t in storage.buffers():
            t.fill_(1)  # a full rollout writes every element: make the pages resident, as in training
        after = proc.memory_info().rss
        analytic = sum(int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize
                       for s in envs.observation_space.spaces.values()) * (storage_steps(cfg.rollout) + 1) * spec.num_envs
        analytic += storage.nbytes() - sum(t.numel() * t.element_size() for t in storage.obs.values())
        return {"config": config, "overrides": overrides, "num_envs": spec.num_envs,
                "num_steps": cfg.rollout.num_steps, "analytic_bytes": analytic, "tensor_bytes": storage.nbytes(),
                "policy_memory_bytes_per_env": nbytes(policy.initial_memory(1)),
                "rss_increase_bytes": after - before, "rss_over_analytic": (after - before) / analytic}
    finally:
        envs.close()


def main(argv: list[str] | None = None) -> int:
    bench = common.parser(NAME, HELP)
    common.add_case(bench, "a config and overrides to measure (repeatable; default: gridnav at its size and at "
                           "256 envs x 256 steps)")
    args = bench.parse_args(argv)
    gridnav = str(shipped_config("gridnav"))
    default = [(gridnav, []), (gridnav, ["env.num_envs=256", "rollout.num_steps=256"])]
    results = [storage_memory(c, o) for c, o in common.cases(args, default)]
    lines = [f"{'config':<28}{'envs':>6}{'steps':>7}{'analytic MB':>13}{'RSS +MB':>9}{'ratio':>7}"
             f"{'memory B/env':>14}"]
    for r in results:
        lines.append(f"{Path(r['config']).name:<28}{r['num_envs']:>6}{r['num_steps']:>7}"
                     f"{r['analytic_bytes'] / 1e6:>13.2f}{r['rss_increase_bytes'] / 1e6:>9.2f}"
                     f"{r['rss_over_analytic']:>7.2f}{r['policy_memory_bytes_per_env']:>14,}")
    return common.report(lines, results, args.out)
