"""run.compile: torch.compile of the policy's observation encoders, where an image policy's acting and learning
passes spend their time (the recurrent core is one ATen/cuDNN call already; the heads are single layers).

Each encoder's `forward` is replaced, on this instance only, by its compiled version with dynamic shapes
(`dynamic=True`), so a batch of another size (a preempted or variable-length rollout, a worker's share of the
envs, an acting step vs a learning minibatch) reuses the compiled graph instead of compiling again. The weights
are the module's own: the state dict, the checkpoints and the optimizer see no difference. Every compilation is
logged with the time its call took (the first call of each graph: compile plus one run), so a recompile would
show in the log.

Compile a policy after copying it (rollout.overlap_learning's acting copy): a deepcopy shares the compiled
function of the original's encoder, not its own.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import torch
from torch import nn

from ddppo.errors import ConfigError
from ddppo.model.kept import frozen_stage

log = logging.getLogger(__name__)


def encoders(policy: nn.Module) -> dict[str, nn.Module]:
    """The observation encoders run.compile compiles, by name: ddppo's Policy's `encoders` (and those of a critic
    trunk of its own), habitat-baselines' `net.visual_encoder`. An image encoder whose features the rollout keeps
    (ddppo/model/kept.py) is compiled as its two stages, the frozen one (run once per step, at acting time) and the
    trained one (acting and learning), since its own forward then never runs in training."""
    kept = getattr(policy, "kept", None) or {}
    found: dict[str, nn.Module] = {}
    for prefix, owner in (("", policy), ("critic_trunk.", getattr(policy, "critic_trunk", None))):
        modules = getattr(owner, "encoders", None)
        if isinstance(modules, nn.ModuleDict):
            for k, m in modules.items():
                if owner is policy and k in kept:
                    found[f"encoders.{k}.frozen_stage"] = frozen_stage(m.encoder)
                    found[f"encoders.{k}.trained_stage"] = m.encoder.trained_stage
                else:
                    found[f"{prefix}encoders.{k}"] = m
    visual = getattr(getattr(policy, "net", None), "visual_encoder", None)
    if isinstance(visual, nn.Module):
        found["net.visual_encoder"] = visual
    return found


def _graphs() -> int:
    """Graphs dynamo has compiled in this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["stats"].get("unique_graphs", 0))


def _timed(name: str, compiled: Callable[..., Any]) -> Callable[..., Any]:
    def forward(*args: Any, **kwargs: Any) -> Any:
        before, t0 = _graphs(), time.perf_counter()
        out = compiled(*args, **kwargs)
        if _graphs() != before:
            log.info("run.compile: %s compiled in %.1f s (%s)", name, time.perf_counter() - t0,
                     "with gradients" if torch.is_grad_enabled() else "no gradients")
        return out

    return forward


def compile_policy(policy: nn.Module, architecture: str) -> None:
    """torch.compile `policy`'s observation encoders in place (run.compile=true); ConfigError naming run.compile
    when it has none that this knows (`architecture`: policy.architecture, for the message)."""
    found = encoders(policy)
    if not found:
        raise ConfigError(f"run.compile=true: policy.architecture={architecture} has no observation encoders "
                          f"run.compile knows (a Policy's `encoders`); set run.compile=false")
    for name, module in found.items():
        module.forward = _timed(name, torch.compile(module.forward, dynamic=True))
