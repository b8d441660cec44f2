"""habitat-lab's observation and action spaces as the ones ddppo's policy reads (no habitat import here).

habitat-lab's spaces are `gym` (0.2x) spaces; they are read by duck typing
(low/high/shape/dtype, n, spaces) and rebuilt as gymnasium spaces:
- a Box stays a Box: uint8 images stay uint8 (the policy scales them), other float or wide integer boxes
  become float32;
- an integer Box of one element with finite bounds (habitat-lab's `objectgoal` category id, `episode id`
  style sensors) becomes a Discrete observation: the value minus the box's low, as int64 (the policy embeds it);
- a task's actions: all without arguments (EmptySpace: STOP, MOVE_FORWARD, ...) -> Discrete(n), in the
  task's own action order (the index habitat-lab's `Env.step(int)` takes); a task with one action whose
  arguments are Boxes (VELOCITY_CONTROL, arm/base velocity) -> one flat Box over those arguments, in
  sorted argument order (one-number arguments are passed as floats, larger ones as arrays of their shape).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import gymnasium
import numpy as np

from ddppo.envs.base import EnvError

MAX_CATEGORIES = 100_000  # an integer box with a wider range is a quantity, not a category


def _kind(space: Any) -> str:
    return type(space).__name__


def convert_observation_space(space: Any) -> tuple[gymnasium.spaces.Dict, Callable[[dict], dict]]:
    """(our Dict space, a function turning one habitat-lab observation dict into ours)."""
    ours: dict[str, gymnasium.spaces.Space] = {}
    converters: dict[str, Callable[[Any], np.ndarray]] = {}
    for key, sub in space.spaces.items():
        ours[key], converters[key] = _convert_one(key, sub)

    def convert(obs: dict) -> dict:
        return {k: f(obs[k]) for k, f in converters.items()}

    return gymnasium.spaces.Dict(ours), convert


def _convert_one(key: str, sub: Any) -> tuple[gymnasium.spaces.Space, Callable[[Any], np.ndarray]]:
    if _kind(sub) == "Discrete":
        start = int(getattr(sub, "start", 0))
        return gymnasium.spaces.Discrete(int(sub.n)), lambda v: np.asarray(int(np.asarray(v).reshape(-1)[0]) - start)
    if not hasattr(sub, "low") or not hasattr(sub, "shape"):
        raise EnvError(f"habitat-lab observation {key!r} has space {sub}; supported: Box and Discrete sensors")
    low, high = np.asarray(sub.low), np.asarray(sub.high)
    dtype = np.dtype(sub.dtype)
    if np.issubdtype(dtype, np.integer) and int(np.prod(sub.shape)) == 1 and dtype != np.uint8:
        lo, hi = float(low.min()), float(high.max())
        if math.isfinite(lo) and math.isfinite(hi) and 0 <= hi - lo < MAX_CATEGORIES:
            base = int(lo)
            return gymnasium.spaces.Discrete(int(hi - lo) + 1), \
                lambda v: np.asarray(int(np.asarray(v).reshape(-1)[0]) - base, np.int64)
    if dtype == np.uint8:
        box = gymnasium.spaces.Box(low.astype(np.uint8), high.astype(np.uint8), tuple(sub.shape), np.uint8)
        return box, lambda v: np.asarray(v, np.uint8).reshape(box.shape)
    box = gymnasium.spaces.Box(low.astype(np.float32), high.astype(np.float32), tuple(sub.shape), np.float32)
    return box, lambda v: np.asarray(v, np.float32).reshape(box.shape)


class ActionMap:
    """Our action (an index, or a flat float vector) -> the argument of habitat-lab's `Env.step`."""

    def __init__(self, names: list[str], action_space: Any):
        self.names = list(names)
        spaces = dict(action_space.spaces)
        args = {name: spaces.get(name) for name in self.names}
        with_args = [n for n, s in args.items() if s is not None and _kind(s) != "EmptySpace"]
        self.continuous: str | None = None
        if not with_args:
            self.space: gymnasium.spaces.Space = gymnasium.spaces.Discrete(len(self.names))
            return
        if len(self.names) != 1:
            raise EnvError(f"habitat-lab task actions {self.names}: {with_args} take arguments and the others do "
                           "not; supported are tasks whose actions all take none (Discrete) or with one action "
                           "whose arguments are Boxes (continuous)")
        self.continuous = self.names[0]
        sub = args[self.continuous]
        if not hasattr(sub, "spaces"):
            raise EnvError(f"habitat-lab action {self.continuous!r} has argument space {sub}; expected a Dict of "
                           "named Box arguments")
        parts = dict(sub.spaces)
        self.arg_slices: list[tuple[str, int, int, tuple[int, ...]]] = []
        lows, highs, at = [], [], 0
        for arg in sorted(parts):
            box = parts[arg]
            if not hasattr(box, "low"):
                raise EnvError(f"habitat-lab action {self.continuous!r} argument {arg!r} has space {box}; "
                               "only Box arguments are supported")
            size = int(np.prod(box.shape))
            self.arg_slices.append((arg, at, at + size, tuple(box.shape)))
            lows.append(np.broadcast_to(np.asarray(box.low, np.float32), box.shape).reshape(-1))
            highs.append(np.broadcast_to(np.asarray(box.high, np.float32), box.shape).reshape(-1))
            at += size
        self.space = gymnasium.spaces.Box(np.concatenate(lows), np.concatenate(highs), dtype=np.float32)

    def to_habitat(self, action: Any) -> dict[str, Any]:
        if self.continuous is None:
            index = int(np.asarray(action).reshape(-1)[0])
            if not 0 <= index < len(self.names):
                raise ValueError(f"action {index} is not in [0, {len(self.names)})")
            return {"action": self.names[index]}
        box = self.space
        flat = np.clip(np.asarray(action, np.float32).reshape(-1), box.low, box.high)
        # one-number arguments go as floats (habitat-lab's velocity actions compute with them as scalars)
        args = {name: float(flat[a]) if b - a == 1 else flat[a:b].reshape(shape)
                for name, a, b, shape in self.arg_slices}
        return {"action": self.continuous, "action_args": args}


def scalar_metrics(metrics: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """habitat-lab's measures as flat float metrics: scalars as they are, dicts of scalars flattened
    (`collisions.count` -> `collisions_count`); arrays (top-down maps) and strings are dropped."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(scalar_metrics(value, name + "_"))
            continue
        if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)) or \
                (isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "biuf"):
            f = float(np.asarray(value).reshape(-1)[0])
            if math.isfinite(f):
                out[name] = f
    return out
