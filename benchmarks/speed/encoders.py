"""`ddppo bench encoders`: the learn phase with a library image encoder trained, frozen and re-encoding the images,
and frozen with its features kept in the rollout (computed once, at acting time: what training does).

    ddppo bench encoders [--encoder torchvision:resnet18] [--size 64] [--envs 4] [--steps 16] [--epochs 4]
                         [--minibatches 2] [--rounds 3] [--out results/encoders.json]

One learn phase = epochs x minibatches of ddppo's Policy (this encoder on a (size, size, 3) uint8 image, the GRU
core, the heads): `evaluate_with_params` over the minibatch's sequences, a PPO-shaped loss, backward, the fused Adam
step over the parameters that require gradients (as ppo/update.py takes them). Random images and actions: the cost
does not depend on what they show. The three sides run interleaved, `rounds` times; medians (min-max) are
reported, with each side's time relative to the trained one:
- trained:  the backbone fine-tuned (gradients through it, in the optimizer);
- frozen:   policy.freeze_encoder=true with the images in the rollout (as before ddppo/model/kept.py): the backbone
            re-encodes every minibatch in every epoch (under no_grad);
- features kept: policy.freeze_encoder=true as training runs it: the rollout holds the frozen backbone's features
            (`Policy.keep`, timed apart as "encode once": at acting time that pass is part of acting), and the
            learning pass runs only the head and the rest on them. Needs the vision extra.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import gymnasium
import numpy as np
import torch

NAME = "encoders"
HELP = ("learn-phase time with a library image encoder trained, frozen, and frozen with its features kept "
        "(extra `vision`)")


def build(encoder: str, size: int, frozen: bool):
    from ddppo.config import PolicyConfig
    from ddppo.model.policy import Policy

    space = gymnasium.spaces.Dict({"rgb": gymnasium.spaces.Box(0, 255, (size, size, 3), np.uint8)})
    cfg = PolicyConfig(image_encoder=encoder, encoder_weights="w.pt" if frozen else "", freeze_encoder=frozen)
    torch.manual_seed(0)
    return Policy(space, gymnasium.spaces.Discrete(4), cfg)


def learn(policy, obs: dict, actions: torch.Tensor, epochs: int, minibatches: int) -> float:
    """Seconds of one learn phase: epochs x minibatches (split by env) of forward, loss, backward, Adam step."""
    from ddppo.ppo.update import make_adam

    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = make_adam(params, 2.5e-4, 1e-5)
    policy.train()
    T, N = actions.shape
    memory = policy.initial_memory(N // minibatches)  # every minibatch's envs start their rollout from zeros
    start_flags = torch.zeros(T, N // minibatches)
    started = time.perf_counter()
    for _ in range(epochs):
        for envs in torch.arange(N).chunk(minibatches):
            mb = {k: v[:, envs] for k, v in obs.items()}
            logp, entropy, values, _ = policy.evaluate_with_params(mb, memory, start_flags, actions[:, envs])
            loss = -(logp * torch.randn_like(logp)).mean() + values.pow(2).mean() - 0.01 * entropy.mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench encoders", description=__doc__.split("\n\n")[0])
    ap.add_argument("--encoder", default="torchvision:resnet18", help="a library image encoder (LIBRARY:NAME)")
    ap.add_argument("--size", type=int, default=64, help="the env image's side (resized to the model's input)")
    ap.add_argument("--envs", type=int, default=4)
    ap.add_argument("--steps", type=int, default=16, help="rollout steps per env")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--minibatches", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians reported)")
    ap.add_argument("--out", default="results/encoders.json", help="JSON output path")
    args = ap.parse_args(argv)
    from ddppo.user_code import ENCODERS

    problem = ENCODERS.problem(args.encoder)
    if problem is not None or ENCODERS.library_of(args.encoder) is None:
        raise SystemExit(f"ddppo bench encoders: {problem or f'--encoder {args.encoder} is not LIBRARY:NAME'}")
    T, N = args.steps, args.envs
    images = torch.randint(0, 256, (T, N, args.size, args.size, 3), dtype=torch.uint8)
    actions = torch.randint(0, 4, (T, N))
    trained, frozen = build(args.encoder, args.size, False), build(args.encoder, args.size, True)
    encoder = frozen.encoders["rgb"]
    times: dict[str, list[float]] = {"trained": [], "frozen": [], "features kept": [], "encode once": []}
    for _ in range(args.rounds):
        times["trained"].append(learn(trained, {"rgb": images}, actions, args.epochs, args.minibatches))
        times["frozen"].append(learn(frozen, {"rgb": images}, actions, args.epochs, args.minibatches))
        started = time.perf_counter()
        kept = frozen.keep({"rgb": images.reshape(T * N, *images.shape[2:])})  # what the acting path keeps
        times["encode once"].append(time.perf_counter() - started)
        kept = {k: v.reshape(T, N, *v.shape[1:]) for k, v in kept.items()}
        times["features kept"].append(learn(frozen, kept, actions, args.epochs, args.minibatches))
    median = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.encoder}, {args.size}x{args.size} images -> {tuple(encoder.encoder.backbone.size)}, {N} envs x {T} "
          f"steps, {args.epochs} epochs x {args.minibatches} minibatches, torch threads {torch.get_num_threads()}, "
          f"{args.rounds} rounds")
    for k, v in times.items():
        print(f"  {k:14s} {median[k]:8.2f} s  ({min(v):.2f}-{max(v):.2f})  x{median['trained'] / median[k]:5.2f} "
              f"vs trained")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": sys.argv, "args": vars(args), "threads": torch.get_num_threads(),
                               "seconds": times, "median_s": median}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
