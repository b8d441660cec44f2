"""One ddppo config -> a habitat-baselines 0.3.x Hydra experiment config (DD-PPO or VER), and its logs read back.

habitat-baselines 0.3.x is configured by Hydra under two namespaces, `habitat.*` (the task, simulator, dataset)
and `habitat_baselines.*` (the trainer); its PyPI wheel ships no experiment YAML (habitat-lab's source tree has
`habitat_baselines/config/pointnav/ddppo_pointnav.yaml`), so `write_exp_config` writes one per run: the same
defaults list as that file and as habitat-lab's `benchmark/nav/pointnav/pointnav_base.yaml` (habitat's base config,
its PointNav task, an agent with a depth sensor, and an RGB one when env.habitat.rgb), every mapped value under it,
and `habitat_baselines.trainer_name` ddppo or ver. Its own loader (`habitat_baselines.run --config-path ...
--config-name ...`) then type-checks every key against its structured configs.

`MAPPING` is the documented table, as in habitat_baselines_config_v02.py (0.2.x): ddppo key, 0.3.x key(s), value.
What 0.3.x cannot be set to is refused by `unmappable` (one line naming the key), never silently dropped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from ddppo.benchmarks.peers import habitat_baselines_config_v02 as config_v02
from ddppo.errors import ConfigError
from ddppo.interop.habitat_checkpoint import POLICY_NAMES
from ddppo.model.habitat_baselines import backbone_name

HB = "habitat_baselines."
PPO = HB + "rl.ppo."
DDPPO = HB + "rl.ddppo."
SIM = "habitat.simulator."
AGENT = SIM + "agents.main_agent."
DEPTH = AGENT + "sim_sensors.depth_sensor."
RGB = AGENT + "sim_sensors.rgb_sensor."
TRAINERS = {"hb-ddppo": "ddppo", "hb-ver": "ver"}  # bench side -> habitat_baselines.trainer_name
_same = config_v02._same

# (ddppo key, habitat-baselines 0.3.x key(s), value from the ddppo config); rows naming more than one key set each
MAPPING: list[tuple[str, list[str], Callable[[Any], Any]]] = [
    ("env.num_envs", [HB + "num_environments"], _same("env.num_envs")),
    ("run.seed", ["habitat.seed"], _same("run.seed")),
    ("run.torch_threads", [HB + "force_torch_single_threaded"], lambda c: c.run.torch_threads == 1),
    ("env.habitat.gpu_device_id", [SIM + "habitat_sim_v0.gpu_device_id"], _same("env.habitat.gpu_device_id")),
    ("env.habitat.scenes_dir", ["habitat.dataset.scenes_dir"], _same("env.habitat.scenes_dir")),
    ("env.habitat.max_episode_steps", ["habitat.environment.max_episode_steps"],
     _same("env.habitat.max_episode_steps")),
    ("env.habitat.shuffle", ["habitat.environment.iterator_options.shuffle"], _same("env.habitat.shuffle")),
    ("env.habitat.success_distance", ["habitat.task.measurements.success.success_distance"],
     _same("env.habitat.success_distance")),
    ("env.habitat.slack_reward", ["habitat.task.slack_reward"], _same("env.habitat.slack_reward")),
    ("env.habitat.success_reward", ["habitat.task.success_reward"], _same("env.habitat.success_reward")),
    ("env.habitat.forward_step", [SIM + "forward_step_size"], _same("env.habitat.forward_step")),
    ("env.habitat.turn_angle", [SIM + "turn_angle"], lambda c: int(round(c.env.habitat.turn_angle))),
    ("env.habitat.depth_width", [DEPTH + "width"], _same("env.habitat.depth_width")),
    ("env.habitat.depth_height", [DEPTH + "height"], _same("env.habitat.depth_height")),
    ("env.habitat.min_depth", [DEPTH + "min_depth"], _same("env.habitat.min_depth")),
    ("env.habitat.max_depth", [DEPTH + "max_depth"], _same("env.habitat.max_depth")),
    ("env.habitat.normalize_depth", [DEPTH + "normalize_depth"], _same("env.habitat.normalize_depth")),
    ("env.habitat.hfov", [DEPTH + "hfov", RGB + "hfov"], lambda c: int(round(c.env.habitat.hfov))),
    ("env.habitat.sensor_height", [DEPTH + "position", RGB + "position"],
     lambda c: [0.0, c.env.habitat.sensor_height, 0.0]),
    ("env.habitat.rgb_width", [RGB + "width"], _same("env.habitat.rgb_width")),
    ("env.habitat.rgb_height", [RGB + "height"], _same("env.habitat.rgb_height")),
    ("env.habitat.agent_height", [AGENT + "height"], _same("env.habitat.agent_height")),
    ("env.habitat.agent_radius", [AGENT + "radius"], _same("env.habitat.agent_radius")),
    ("env.habitat.allow_sliding", [SIM + "habitat_sim_v0.allow_sliding"], _same("env.habitat.allow_sliding")),
    ("rollout.num_steps", [PPO + "num_steps"], _same("rollout.num_steps")),
    ("ppo.lr", [PPO + "lr"], _same("ppo.lr")),
    ("ppo.lr_schedule", [PPO + "use_linear_lr_decay"], lambda c: c.ppo.lr_schedule == "linear"),
    ("ppo.adam_eps", [PPO + "eps"], _same("ppo.adam_eps")),
    ("ppo.clip", [PPO + "clip_param"], _same("ppo.clip")),
    ("ppo.epochs", [PPO + "ppo_epoch"], _same("ppo.epochs")),
    ("ppo.num_mini_batch", [PPO + "num_mini_batch"], _same("ppo.num_mini_batch")),
    ("ppo.value_coef", [PPO + "value_loss_coef"], _same("ppo.value_coef")),
    ("ppo.entropy_coef", [PPO + "entropy_coef"], _same("ppo.entropy_coef")),
    ("ppo.max_grad_norm", [PPO + "max_grad_norm"], _same("ppo.max_grad_norm")),
    ("ppo.gamma", [PPO + "gamma"], _same("ppo.gamma")),
    ("ppo.gae_lambda", [PPO + "tau"], _same("ppo.gae_lambda")),
    ("ppo.normalize_advantage", [PPO + "use_normalized_advantage"], _same("ppo.normalize_advantage")),
    ("ppo.clip_value_loss", [PPO + "use_clipped_value_loss"], _same("ppo.clip_value_loss")),
    ("preemption.sync_frac", [DDPPO + "sync_frac"], _same("preemption.sync_frac")),
    ("policy.architecture", [HB + "rl.policy.main_agent.name"], lambda c: POLICY_NAMES[c.policy.architecture]),
    ("policy.hidden_size", [PPO + "hidden_size"], _same("policy.hidden_size")),
    ("policy.rnn_type", [DDPPO + "rnn_type"], lambda c: c.policy.rnn_type.upper()),
    ("policy.rnn_layers", [DDPPO + "num_recurrent_layers"], _same("policy.rnn_layers")),
    ("policy.resnet_layers + resnet_bottleneck", [DDPPO + "backbone"], lambda c: backbone_name(c.policy) or "resnet50"),
]
FIXED = {PPO + "use_gae": True, PPO + "use_double_buffered_sampler": False, DDPPO + "pretrained": False,
         DDPPO + "pretrained_encoder": False, DDPPO + "train_encoder": True, DDPPO + "reset_critic": False,
         HB + "verbose": False, HB + "total_num_steps": -1.0, HB + "num_checkpoints": -1,
         HB + "eval.video_option": [], "habitat.dataset.content_scenes": ["*"]}
# VER as habitat-baselines 0.3.x ships it (variable experience, 2 inference workers), learning overlapped with
# the next rollout: the counterpart of ddppo's rollout.overlap_learning
VER = {HB + "rl.ver.variable_experience": True, HB + "rl.ver.num_inference_workers": 2,
       HB + "rl.ver.overlap_rollouts_and_learn": True}
DEFAULTS = ["/habitat: habitat_config_base", "/habitat/task: pointnav",
            "/habitat/simulator/sensor_setups@habitat.simulator.agents.main_agent: {agent}",
            "/habitat/dataset/pointnav: habitat_test", "/habitat_baselines: habitat_baselines_rl_config_base",
            "_self_"]


def unmappable(cfg: Any) -> list[str]:
    """What in this ddppo config habitat-baselines 0.3.x cannot be set to (each a 'key=value: why' line)."""
    bad = [line for line in config_v02.unmappable(cfg) if not line.startswith("ppo.clip_value_loss")]
    return [line.replace("habitat-baselines 0.2.x", "habitat-baselines 0.3.x") for line in bad]


def values(cfg: Any, side: str, out_dir: Path, updates: int, log_interval: int) -> dict[str, Any]:
    """Every dotted habitat-baselines 0.3.x key this benchmark sets for `side` (hb-ddppo | hb-ver), training
    `updates` updates into `out_dir` (its one checkpoint on the last)."""
    bad = unmappable(cfg)
    if bad:
        raise ConfigError("cannot run habitat-baselines with this config: " + "; ".join(bad))
    if side not in TRAINERS:
        raise ConfigError(f"side {side!r}: one of {', '.join(TRAINERS)}")
    out: dict[str, Any] = dict(FIXED)
    for ddppo_key, keys, get in MAPPING:
        if not cfg.env.habitat.rgb and any(k.startswith(RGB) for k in keys):
            keys = [k for k in keys if not k.startswith(RGB)]
        for key in keys:
            out[key] = get(cfg)
    template, split = config_v02.dataset_template(cfg.env.habitat.dataset)
    out.update({"habitat.dataset.data_path": template, "habitat.dataset.split": split,
                HB + "trainer_name": TRAINERS[side], HB + "num_updates": updates, HB + "log_interval": log_interval,
                HB + "checkpoint_interval": updates, HB + "checkpoint_folder": str(out_dir / "ckpt"),
                HB + "eval_ckpt_path_dir": str(out_dir / "ckpt"), HB + "tensorboard_dir": str(out_dir / "tb"),
                HB + "video_dir": str(out_dir / "video"), HB + "log_file": str(out_dir / "train.log"),
                DDPPO + "distrib_backend": "NCCL" if str(cfg.dist.device).startswith("cuda") else "GLOO"})
    if side == "hb-ver":
        out.update(VER)
    return out


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def write_exp_config(cfg: Any, side: str, out_dir: Path, updates: int, log_interval: int,
                     extra: dict[str, Any] | None = None) -> Path:
    """`out_dir`/hb_exp.yaml: a primary Hydra config for `habitat_baselines.run --config-path DIR --config-name
    hb_exp` (`extra`: more dotted keys, e.g. the evaluator's)."""
    from omegaconf import OmegaConf

    flat = {**values(cfg, side, out_dir, updates, log_interval), **(extra or {})}
    agent = "rgbd_agent" if cfg.env.habitat.rgb else "depth_agent"
    body = OmegaConf.to_yaml(OmegaConf.create(_nest(flat)))
    defaults = "".join(f"  - {d.format(agent=agent)}\n" for d in DEFAULTS)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "hb_exp.yaml"
    path.write_text(f"# @package _global_\n# written by ddppo bench habitat-baselines ({side})\ndefaults:\n"
                    f"{defaults}\n{body}")
    return path


def command(python: str, exp: Path, evaluate: bool = False) -> list[str]:
    """The habitat-baselines 0.3.x process for an experiment config (Hydra's own output under its folder)."""
    return [python, "-m", "habitat_baselines.run", f"--config-path={exp.parent}", f"--config-name={exp.stem}",
            f"habitat_baselines.evaluate={evaluate}", f"hydra.run.dir={exp.parent / 'hydra'}"]


# --------------------------------------------------------------------------------------------- reading its logs
# its DD-PPO trainer ("Num updates: N\tNum frames F") and VER's report worker ("update: N\tfps: ...\tframes: F")
_FRAMES = (re.compile(r"Num updates: (\d+)\tNum frames (\d+)"),
           re.compile(r"update: (\d+)\tfps: [\d.]+\twindow fps: [-\d.naif]+\tframes: (\d+)"))


def read_train_log(path: Path) -> list[dict[str, float]]:
    """One record per logged update of either 0.3.x trainer (config_v02.read_train_log with their patterns):
    update, env_steps, wall_time (s since the epoch, when it logged the update, after learning), and the window
    means (success, spl, ...) logged after it."""
    return config_v02.read_train_log(path, _FRAMES)


def eval_keys(checkpoint: str, split: str, episodes: int) -> dict[str, Any]:
    """Its evaluator on one checkpoint file, held-out `split`, every episode, with this benchmark's config (not the
    one the checkpoint carries: ddppo's exports carry only the policy's)."""
    return {HB + "eval_ckpt_path_dir": checkpoint, HB + "eval.split": split, HB + "eval.use_ckpt_config": False,
            HB + "test_episode_count": episodes, HB + "load_resume_state_config": False}


_PERF = re.compile(r"trainer\.rollout_collect: ([\d.]+).*trainer\.update_agent: ([\d.]+)")
_VER_PERF = (re.compile(r"policy: rollout: ([\d.]+)ms"), re.compile(r"learner: learn: ([\d.]+)ms"))


def profile(log: Path) -> dict[str, float]:
    """Its own timers at the last logged update, as shares of rollout + learning: DD-PPO's mean rollout_collect and
    update_agent seconds (serial), VER's rollout and learn ms (overlapped: they run at the same time)."""
    text = log.read_text(errors="replace")
    found = _PERF.findall(text)
    if found:
        rollout, learn = map(float, found[-1])
        names = ("rollout (collect)", "learn (update_agent)")
    else:
        both = [p.findall(text) for p in _VER_PERF]
        if not all(both):
            return {}
        rollout, learn = float(both[0][-1]), float(both[1][-1])
        names = ("rollout", "learn (overlapped with rollout)")
    total = rollout + learn or 1.0
    return {names[0]: rollout / total, names[1]: learn / total}
