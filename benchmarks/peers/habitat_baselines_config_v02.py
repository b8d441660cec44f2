"""One ddppo config -> habitat-baselines 0.2.x DD-PPO options (`run.py ... KEY VALUE ...`), and its logs read back.

`MAPPING` is the documented table (docs/guides/from-habitat-baselines.md, "Running both side by side"): each row names the ddppo key,
the habitat-baselines key it sets and how. Settings with no counterpart that would change what is learned are
refused by `unmappable` (one line naming the key), never silently dropped.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Callable

from ddppo.errors import ConfigError
from ddppo.interop.habitat_checkpoint import POLICY_NAMES
from ddppo.model.habitat_baselines import backbone_name

PPO = "RL.PPO."
SIM = "TASK_CONFIG.SIMULATOR."
DEPTH = SIM + "DEPTH_SENSOR."


def _p(cfg: Any, path: str) -> Any:
    obj = cfg
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _same(key: str) -> Callable[[Any], Any]:
    return lambda cfg: _p(cfg, key)


# (ddppo key, habitat-baselines key, value from the ddppo config)
MAPPING: list[tuple[str, str, Callable[[Any], Any]]] = [
    ("env.num_envs", "NUM_ENVIRONMENTS", _same("env.num_envs")),
    ("run.seed", "TASK_CONFIG.SEED", _same("run.seed")),
    ("run.torch_threads", "FORCE_TORCH_SINGLE_THREADED (+ OMP_NUM_THREADS in its environment)",
     lambda c: c.run.torch_threads == 1),
    ("env.habitat.gpu_device_id", "SIMULATOR_GPU_ID", _same("env.habitat.gpu_device_id")),
    ("env.habitat.dataset", "TASK_CONFIG.DATASET.DATA_PATH ({split} in place of the split folder) + SPLIT",
     lambda c: None),
    ("env.habitat.scenes_dir", "TASK_CONFIG.DATASET.SCENES_DIR", _same("env.habitat.scenes_dir")),
    ("env.habitat.rgb", "SENSORS", lambda c: ["RGB_SENSOR", "DEPTH_SENSOR"] if c.env.habitat.rgb else ["DEPTH_SENSOR"]),
    ("env.habitat.max_episode_steps", "TASK_CONFIG.ENVIRONMENT.MAX_EPISODE_STEPS",
     _same("env.habitat.max_episode_steps")),
    ("env.habitat.shuffle", "TASK_CONFIG.ENVIRONMENT.ITERATOR_OPTIONS.SHUFFLE", _same("env.habitat.shuffle")),
    ("env.habitat.success_distance", "TASK_CONFIG.TASK.SUCCESS.SUCCESS_DISTANCE",
     _same("env.habitat.success_distance")),
    ("env.habitat.slack_reward", "TASK_CONFIG.TASK.SLACK_REWARD", _same("env.habitat.slack_reward")),
    ("env.habitat.success_reward", "TASK_CONFIG.TASK.SUCCESS_REWARD", _same("env.habitat.success_reward")),
    ("env.habitat.forward_step", SIM + "FORWARD_STEP_SIZE", _same("env.habitat.forward_step")),
    ("env.habitat.turn_angle", SIM + "TURN_ANGLE", lambda c: int(round(c.env.habitat.turn_angle))),
    ("env.habitat.depth_width", DEPTH + "WIDTH", _same("env.habitat.depth_width")),
    ("env.habitat.depth_height", DEPTH + "HEIGHT", _same("env.habitat.depth_height")),
    ("env.habitat.min_depth", DEPTH + "MIN_DEPTH", _same("env.habitat.min_depth")),
    ("env.habitat.max_depth", DEPTH + "MAX_DEPTH", _same("env.habitat.max_depth")),
    ("env.habitat.normalize_depth", DEPTH + "NORMALIZE_DEPTH", _same("env.habitat.normalize_depth")),
    ("env.habitat.hfov", DEPTH + "HFOV (and RGB_SENSOR.HFOV)", lambda c: int(round(c.env.habitat.hfov))),
    ("env.habitat.sensor_height", DEPTH + "POSITION [0, h, 0] (and RGB_SENSOR's)",
     lambda c: [0.0, c.env.habitat.sensor_height, 0.0]),
    ("env.habitat.rgb_width", SIM + "RGB_SENSOR.WIDTH", _same("env.habitat.rgb_width")),
    ("env.habitat.rgb_height", SIM + "RGB_SENSOR.HEIGHT", _same("env.habitat.rgb_height")),
    ("env.habitat.agent_height", SIM + "AGENT_0.HEIGHT", _same("env.habitat.agent_height")),
    ("env.habitat.agent_radius", SIM + "AGENT_0.RADIUS", _same("env.habitat.agent_radius")),
    ("env.habitat.allow_sliding", SIM + "HABITAT_SIM_V0.ALLOW_SLIDING", _same("env.habitat.allow_sliding")),
    ("rollout.num_steps", PPO + "num_steps", _same("rollout.num_steps")),
    ("ppo.lr", PPO + "lr", _same("ppo.lr")),
    ("ppo.lr_schedule", PPO + "use_linear_lr_decay", lambda c: c.ppo.lr_schedule == "linear"),
    ("ppo.adam_eps", PPO + "eps", _same("ppo.adam_eps")),
    ("ppo.clip", PPO + "clip_param", _same("ppo.clip")),
    ("ppo.epochs", PPO + "ppo_epoch", _same("ppo.epochs")),
    ("ppo.num_mini_batch", PPO + "num_mini_batch", _same("ppo.num_mini_batch")),
    ("ppo.value_coef", PPO + "value_loss_coef", _same("ppo.value_coef")),
    ("ppo.entropy_coef", PPO + "entropy_coef", _same("ppo.entropy_coef")),
    ("ppo.max_grad_norm", PPO + "max_grad_norm", _same("ppo.max_grad_norm")),
    ("ppo.gamma", PPO + "gamma", _same("ppo.gamma")),
    ("ppo.gae_lambda", PPO + "tau (use_gae True)", _same("ppo.gae_lambda")),
    ("ppo.normalize_advantage", PPO + "use_normalized_advantage", _same("ppo.normalize_advantage")),
    ("preemption.sync_frac", "RL.DDPPO.sync_frac", _same("preemption.sync_frac")),
    ("policy.architecture", "RL.POLICY.name", lambda c: POLICY_NAMES[c.policy.architecture]),
    ("policy.hidden_size", PPO + "hidden_size", _same("policy.hidden_size")),
    ("policy.rnn_type", "RL.DDPPO.rnn_type", lambda c: c.policy.rnn_type.upper()),
    ("policy.rnn_layers", "RL.DDPPO.num_recurrent_layers", _same("policy.rnn_layers")),
    ("policy.resnet_layers + resnet_bottleneck", "RL.DDPPO.backbone",
     lambda c: backbone_name(c.policy) or "resnet50"),
]
# Keys set directly by MAPPING's callable are the second column's first word; these rows set more than one key.
_SPLIT = {"env.habitat.hfov": [DEPTH + "HFOV", SIM + "RGB_SENSOR.HFOV"],
          "env.habitat.sensor_height": [DEPTH + "POSITION", SIM + "RGB_SENSOR.POSITION"],
          "ppo.gae_lambda": [PPO + "tau"], "run.torch_threads": ["FORCE_TORCH_SINGLE_THREADED"],
          "env.habitat.dataset": []}
FIXED = {PPO + "use_gae": True, "RL.DDPPO.pretrained": False, "RL.DDPPO.pretrained_encoder": False,
         "RL.DDPPO.train_encoder": True, "RL.DDPPO.reset_critic": False, "VIDEO_OPTION": [], "NUM_UPDATES": -1,
         "NUM_CHECKPOINTS": -1, "TASK_CONFIG.DATASET.CONTENT_SCENES": ["*"]}


def unmappable(cfg: Any) -> list[str]:
    """What in this ddppo config habitat-baselines 0.2.x cannot be set to (each a 'key=value: why' line)."""
    out = []
    if cfg.env.name != "habitat_pointnav" or cfg.env.habitat.backend != "habitat":
        out.append(f"env.name={cfg.env.name!r} backend={cfg.env.habitat.backend!r}: the benchmark runs "
                   f"habitat_pointnav on the real simulator (env.habitat.backend=habitat)")
    if cfg.policy.architecture not in POLICY_NAMES:
        out.append(f"policy.architecture={cfg.policy.architecture!r}: use habitat_baselines or "
                   f"habitat_baselines_simple (habitat-baselines' own policies)")
    elif cfg.policy.architecture == "habitat_baselines" and cfg.policy.resnet_base_width != 32:
        out.append(f"policy.resnet_base_width={cfg.policy.resnet_base_width}: habitat-baselines 0.2.x builds 32")
    if cfg.env.habitat.distance_reward_scale != 1.0:
        out.append("env.habitat.distance_reward_scale: habitat-baselines' NavRLEnv has no such scale (use 1.0)")
    if cfg.ppo.advantage != "gae" or cfg.ppo.kl_ref.checkpoint:
        out.append("ppo.advantage / ppo.kl_ref: habitat-baselines has GAE and no KL term only")
    if not cfg.ppo.clip_value_loss:
        out.append("ppo.clip_value_loss=false: habitat-baselines 0.2.x always clips the value loss")
    if not dataset_template(cfg.env.habitat.dataset):
        out.append(f"env.habitat.dataset={cfg.env.habitat.dataset!r}: pass .../<split>/<split>.json.gz "
                   f"(habitat-baselines reads DATA_PATH with a {{split}} placeholder)")
    return out


def dataset_template(path: str) -> tuple[str, str] | None:
    """(DATA_PATH with {split}, split) for `.../<split>/<split>.json.gz` (or its folder), else None."""
    p = Path(path)
    if p.is_dir() or not p.name.endswith(".json.gz"):
        p = p / f"{p.name}.json.gz"
    split = p.parent.name
    if p.name != f"{split}.json.gz":
        return None
    return str(p.parent.parent / "{split}" / "{split}.json.gz"), split


def options(cfg: Any, out_dir: Path, total_steps: int, log_interval: int) -> list[str]:
    """habitat-baselines' `KEY VALUE` list for this ddppo config (train run writing into `out_dir`)."""
    bad = unmappable(cfg)
    if bad:
        raise ConfigError("cannot run habitat-baselines with this config: " + "; ".join(bad))
    values: dict[str, Any] = dict(FIXED)
    for ddppo_key, hb_key, get in MAPPING:
        keys = _SPLIT.get(ddppo_key, [hb_key.split(" ")[0]])
        for key in keys:
            values[key] = get(cfg)
    template, split = dataset_template(cfg.env.habitat.dataset)
    values.update({"TASK_CONFIG.DATASET.DATA_PATH": template, "TASK_CONFIG.DATASET.SPLIT": split,
                   "RL.DDPPO.distrib_backend": "NCCL" if str(cfg.dist.device).startswith("cuda") else "GLOO",
                   "TOTAL_NUM_STEPS": float(total_steps), "LOG_INTERVAL": log_interval,
                   "CHECKPOINT_INTERVAL": total_steps // (cfg.env.num_envs * cfg.rollout.num_steps),
                   "CHECKPOINT_FOLDER": str(out_dir / "ckpt"), "TENSORBOARD_DIR": str(out_dir / "tb"),
                   "LOG_FILE": str(out_dir / "train.log"), "EVAL_CKPT_PATH_DIR": str(out_dir / "ckpt")})
    return [item for key, value in values.items() for item in (key, _yacs(value))]


def _yacs(value: Any) -> str:
    """A value as yacs' merge_from_list parses it (literal_eval of the string)."""
    if isinstance(value, str):
        return value
    return repr(value)


# --------------------------------------------------------------------------------------------- reading its logs
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) (.*)$")
# a logged update, (update, frames): 0.2.x's trainer ("update: N\tenv-time: ...\tframes: F")
_FRAMES = (re.compile(r"update: (\d+)\tenv-time: [\d.]+s\tpth-time: [\d.]+s\tframes: (\d+)"),)
_WINDOW = re.compile(r"Average window size: \d+\s+(.*)$")
_EVAL = re.compile(r"Average episode (\w+): ([-\d.eE+naninf]+)")


def read_train_log(path: Path, frames: tuple[re.Pattern, ...] = _FRAMES) -> list[dict[str, float]]:
    """One record per logged update: update, env_steps, wall_time (s since the epoch), and the window means
    (success, spl, reward, distance_to_goal) logged after it. `frames`: the patterns of a logged update (groups:
    update, frames), the first that matches a line counts (habitat_baselines_config_v03 passes 0.3.x's two
    trainers')."""
    records: list[dict[str, float]] = []
    for line in path.read_text(errors="replace").splitlines():
        m = _STAMP.match(line)
        if not m:
            continue
        stamp = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
        body = m.group(3)
        found = next((f for f in (p.search(body) for p in frames) if f is not None), None)
        if found is not None:
            records.append({"update": int(found.group(1)), "env_steps": int(found.group(2)), "wall_time": stamp})
        elif (w := _WINDOW.search(body)) is not None and records:
            for pair in w.group(1).split("  "):
                key, _, value = pair.partition(": ")
                if key.strip() and value.strip():
                    records[-1][key.strip()] = float(value)
    return records


def read_eval_log(path: Path) -> dict[str, float]:
    """habitat-baselines' evaluator's 'Average episode KEY: VALUE' lines."""
    return {m.group(1): float(m.group(2)) for m in _EVAL.finditer(path.read_text(errors="replace"))}
