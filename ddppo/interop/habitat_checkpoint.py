"""habitat-baselines DD-PPO checkpoints: the key mapping both ways, reading, compatibility (policy.architecture=habitat_baselines: PointNavResNetPolicy;
habitat_baselines_simple: PointNavBaselinePolicy).

habitat-baselines' trainer saves `{"state_dict", "config", "extra_state": {"step", ...}}` (0.2.x releases:
keys prefixed `actor_critic.`, a yacs config; 0.3.x: unprefixed, an OmegaConf config). The policies' parameter
names are the same in ddppo's habitat_baselines architectures (ddppo/model/habitat_baselines*.py), so
`from_habitat_keys` / `to_habitat_keys` below are the one key mapping. Files are read with
ddppo/interop/safe_unpickle.py: nothing in them is executed and habitat need not be installed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from ddppo.interop import safe_unpickle
from ddppo.errors import CheckpointError

OLD_PREFIX = "actor_critic."
FORMAT_NAME = "habitat-baselines"
_MARKER = "net.visual_encoder.backbone.conv1.0.weight"
_SIMPLE_MARKER = "net.visual_encoder.cnn.0.weight"  # PointNavBaselinePolicy's first conv
POLICY_NAMES = {"habitat_baselines": "PointNavResNetPolicy", "habitat_baselines_simple": "PointNavBaselinePolicy"}
LAYOUTS = ("0.3", "0.2")  # export key layouts: unprefixed (habitat-baselines >= 0.3), `actor_critic.` (0.2.x)

# ------------------------------------------------------------------ the key mapping
def from_habitat_keys(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """habitat-baselines policy state_dict (either format) -> ddppo's habitat_baselines Policy state_dict."""
    if state_dict and all(k.startswith(OLD_PREFIX) for k in state_dict):
        return {k[len(OLD_PREFIX):]: v for k, v in state_dict.items()}
    return dict(state_dict)


def to_habitat_keys(state_dict: dict[str, torch.Tensor], layout: str = "0.3") -> dict[str, torch.Tensor]:
    """ddppo's habitat_baselines Policy state_dict -> habitat-baselines': layout "0.3" unprefixed (what its
    policy's load_state_dict takes), "0.2" prefixed `actor_critic.` (what 0.2.x's PPO agent's takes)."""
    if layout not in LAYOUTS:
        raise ValueError(f"habitat-baselines layout {layout!r}: one of {LAYOUTS}")
    return {(OLD_PREFIX + k if layout == "0.2" else k): v for k, v in state_dict.items()}


def is_habitat_state_dict(state_dict: Any) -> bool:
    if not isinstance(state_dict, dict):
        return False
    keys = from_habitat_keys(state_dict)
    return _MARKER in keys or _SIMPLE_MARKER in keys


# ----------------------------------------------------------------------- reading
def summary(state_dict: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The sizes a habitat-baselines policy state_dict fixes, under ddppo's config key names."""
    sd = from_habitat_keys(state_dict)
    if _SIMPLE_MARKER in sd:
        return {"policy.architecture": "habitat_baselines_simple",
                "policy.hidden_size": int(sd["critic.fc.weight"].shape[1]), "policy.rnn_type": "gru",
                "policy.rnn_layers": 1, "image channels": int(sd[_SIMPLE_MARKER].shape[1]),
                "actions": int(sd["action_distribution.linear.weight"].shape[0])}
    layers = sorted({int(m.group(1)) for k in sd if (m := re.match(r"net\.state_encoder\.rnn\.weight_hh_l(\d+)$", k))})
    hidden = int(sd["critic.fc.weight"].shape[1]) if "critic.fc.weight" in sd else None
    rnn_rows = int(sd["net.state_encoder.rnn.weight_hh_l0"].shape[0]) if layers else 0
    bottleneck = "net.visual_encoder.backbone.layer1.0.convs.6.weight" in sd
    blocks = [len({k.split(".")[4] for k in sd if k.startswith(f"net.visual_encoder.backbone.layer{i}.")})
              for i in range(1, 5)]
    return {
        "policy.architecture": "habitat_baselines",
        "policy.hidden_size": hidden,
        "policy.rnn_type": {4: "lstm", 3: "gru"}.get(rnn_rows // hidden) if hidden else None,
        "policy.rnn_layers": len(layers),
        "policy.resnet_base_width": int(sd[_MARKER].shape[0]),
        "policy.resnet_layers": blocks,
        "policy.resnet_bottleneck": bottleneck,
        "image channels": int(sd[_MARKER].shape[1]),
        "actions": int(sd["action_distribution.linear.weight"].shape[0]),
    }


def config_values(config: Any) -> dict[str, Any]:
    """Sizes a habitat-baselines config (as plain data) states, under ddppo's key names, where present."""
    out: dict[str, Any] = {}
    rl = _get(config, "habitat_baselines", "rl") or _get(config, "RL") or {}
    name = _get(rl, "policy", "name") or _get(rl, "POLICY", "name")
    if name in POLICY_NAMES.values():
        out["policy.architecture"] = next(k for k, v in POLICY_NAMES.items() if v == name)
    for key, path in (("policy.hidden_size", ("ppo", "hidden_size")),
                      ("policy.rnn_layers", ("ddppo", "num_recurrent_layers")),
                      ("policy.rnn_type", ("ddppo", "rnn_type")), ("backbone", ("ddppo", "backbone"))):
        value = _get(rl, *path) or _get(rl, path[0].upper(), path[1])  # 0.3.x, or 0.2.x (RL.PPO.hidden_size)
        if value is not None:
            out[key] = value.lower() if isinstance(value, str) else value
    agents = _get(config, "habitat", "simulator", "agents") or {}
    for agent in agents.values() if isinstance(agents, dict) else []:
        depth = _get(agent, "sim_sensors", "depth_sensor")
        if isinstance(depth, dict):
            out["env.habitat.depth_width"], out["env.habitat.depth_height"] = depth.get("width"), depth.get("height")
        break
    actions = _get(config, "habitat", "task", "actions")
    if isinstance(actions, dict) and actions:
        out["actions"] = len(actions)
    return {k: v for k, v in out.items() if v is not None}


def _get(obj: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(obj, dict) or p not in obj:
            return None
        obj = obj[p]
    return obj


def is_habitat_file(data: Any) -> bool:
    return isinstance(data, dict) and "state_dict" in data and is_habitat_state_dict(data["state_dict"])


def read(path: str | Path) -> dict[str, Any]:
    """A habitat-baselines checkpoint as {"model", "summary", "config_values", "step"}; CheckpointError if it
    is not one or asks to run code."""
    try:
        data = safe_unpickle.load(path)
    except safe_unpickle.UnsafePickleError as err:
        raise CheckpointError(f"{str(path)!r} is refused: {err}") from None
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{str(path)!r} is not a readable checkpoint ({err})") from None
    if not is_habitat_file(data):
        raise CheckpointError(f"{str(path)!r} is neither a ddppo nor a habitat-baselines checkpoint "
                              f"(no state_dict of a PointNavResNetPolicy or PointNavBaselinePolicy)")
    bad = [k for k, v in data["state_dict"].items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise CheckpointError(f"{str(path)!r}: state_dict entries that are not tensors: {bad[:3]}")
    model = {k: v.clone() for k, v in from_habitat_keys(data["state_dict"]).items()}
    extra = safe_unpickle.plain(data.get("extra_state")) or {}
    return {"model": model, "summary": summary(model), "config_values": config_values(safe_unpickle.plain(
        data.get("config"))), "step": int(extra.get("step", 0)) if isinstance(extra, dict) else 0}


def problems(info: Any, cfg: Any) -> list[str]:
    """Where a habitat-baselines checkpoint (`info`: its ForeignCheckpoint, ddppo/interop/foreign.py) and this
    run's config disagree, naming the keys (its tensors against the model: checkpoint.tensor_problems)."""
    from ddppo.config import get_key

    out = []
    for key, value in {**info.config_values, **info.summary}.items():
        if key.startswith(("policy.", "env.")):
            try:
                mine = get_key(cfg, key)
            except (AttributeError, KeyError):
                continue
            mine = list(mine) if isinstance(mine, (list, tuple)) else mine
            if mine != value:
                out.append(f"{key}: checkpoint {value!r}, this config {mine!r}")
    return out
