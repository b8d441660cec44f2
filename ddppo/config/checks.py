"""Validation: each field's declared choices and range, then the cross-field rules. Every problem is collected
and named (key, value, fix) before one ConfigError is raised by the loader."""

from __future__ import annotations

import dataclasses
import os

from ddppo.field_metadata import field_problems, required_problems, rule_problems
from ddppo.envs.registry import known_names, section_for
from ddppo.config.schema import Config, RolloutConfig
from ddppo.distributed.placement import spec_problems
from ddppo.user_code import ADVANTAGES, ENCODERS


def declared_problems(obj, prefix: str = "") -> list[str]:
    """Every field of `obj` (the whole config, a section) outside the choices or range its metadata declares."""
    leaves = [f for f in dataclasses.fields(obj) if not dataclasses.is_dataclass(getattr(obj, f.name))]
    out = field_problems(obj, leaves, prefix)
    for f in dataclasses.fields(obj):
        if dataclasses.is_dataclass(getattr(obj, f.name)):
            out += declared_problems(getattr(obj, f.name), f"{prefix}{f.name}.")
    return out


def strategy_problems(r: RolloutConfig, num_workers: int) -> list[str]:
    """What no rollout strategy can run with `num_workers` asynchronous env workers (0: in-process envs); the
    rollout factory applies the same rules to the envs it is given."""
    p = []
    if r.mode == "variable" and num_workers == 0:
        p.append("rollout.mode=variable steps envs asynchronously in worker processes: set env.num_workers > 0 "
                 "(env.num_workers=env.num_envs lets every env run at its own speed)")
    if r.overlap and r.mode == "variable":
        p.append("rollout.overlap=true applies to rollout.mode=fixed only (variable mode overlaps stepping and "
                 "inference by itself): set rollout.overlap=false")
    elif r.overlap and num_workers < 2:
        p.append(f"rollout.overlap=true needs env.num_workers >= 2 (two halves of the workers step in turn; "
                 f"got {num_workers}): set env.num_workers=2 or more, or rollout.overlap=false")
    if r.overlap_learning and r.mode == "variable" and r.idle_envs == "wait":
        p.append("rollout.overlap_learning=true collects the next rollout while the learner runs, so no env waits "
                 "for the new policy as rollout.idle_envs=wait asks: set rollout.idle_envs=step, or "
                 "rollout.overlap_learning=false")
    return p


def _rollout_mode_problems(cfg: Config) -> list[str]:
    """The rollout strategies' own limits, and what variable mode refuses because it assumes lockstep rollouts."""
    p = strategy_problems(cfg.rollout, cfg.env.num_workers)
    if cfg.rollout.mode == "variable" and cfg.ppo.kl_ref.checkpoint:
        p.append("rollout.mode=variable cannot run ppo.kl_ref.checkpoint: the reference policy carries its recurrent "
                 "state across equal-length rollouts; use rollout.mode=fixed")
    return p


def _estimator_problems(cfg: Config) -> list[str]:
    """The rules of the advantage estimator ppo.advantage names, its own (`config_problems`; the registry imports
    the estimator's module, a layer above the config); none when the name itself is refused."""
    if ADVANTAGES.problem(cfg.ppo.advantage, "ppo.advantage") is not None:
        return []  # declared_problems names it
    estimator = ADVANTAGES.get(cfg.ppo.advantage, "ppo.advantage")
    try:
        return list(estimator.config_problems(cfg))
    except Exception as err:  # a user's estimator failed on the config: its error, in one line, as a problem
        return [f"ppo.advantage={cfg.ppo.advantage!r}: its config_problems raised {type(err).__name__}: {err} "
                f"(fix the estimator's config_problems in its module)"]


def _normalize_problems(cfg: Config) -> list[str]:
    """What observation/reward normalisation and a critic of its own cannot run with (explicit settings; `auto`
    resolves off where they do not apply)."""
    p, n, pol = [], cfg.normalize, cfg.policy
    if n.obs == "on" and pol.architecture.startswith("habitat_baselines"):
        p.append(f"normalize.obs=on needs policy.architecture=ddppo ({pol.architecture} keeps habitat-baselines' "
                 f"input scaling): set normalize.obs=off")
    if pol.critic == "separate" and pol.architecture != "ddppo":
        p.append(f"policy.critic=separate needs policy.architecture=ddppo ({pol.architecture} shares one trunk, as "
                 f"habitat-baselines does): set policy.critic=shared")
    for key, value, default in (("init", pol.init, "orthogonal"), ("activation", pol.activation, "relu")):
        if value != default and pol.architecture != "ddppo":
            p.append(f"policy.{key}={value} needs policy.architecture=ddppo ({pol.architecture} builds habitat-"
                     f"baselines' network as it is): set policy.{key}={default}")
    if pol.critic == "separate" and pol.rnn_type != "none":
        p.append(f"policy.critic=separate needs policy.rnn_type=none (got {pol.rnn_type}): set policy.rnn_type=none "
                 f"or policy.critic=shared")
    if n.update == "step" and cfg.rollout.mode != "fixed":
        p.append("normalize.update=step needs rollout.mode=fixed (variable mode stages its envs' observations "
                 "apart from the acting path that normalises them): set normalize.update=rollout or "
                 "rollout.mode=fixed")
    if n.update == "step" and cfg.ppo.kl_ref.checkpoint:
        p.append("normalize.update=step cannot run with ppo.kl_ref.checkpoint (the reference policy would see the "
                 "observations the acting path already normalised): set normalize.update=rollout")
    if n.reward == "on" and cfg.rollout.overlap_learning:
        p.append("normalize.reward=on cannot run with rollout.overlap_learning=true (its statistics are merged over "
                 "the ranks while the learner thread all-reduces): set normalize.reward=off or "
                 "rollout.overlap_learning=false")
    return p


def _warmup_problems(cfg: Config) -> list[str]:
    """What the fine-tuning warm-ups need: a critic to warm up, a checkpoint whose critic is reset."""
    p, ppo = [], cfg.ppo
    if ppo.reset_critic and not cfg.checkpoint.path:
        p.append("ppo.reset_critic=true re-initialises the critic of the policy checkpoint.path names: set "
                 "checkpoint.path, or ppo.reset_critic=false")
    if ADVANTAGES.problem(ppo.advantage, "ppo.advantage") is None and not ADVANTAGES.get(
            ppo.advantage, "ppo.advantage").critic:
        for key, value, off in (("critic_warmup_updates", ppo.critic_warmup_updates, "0"),
                                ("reset_critic", str(ppo.reset_critic).lower(), "false")):
            if value not in (0, "false"):
                p.append(f"ppo.{key}={value} needs a critic, which ppo.advantage={ppo.advantage} has not: set "
                         f"ppo.{key}={off}, or ppo.advantage=gae")
    return p


def _reward_problems(cfg: Config) -> list[str]:
    """A reward model's keys without a model, or a model that cannot be named."""
    r, p = cfg.reward, []
    if not r.model:
        unused = [k for k, v in (("reward.weights", r.weights), ("reward.kwargs", r.kwargs)) if v]
        if unused:
            p.append(f"{' and '.join(unused)} set without reward.model: name the model (reward.model=MODULE:NAME) "
                     f"or leave them empty")
        return p
    module, _, name = r.model.rpartition(":")
    if not module or not name.isidentifier():
        p.append(f"reward.model={r.model!r} must be MODULE:NAME (a torch module class or factory NAME in MODULE, "
                 f"a .py file in your working directory)")
    if r.weights and not os.path.isfile(r.weights):
        p.append(f"reward.weights={r.weights!r}: no such file (save the model's state dict there, or leave it empty)")
    return p


def _transformer_problems(cfg: Config) -> list[str]:
    """What policy.transformer cannot build or would waste, with rnn_type=transformer."""
    pol, t = cfg.policy, cfg.policy.transformer
    if pol.rnn_type != "transformer":
        return []
    p = []
    if t.heads > 0 and (pol.hidden_size % t.heads or (pol.hidden_size // t.heads) % 2):
        p.append(f"policy.transformer.heads={t.heads} must divide policy.hidden_size={pol.hidden_size} into an even "
                 f"head width (rotary pairs): pick heads so that hidden_size / heads is even")
    section = section_for(cfg.env.name)
    limit = getattr(getattr(cfg.env, section), "max_episode_steps", 0) if section else 0
    if limit > 0 and t.context > limit:
        p.append(f"policy.transformer.context={t.context} is longer than an episode (env.{section}.max_episode_steps="
                 f"{limit}): its cache would hold steps that never come; set policy.transformer.context={limit} or "
                 f"less")
    return p


def _encoder_weights_problems(cfg: Config) -> list[str]:
    """policy.encoder_weights and policy.freeze_encoder apply to a library image encoder (LIBRARY:NAME) only, and
    a frozen one needs its weights."""
    p, pol = [], cfg.policy
    library = ENCODERS.library_of(pol.image_encoder)
    if pol.encoder_weights and library is None:
        p.append(f"policy.encoder_weights={pol.encoder_weights} needs a library image encoder (policy.image_encoder="
                 f"torchvision:NAME | timm:NAME | open_clip:NAME, got {pol.image_encoder}): set one, or leave "
                 f"policy.encoder_weights empty")
    if pol.freeze_encoder and not pol.encoder_weights:
        p.append("policy.freeze_encoder=true needs policy.encoder_weights=FILE (a frozen encoder keeps its random "
                 "initialisation): set policy.encoder_weights, or policy.freeze_encoder=false")
    if (pol.encoder_weights or library is not None) and pol.architecture.startswith("habitat_baselines"):
        p.append(f"policy.image_encoder={pol.image_encoder} and policy.encoder_weights need policy.architecture="
                 f"ddppo ({pol.architecture} builds habitat-baselines' network as it is): set "
                 f"policy.architecture=ddppo")
    return p


def problems(cfg: Config) -> list[str]:
    """Every cross-field and range problem of `cfg`, each naming key, value and fix."""
    p = declared_problems(cfg)
    p.extend(_estimator_problems(cfg))
    p.extend(_rollout_mode_problems(cfg))
    p.extend(_normalize_problems(cfg))
    p.extend(_warmup_problems(cfg))
    p.extend(_reward_problems(cfg))
    p.extend(_transformer_problems(cfg))
    p.extend(_encoder_weights_problems(cfg))
    p.extend(spec_problems(dataclasses.asdict(cfg.placement)))  # its ranges meet the world size at start-up
    if cfg.ppo.minibatch_split == "sample" and cfg.policy.rnn_type != "none":
        p.append(f"ppo.minibatch_split=sample needs policy.rnn_type=none (got {cfg.policy.rnn_type}: a policy with "
                 f"memory learns on whole env sequences): set policy.rnn_type=none or ppo.minibatch_split=env")
    elif cfg.ppo.minibatch_split == "sample" and cfg.ppo.num_mini_batch > cfg.steps_per_rank_update:
        p.append(f"ppo.num_mini_batch={cfg.ppo.num_mini_batch} must be at most env.num_envs x rollout.num_steps="
                 f"{cfg.steps_per_rank_update} with ppo.minibatch_split=sample")
    if (cfg.ppo.minibatch_split == "env" and cfg.env.num_envs > 0 and cfg.ppo.num_mini_batch > 0
            and cfg.env.num_envs % cfg.ppo.num_mini_batch):
        p.append(f"ppo.num_mini_batch={cfg.ppo.num_mini_batch} must divide env.num_envs={cfg.env.num_envs} "
                 f"(minibatches are split by environment)")
    if cfg.env.num_workers > 0 and cfg.env.num_envs % cfg.env.num_workers:
        p.append(f"env.num_workers={cfg.env.num_workers} must divide env.num_envs={cfg.env.num_envs}")
    if any(not isinstance(n, int) or n <= 0 for n in cfg.policy.resnet_layers) or not cfg.policy.resnet_layers:
        p.append(f"policy.resnet_layers={list(cfg.policy.resnet_layers)} must be a non-empty list of positive ints")
    section = section_for(cfg.env.name)
    if section is None:
        p.append(f"env.name={cfg.env.name!r} is not a known environment; use one of {', '.join(known_names())}")
    else:
        options = getattr(cfg.env, section)  # the chosen environment's: what it requires, its rules across fields
        p.extend(f"env.{section}.{msg}" for msg in required_problems(options) + rule_problems(options))
    return p
