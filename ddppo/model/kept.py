"""What a rollout keeps of an observation: a frozen encoder's features in place of the images it saw.

An image encoder whose first stage is frozen (a pretrained backbone under `policy.freeze_encoder=true`, or your
own encoder built the same way) computes that stage's output from the images alone, so it need run only once per
env step. The acting path (rollout/acting.py) runs it when an observation arrives on the device and keeps the
result under the key `KEY + FEATURES` in place of the images: the policy acts on it, the rollout stores it (a
resnet18's pooled 512 x 4 x 4 map instead of the image: no image bytes, and no backbone in the learning pass or
its epochs), and the learning pass runs only the trained rest of the encoder on it. PoliFormer keeps DINOv2
features this way.

The protocol, on the module an image-encoder builder returns (ddppo.model.pretrained.PretrainedEncoder has it):

    frozen_stage   an nn.Module, or None while nothing is frozen: images (B, C, H, W) in [0, 1] -> features,
                   no parameter of it trained
    trained_stage  an nn.Module: features -> (B, hidden_size), with
                   encoder(x) == trained_stage(frozen_stage(x))

Features are kept in the dtype the policy's forward passes compute in (`kept_dtype`: bfloat16 under
run.precision=bf16, where the frozen stage's output is bf16 already), and the acting pass acts on the kept
values themselves, so acting and learning see the same numbers.

A policy with a critic trunk of its own (policy.critic=separate) keeps its images: that trunk has encoders of its
own, which see the images.
"""

from __future__ import annotations

from typing import Dict, Tuple

import gymnasium
import numpy as np
import torch
from torch import nn

FEATURES = "#features"  # the kept key of image key K is K + FEATURES

Spec = Tuple[Tuple[int, ...], torch.dtype]  # a stored observation key's (shape per env, dtype)
Specs = Dict[str, Spec]


def frozen_stage(encoder: nn.Module) -> nn.Module | None:
    """The frozen first stage of an image encoder (the protocol above), or None."""
    stage = getattr(encoder, "frozen_stage", None)
    return stage if isinstance(stage, nn.Module) and getattr(encoder, "trained_stage", None) is not None else None


def kept_dtype(precision: str) -> torch.dtype:
    """The dtype kept features are stored in under run.precision."""
    return torch.bfloat16 if precision == "bf16" else torch.float32


def obs_dtype(space: gymnasium.spaces.Space) -> torch.dtype:
    """The dtype an observation key is stored in: uint8 images as bytes, everything else float32."""
    return torch.uint8 if space.dtype == np.uint8 else torch.float32


def specs(obs_space: gymnasium.spaces.Dict, kept: dict[str, tuple[int, ...]] | None = None,
          precision: str = "fp32") -> Specs:
    """Each stored key's (shape, dtype): the observation space's keys, the images of `kept` (image key -> feature
    shape, Policy.kept) replaced by their features in `kept_dtype(precision)`."""
    kept = kept or {}
    out: Specs = {k: (tuple(s.shape), obs_dtype(s)) for k, s in obs_space.spaces.items() if k not in kept}
    out.update({k + FEATURES: (tuple(shape), kept_dtype(precision)) for k, shape in kept.items()})
    return out


def mismatch(policy: nn.Module, other: nn.Module) -> str | None:
    """Why `other` (a KL reference) cannot read the features `policy`'s rollouts keep, or None: each kept image key
    needs a frozen stage in `other` with the same output shape and the same weights (the features are `policy`'s,
    computed once)."""
    kept, theirs = getattr(policy, "kept", None) or {}, getattr(other, "kept", None) or {}
    for key, shape in kept.items():
        if theirs.get(key) != shape:
            return (f"its encoder for {key!r} has no frozen stage of output {shape} (the rollout keeps the policy's "
                    f"frozen features of {key!r}, not the images)")
        mine, their = frozen_stage(policy.encoders[key].encoder), frozen_stage(other.encoders[key].encoder)
        a, b = mine.state_dict(), their.state_dict()
        if a.keys() != b.keys() or any(not torch.equal(a[k], b[k].to(a[k].device)) for k in a):
            return f"its frozen encoder for {key!r} holds other weights than the policy's"
    return None
