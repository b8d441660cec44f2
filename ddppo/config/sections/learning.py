"""The config schema's learning sections. How it learns: ppo (and its KL reference), normalize, reward (a reward model)
and imitation."""

from __future__ import annotations

from dataclasses import dataclass, field
from ddppo.field_metadata import doc
from ddppo.user_code import ADVANTAGES


@dataclass(frozen=True)
class KLRefConfig:
    """A KL(pi || pi_ref) penalty towards a frozen reference policy (fine-tuning)."""

    checkpoint: str = field(default="", metadata=doc("checkpoint of the reference policy (\"\" = no KL term)"))
    beta: float = field(default=0.1, metadata=doc("initial KL coefficient", ge=0))
    adaptive: bool = field(default=True, metadata=doc("adapt beta once per update towards target_kl"))
    target_kl: float = field(default=0.01, metadata=doc("adaptive: the KL per update that beta aims for", gt=0))
    tolerance: float = field(default=1.5,
                             metadata=doc("adaptive: raise beta when KL > target*tolerance, lower it when KL < "
                                          "target/tolerance", gt=1))
    rate: float = field(default=2.0, metadata=doc("adaptive: factor beta is multiplied or divided by", gt=1))


@dataclass(frozen=True)
class PPOConfig:
    """The PPO objective and optimiser."""

    lr: float = field(default=2.5e-4, metadata=doc("Adam learning rate", gt=0))
    lr_schedule: str = field(default="constant", metadata=doc("constant | linear (decays to 0 at run.total_env_steps)",
                                                              choices=('constant', 'linear')))
    adam_eps: float = field(default=1e-5, metadata=doc("Adam epsilon", gt=0))
    clip: float = field(default=0.2, metadata=doc("PPO ratio clip", gt=0))
    clip_schedule: str = field(default="constant",
                               metadata=doc("constant | linear (the clip decays to 0 at run.total_env_steps, as RL "
                                            "Zoo's Atari settings; the value clip with it)",
                                            choices=("constant", "linear")))
    clip_value_loss: bool = field(default=True,
                                  metadata=doc("clip the value update to +/- clip around the rollout values"))
    epochs: int = field(default=4, metadata=doc("passes over each rollout", gt=0))
    num_mini_batch: int = field(default=2,
                                metadata=doc("minibatches per epoch, split by environment (must divide env.num_envs)",
                                             gt=0))
    minibatch_split: str = field(default="env",
                                 metadata=doc("env (each minibatch is whole env columns: recurrent policies, "
                                              "num_mini_batch must divide env.num_envs) | sample (samples drawn at "
                                              "random from every step and env, as SB3 and CleanRL; needs "
                                              "policy.rnn_type=none)", choices=("env", "sample")))
    value_coef: float = field(default=0.5, metadata=doc("value loss weight", ge=0))
    entropy_coef: float = field(default=0.01, metadata=doc("entropy bonus weight", ge=0))
    max_grad_norm: float = field(default=0.5, metadata=doc("global grad-norm clip after the all-reduce (0 = off)",
                                                           ge=0))
    gamma: float = field(default=0.99, metadata=doc("discount", ge=0, le=1))
    gae_lambda: float = field(default=0.95, metadata=doc("GAE lambda", ge=0, le=1))
    normalize_advantage: bool = field(default=True,
                                      metadata=doc("standardise advantages over every rank's valid steps (GAE)"))
    normalize_advantage_per: str = field(default="update",
                                         metadata=doc("update (over every rank's valid steps once per update) | "
                                                      "minibatch (over each minibatch's valid steps on this rank, "
                                                      "as SB3 and CleanRL do)", choices=("update", "minibatch")))
    max_skipped_updates: int = field(default=5,
                                     metadata=doc("stop the run after this many consecutive non-finite updates", gt=0))
    kl_ref: KLRefConfig = field(default_factory=KLRefConfig, metadata=doc("KL penalty towards a reference policy"))
    advantage: str = field(default="gae",
                           metadata=doc("gae (critic + GAE) | grpo (critic-free: episode returns normalised within "
                                        "groups) | MODULE:NAME (your own estimator, registered with "
                                        "ddppo.advantage.register_estimator in MODULE, imported from the working "
                                        "directory first: docs/guides/objectives.md)", shape=True,
                                        choices=ADVANTAGES))
    group_size: int = field(default=8,
                            metadata=doc("grpo: envs per group sharing each episode (>= 4; must divide env.num_envs)"))
    critic_warmup_updates: int = field(default=0,
                                       metadata=doc("fine-tuning: the first N updates train the critic alone (the "
                                                    "actor's learning rate 0, its observation normalisation "
                                                    "statistics held: its greedy actions do not change)", ge=0))
    actor_warmup_updates: int = field(default=0,
                                      metadata=doc("fine-tuning: after the critic warm-up the actor's learning rate "
                                                   "ramps linearly from 0 to ppo.lr over this many updates", ge=0))
    reset_critic: bool = field(default=False,
                               metadata=doc("re-initialise the value head when starting from checkpoint.path (a "
                                            "behaviour-cloned policy's untrained critic); not on resume"))


@dataclass(frozen=True)
class NormalizeConfig:
    """Running observation normalisation and reward scaling (SB3's VecNormalize, CleanRL's wrappers), with
    statistics merged over all ranks once per update, saved in checkpoints and frozen in `ddppo eval`."""

    obs: str = field(default="auto",
                     metadata=doc("on | off | auto (on for continuous control: a 1-D Box action space and only "
                                  "vector observations): (x - mean) / sqrt(var + epsilon) per vector observation key, "
                                  "inside the policy; images keep their own [0, 1] scaling", shape=True,
                                  choices=("auto", "on", "off")))
    reward: str = field(default="auto",
                        metadata=doc("on | off | auto (as obs): rewards divided by the running std of the "
                                     "discounted return (ppo.gamma), for training only; episode returns are "
                                     "reported unscaled", choices=("auto", "on", "off")))
    clip_obs: float = field(default=10.0, metadata=doc("normalised observations are clipped to +/- this", gt=0))
    clip_reward: float = field(default=10.0, metadata=doc("scaled rewards are clipped to +/- this", gt=0))
    epsilon: float = field(default=1e-8, metadata=doc("added to the variances before the square root", gt=0))
    update: str = field(default="rollout",
                        metadata=doc("rollout | step: when the statistics the acting path uses change. rollout: "
                                     "once per update, merged over all ranks (observations stay raw in storage and "
                                     "are normalised inside the policy); step: after every env step, as SB3's "
                                     "VecNormalize and CleanRL's wrappers, each rank counting its own steps into the "
                                     "statistics merged at the last update (observations are normalised on the "
                                     "host and stored normalised; needs rollout.mode=fixed)",
                                     choices=("rollout", "step")))


@dataclass(frozen=True)
class RewardConfig:
    """A learned reward model between the envs and the learners (ddppo/rollout/reward_model.py): scored under
    no_grad on the rank's device, one batched call per step, combined with the env's own reward."""

    model: str = field(default="",
                       metadata=doc("MODULE:NAME of a torch module class or factory in your working directory, "
                                    "called as model(obs, actions=, episode_step=, done=) on the rank's envs and "
                                    "returning one reward per env (\"\" = none); a resume with another is refused",
                                    shape=True))
    weights: str = field(default="", metadata=doc("a state dict (.pt) the model loads before the run (\"\" = as "
                                                 "built); a resume with another file or changed contents is "
                                                 "refused", shape=True))
    kwargs: dict = field(default_factory=dict, metadata=doc("keyword arguments the model is built with",
                                                             shape=True))
    mode: str = field(default="step",
                      metadata=doc("step: every step's resulting observation is scored; terminal: only an episode's "
                                   "final observation, once (no per-step reward to hack)",
                                   choices=("step", "terminal"), shape=True))
    env_weight: float = field(default=1.0, metadata=doc("the reward is env_weight x the env's reward + "
                                                       "model_weight x the model's"))
    model_weight: float = field(default=1.0, metadata=doc("see reward.env_weight"))


@dataclass(frozen=True)
class ImitationConfig:
    """`ddppo imitate`: behaviour cloning on a recorded dataset (docs/guides/imitation.md)."""

    data: str = field(default="", metadata=doc("the dataset directory `ddppo record` wrote (its manifest.json)"))
    updates: int = field(default=500, metadata=doc("optimiser steps to train for", gt=0))
    lr: float = field(default=1e-3, metadata=doc("Adam learning rate", gt=0))
    batch_episodes: int = field(default=16, metadata=doc("episodes per rank in each update", gt=0))
    chunk_length: int = field(default=0,
                              metadata=doc("0: back-propagate through whole episodes; N: through chunks of N steps, "
                                           "the recurrent state carried (detached) from one chunk to the next", ge=0))
    val_fraction: float = field(default=0.1,
                                metadata=doc("share of the episodes held out for the validation loss and accuracy",
                                             ge=0, lt=1))
    eval_interval_updates: int = field(default=25,
                                       metadata=doc("measure the held-out loss and action accuracy every this many "
                                                    "updates (and at the end)", gt=0))
    inflection_weighting: bool = field(default=False,
                                       metadata=doc("up-weight the steps where the expert's action changes (habitat-"
                                                    "web's inflection weighting; discrete actions)"))
    max_grad_norm: float = field(default=1.0, metadata=doc("grad-norm clip after the all-reduce (0 = off)", ge=0))
