"""One ddppo checkpoint of an env.name=habitat_lab run, evaluated by habitat-lab's own Benchmark loop and metrics
(envs/habitat_lab/benchmark.py), to set beside `ddppo eval` on the same split: greedy actions, every episode once.

    ddppo bench habitat-lab-metrics RUN_DIR [--checkpoint PATH] [overrides ...]
prints one JSON line: the checkpoint, habitat-lab's means, the episode count.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from ddppo import checkpoint as ckpt
from ddppo.config.loading import build_config, parse_overrides, yaml_layer
from ddppo.model.build import make_policy
from ddppo.envs.habitat_lab.benchmark import habitat_lab_metrics
from ddppo.envs.habitat_lab.options import HabitatLabOptions

NAME = "habitat-lab-metrics"
HELP = "a checkpoint through habitat-lab's own Benchmark loop"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ddppo bench habitat-lab-metrics", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--checkpoint", default="", help="a checkpoint file (default: the run's newest)")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. env.habitat_lab.split=val")
    args = parser.parse_intermixed_args(argv)
    path = args.checkpoint or str(ckpt.list_checkpoints(args.run_dir)[-1])
    data = ckpt.load(path)
    layers = [(path, yaml_layer(data["config_yaml"], f"{path}: stored config"))]
    if args.overrides:
        layers.append(("overrides", parse_overrides(args.overrides)))
    cfg = build_config(*layers)
    options = HabitatLabOptions(**cfg.env_options)
    state: dict = {}

    def act(obs: dict, start: bool):
        if "policy" not in state:
            import gymnasium

            spaces = gymnasium.spaces.Dict({k: state["spaces"][k] for k in state["spaces"]})
            state["policy"] = make_policy(spaces, state["action_space"], cfg.policy).eval()
            state["policy"].load_state_dict(data["model"])
            state["memory"] = state["policy"].initial_memory(1)
        policy = state["policy"]
        tensors = {k: torch.as_tensor(v).to(torch.uint8 if v.dtype.name == "uint8" else torch.float32)
                   for k, v in obs.items()}
        action, _, _, state["memory"] = policy.act(tensors, state["memory"], torch.tensor([float(start)]),
                                                   deterministic=cfg.eval.deterministic)
        return action.numpy()

    from ddppo.envs.base import EnvSpec
    from ddppo.envs.habitat_lab.env import HabitatLabVecEnv

    probe = HabitatLabVecEnv(options, EnvSpec(num_envs=1, seed=0))  # the spaces the policy was built for
    state["spaces"], state["action_space"] = dict(probe.observation_space.spaces), probe.action_space
    probe.close()
    metrics, count = habitat_lab_metrics(options, act)
    print(json.dumps({"checkpoint": path, "episodes": count, "habitat_lab_metrics": metrics}))
    return 0


