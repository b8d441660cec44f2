"""Any gymnasium environment id as a VecEnv (env.name: gym:<id>).

Each env is made by `gymnasium.make` (the registered wrappers: time limit, order
enforcing, the passive checker). vectorization_mode=sync steps them in this
process with `SyncEnvs` below, which does what gymnasium's `SyncVectorEnv` does in
same-step autoreset mode (the same seeds, actions, resets and numbers; a test holds
them equal) without its per-step info merging and copies: with one env of a MuJoCo
task that overhead was a quarter of the simulator's step. async is gymnasium's
`AsyncVectorEnv` (`gymnasium.make_vec`, one subprocess per env). Either way a
finished env's last observation comes back in `final_obs` and its first
observation of the next episode in `obs`. Observations are always a dict: a Box observation
becomes key "state" (float32, except uint8 images, which stay uint8 with their
0-255 bounds so that storage holds bytes and the policy scales them once on the
device), a Discrete one a one-hot "state"; Dict observations keep their keys and
dtypes for Box keys: Discrete and MultiDiscrete keys become indices from 0 (the policy embeds them), MultiBinary
keys 0/1 float vectors, a Text key its characters' indices in the space's own character set (`_key_converter`), and
`env.gym.drop_keys` leaves keys out (gymnasium's FilterObservation); any other key is refused naming it and both
fixes. Box actions are clipped to the action space; Discrete and MultiDiscrete ones come as indices from 0 (the
space's start is added), MultiBinary ones as 0/1 (cast to its dtype). Episode metrics are the return and length,
plus the info keys `env.gym.episode_metrics` names, read from the info of an episode's last step. `module:Id`
imports `module` first (from the working directory, which the `ddppo` command puts first on sys.path as
`python -m` does).
Each sub-env gets its own seed drawn from `EnvSpec.seed`. `env.gym.atari` plays ALE ids through envs/gym/atari.py
with the standard preprocessing: episodes are whole games (their score is the return), and the learner gets the
rewards' signs and a termination at each lost life (StepResult.started: the game goes on).

Resuming: gymnasium envs cannot be restored in general, so `state_dict` keeps
only counters (episodes finished, resets done) and `restores_state` is False:
after `load_state_dict` the caller starts fresh episodes with `reset(seed=...)`
(the trainer passes the resumed update index), seeded from (seed, resets done,
that seed), so a resumed run does not replay the episodes it already saw.

Scenes (per-scene statistics, ddppo/rollout/scenes.py): a gymnasium env names the scene it plays with the attribute
`scene_id` of its unwrapped env (habitat's name for it), read at construction, after a reset and after each episode
ends (autoreset has started the next one: its scene is the finished episode's `EpisodeInfo.next_scene`); it may
declare every scene it can visit with an attribute `scenes` (a list of names). Envs without `scene_id` have no
scenes.
"""

from __future__ import annotations

import difflib
import importlib
import os
from typing import Any, Callable

import gymnasium
import numpy as np
from gymnasium import spaces

from ddppo.envs.gym.atari import AtariEnvs
from ddppo.envs.base import RESEED, EnvError, EpisodeInfo, Obs, StepResult
from ddppo.field_metadata import section_problems
from ddppo.envs.gym.options import GymOptions


class GymVecEnv:
    """Implements ddppo.envs.base.VecEnv on top of a gymnasium vector env."""

    restores_state = False  # load_state_dict restores counters only: resume starts fresh episodes

    def __init__(self, env_id: str, options: GymOptions, spec: Any):
        problems = section_problems(options)
        if problems:
            raise EnvError("gym options: " + "; ".join(problems))
        if ":" not in env_id and env_id not in gymnasium.registry:  # "module:Id" registers on import
            raise EnvError(_unknown_id(env_id))
        if ":" in env_id:
            _import_registering_module(env_id)
        kwargs = dict(options.kwargs)
        if options.max_episode_steps > 0 and not options.atari:
            kwargs["max_episode_steps"] = options.max_episode_steps
        wrappers = [_Dropping(env_id, tuple(options.drop_keys))] if options.drop_keys else []
        try:
            if options.atari:
                self._env = AtariEnvs(env_id, spec.num_envs, kwargs, options.max_episode_steps)
            elif options.vectorization_mode == "sync":
                self._env = SyncEnvs([_wrapped(gymnasium.make(env_id, **kwargs), wrappers)
                                      for _ in range(spec.num_envs)])
            else:
                self._env = gymnasium.make_vec(
                    env_id, num_envs=spec.num_envs, vectorization_mode=options.vectorization_mode,
                    vector_kwargs={"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP}, wrappers=wrappers,
                    **kwargs)
        except EnvError:
            raise
        except Exception as exc:  # dependency missing, bad kwargs, ...
            raise EnvError(f"could not make gymnasium env {env_id!r}: {type(exc).__name__}: {exc}") from exc
        self.env_id = env_id
        self.num_envs = spec.num_envs
        self._seed = spec.seed
        single_obs, single_act = self._env.single_observation_space, self._env.single_action_space
        try:
            self.observation_space, self._convert = _obs_converter(single_obs, env_id)
            _check_action_space(single_act, env_id)
        except EnvError:
            self._env.close()
            raise
        self.action_space = single_act
        self.atari = options.atari  # the learner sees signs of rewards and a termination at each lost life
        self.episode_metrics = tuple(options.episode_metrics)  # ddppo.envs.base.declared_metrics
        self._ret = np.zeros(self.num_envs, np.float64)
        self._len = np.zeros(self.num_envs, np.int64)
        self._episodes = 0
        self._resets = 0
        self._scene = _scene_ids(self._env, self.num_envs)  # the scene each env plays (None: the env names none)
        self.scenes = tuple(sorted({str(x) for x in self._scene if x is not None}
                                   | set(_declared(self._env))))  # ddppo.envs.base.declared_scenes

    def reset(self, seed: int | None = None) -> Obs:
        entropy = [int(self._seed), self._resets] + ([] if seed is None else [RESEED, int(seed)])
        seeds = np.random.SeedSequence(entropy).generate_state(self.num_envs).tolist()
        obs, _ = self._env.reset(seed=seeds)
        if self.scenes:
            self._scene = _scene_ids(self._env, self.num_envs)
        self._resets += 1
        self._ret[:] = 0.0
        self._len[:] = 0
        return self._convert(obs)

    def step(self, actions: np.ndarray) -> StepResult:
        obs, reward, terminated, truncated, infos = self._env.step(_env_actions(self.action_space, actions,
                                                                                  self.num_envs))
        reward = np.asarray(reward, np.float32)
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        self._ret += reward
        self._len += 1
        obs = self._convert(obs)
        final_obs = obs
        episodes = []
        done = terminated | truncated
        if done.any():
            final_obs = {k: v.copy() for k, v in obs.items()}
            finals = infos["final_obs"]
            for i in np.flatnonzero(done):
                row = self._convert(_batch_of_one(finals[i]))
                for k in final_obs:
                    final_obs[k][i] = row[k][0]
                metrics = {"return": float(self._ret[i]), "length": float(self._len[i])}
                metrics.update(_info_metrics(infos.get("final_info", {}), int(i), self.episode_metrics))
                episodes.append(EpisodeInfo(int(i), metrics, self._scene[i]))
            if self.scenes:  # autoreset has started the next episodes: their scenes
                self._scene = _scene_ids(self._env, self.num_envs)
                for e in episodes:
                    e.next_scene = self._scene[e.env_index]
            self._episodes += len(episodes)
            self._ret[done] = 0.0
            self._len[done] = 0
        if self.atari:  # the episode (its return, the recurrent state) is the whole game
            return StepResult(obs, np.sign(reward), terminated | infos["life_lost"], truncated, final_obs, episodes,
                              started=done)
        return StepResult(obs, reward, terminated, truncated, final_obs, episodes)

    @property
    def env_scenes(self) -> list[str | None]:
        """The scene each env plays (ddppo.envs.base.env_scenes)."""
        return list(self._scene)

    def close(self) -> None:
        self._env.close()

    def state_dict(self) -> dict[str, Any]:
        return {"episodes": self._episodes, "resets": self._resets}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._episodes = int(state["episodes"])
        self._resets = int(state["resets"])


# id prefix -> (the module that registers such ids when imported, its pip requirement)
REGISTERING_MODULES = {"MiniGrid-": ("minigrid", "minigrid"), "BabyAI-": ("minigrid", "minigrid"),
                       "ALE/": ("ale_py", "ale-py"), "MiniWorld-": ("miniworld", "miniworld"),
                       "Fetch": ("gymnasium_robotics", "gymnasium-robotics"),
                       "AntMaze_": ("gymnasium_robotics", "gymnasium-robotics"),
                       "PointMaze_": ("gymnasium_robotics", "gymnasium-robotics")}


def _unknown_id(env_id: str) -> str:
    """The message for an id gymnasium's registry lacks: ids register when their package's module is imported,
    which `gym:MODULE:ID` does; the module is named where the id's prefix tells it."""
    for prefix, (module, requirement) in REGISTERING_MODULES.items():
        if env_id.startswith(prefix):
            return (f"gymnasium has no environment id {env_id!r} until its package registers it: set "
                    f"env.name=gym:{module}:{env_id} (ddppo imports {module} first; pip install {requirement})")
    close = difflib.get_close_matches(env_id, list(gymnasium.registry), n=1)
    return (f"gymnasium has no environment id {env_id!r}" + (f" (did you mean {close[0]}?)" if close else "") +
            "; an id that a package or a module of your own registers on import: env.name=gym:MODULE:ID (ddppo "
            "imports MODULE first, from the working directory or sys.path)")


def _import_registering_module(env_id: str) -> None:
    """Import the module of a "module:Id" (gymnasium.make would; this says where it looked). The `ddppo`
    command puts the working directory first on sys.path, as `python -m` does (ddppo.user_code)."""
    module = env_id.split(":", 1)[0]
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name not in (module, module.split(".")[0]):
            raise  # the user's module imports something missing: its own error says what
        known = {m: r for m, r in REGISTERING_MODULES.values()}
        install = f"pip install {known[module]}, or " if module in known else ""
        raise EnvError(f"gym env {env_id!r}: no module named {module!r} in the working directory {os.getcwd()} or "
                       f"on sys.path; {install}run from the folder that holds {module.replace('.', '/')}.py, or "
                       f"add its folder to PYTHONPATH") from None


class SyncEnvs:
    """gymnasium envs stepped in turn in this process, with same-step autoreset: what `gymnasium.make_vec(...,
    vectorization_mode="sync")` returns, for the calls GymVecEnv makes (reset with a seed per env, step, close,
    the single spaces, `infos["final_obs"]`), each step's observations batched into a new array."""

    def __init__(self, envs: list[gymnasium.Env]):
        self.envs = envs
        self.single_observation_space = envs[0].observation_space
        self.single_action_space = envs[0].action_space

    def _batch(self, items: list[Any]) -> Any:
        space = self.single_observation_space
        return gymnasium.vector.utils.concatenate(
            space, items, gymnasium.vector.utils.create_empty_array(space, len(items)))

    def reset(self, seed: list[int]) -> tuple[Any, dict]:
        return self._batch([env.reset(seed=s)[0] for env, s in zip(self.envs, seed)]), {}

    def step(self, actions: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        n = len(self.envs)
        obs, reward = [None] * n, np.zeros(n, np.float64)
        terminated, truncated = np.zeros(n, bool), np.zeros(n, bool)
        finals = np.full(n, None, dtype=object)
        final_info: dict[str, np.ndarray] = {}
        for i, env in enumerate(self.envs):
            obs[i], reward[i], terminated[i], truncated[i], info = env.step(actions[i])
            if terminated[i] or truncated[i]:
                finals[i] = obs[i]
                for key, value in info.items():  # gymnasium's layout: the values, and a mask `_key` of who has one
                    final_info.setdefault(key, np.full(n, None, dtype=object))[i] = value
                    final_info.setdefault("_" + key, np.zeros(n, bool))[i] = True
                obs[i] = env.reset()[0]
        return self._batch(obs), reward, terminated, truncated, {"final_obs": finals, "final_info": final_info}

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _info_metrics(final_info: dict[str, Any], i: int, keys: tuple[str, ...]) -> dict[str, float]:
    """env.gym.episode_metrics: the numbers env i's last info of an episode holds under `keys` (gymnasium's
    batched layout: `final_info[key][i]` where the mask `final_info["_" + key][i]` is set); a key it lacks, or a
    value that is not a number, is left out."""
    out = {}
    for key in keys:
        if key not in final_info or not np.asarray(final_info.get("_" + key, np.ones(i + 1, bool)))[i]:
            continue
        try:
            out[key] = float(np.asarray(final_info[key][i], np.float64).reshape(()))
        except (TypeError, ValueError):
            continue
    return out


SCENE_ATTR = "scene_id"


def _scene_ids(env: Any, n: int) -> list[str | None]:
    """Each env's `scene_id` attribute (of its unwrapped env; None where it has none)."""
    if isinstance(env, AtariEnvs):
        return [None] * n
    if isinstance(env, SyncEnvs):
        values = [getattr(e.unwrapped, SCENE_ATTR, None) for e in env.envs]
    else:
        # asked first: a worker of gymnasium's AsyncVectorEnv shuts down on get_attr of an attribute its env lacks
        has = env.call("has_wrapper_attr", SCENE_ATTR)
        values = list(env.get_attr(SCENE_ATTR)) if all(has) else [None] * n
    return [None if v is None else str(v) for v in values]


def _declared(env: Any) -> list[str]:
    """The scene names the first env declares it may visit (attribute `scenes` of its unwrapped env)."""
    first = env.envs[0].unwrapped if isinstance(env, SyncEnvs) else None
    return [str(x) for x in (getattr(first, "scenes", None) or [])]


def _batch_of_one(obs: Any) -> Any:
    if isinstance(obs, dict):
        return {k: np.asarray(v)[None] for k, v in obs.items()}
    return np.asarray(obs)[None]


def _check_action_space(space: spaces.Space, env_id: str) -> None:
    """EnvError naming the space unless a policy can act in it."""
    if isinstance(space, (spaces.Discrete, spaces.Box)):
        return
    if isinstance(space, spaces.MultiDiscrete) and len(space.shape) == 1:
        return
    if isinstance(space, spaces.MultiBinary) and len(space.shape) == 1:
        return
    raise EnvError(f"gym env {env_id!r} has action space {space}; supported: Discrete, Box, a 1-D MultiDiscrete, "
                   f"MultiBinary(n) (flatten it with a gymnasium ActionWrapper in a module of your own: "
                   f"env.name=gym:MODULE:ID)")


def _env_actions(space: spaces.Space, actions: np.ndarray, n: int) -> np.ndarray:
    """The policy's actions (indices from 0, 0/1 floats, Box values) as the envs take them: a space's `start`
    added, MultiBinary in its dtype, a Box's clipped to its bounds."""
    acts = np.asarray(actions)
    if isinstance(space, spaces.Box):
        return np.clip(acts.astype(space.dtype).reshape(n, *space.shape), space.low, space.high)
    if isinstance(space, spaces.Discrete):
        return acts.reshape(n).astype(np.int64) + int(space.start)
    if isinstance(space, spaces.MultiDiscrete):
        return acts.reshape(n, *space.shape).astype(np.int64) + space.start
    return acts.reshape(n, *space.shape).astype(space.dtype)  # MultiBinary


def _box_dtype(space: spaces.Box) -> type:
    """uint8 (images) stays uint8; every other Box dtype becomes float32."""
    return np.uint8 if space.dtype == np.uint8 else np.float32


Converter = Callable[[Any], np.ndarray]


def _obs_converter(space: spaces.Space, env_id: str) -> tuple[spaces.Dict, Callable[[Any], dict[str, np.ndarray]]]:
    """The observation space ddppo sees (a Dict of tensor spaces), and a function turning one batched gymnasium
    observation into its dict of arrays. A Dict keeps its keys (each converted by `_key_converter`); anything
    else becomes key "state": a Box as float32 (uint8 images stay uint8), a Discrete as a one-hot, the rest as
    `_key_converter` says."""
    if isinstance(space, spaces.Dict):
        parts = {k: _key_converter(k, s, env_id) for k, s in space.spaces.items()}
        return (spaces.Dict({k: s for k, (s, _) in parts.items()}),
                lambda obs: {k: fn(obs[k]) for k, (_, fn) in parts.items()})
    if isinstance(space, spaces.Box):
        dtype = _box_dtype(space)
        box = spaces.Box(space.low.astype(dtype), space.high.astype(dtype), dtype=dtype)
        return spaces.Dict({"state": box}), lambda obs: {"state": np.asarray(obs, dtype)}
    if isinstance(space, spaces.Discrete):
        eye = np.eye(int(space.n), dtype=np.float32)
        one_hot = spaces.Box(0.0, 1.0, (int(space.n),), np.float32)
        return spaces.Dict({"state": one_hot}), lambda obs: {"state": eye[np.asarray(obs, np.int64) - int(space.start)]}
    state, fn = _key_converter("state", space, env_id)
    return spaces.Dict({"state": state}), lambda obs: {"state": fn(obs)}


def _key_converter(key: str, space: spaces.Space, env_id: str) -> tuple[spaces.Space, Converter]:
    """One observation key: the space the policy sees and the conversion of a batch of values. Box keys keep
    their dtype; Discrete and MultiDiscrete become indices from 0 (the policy embeds them); MultiBinary a float
    0/1 vector; Text the indices of its characters in the space's own character set (1..len, 0 pads to
    max_length: a MultiDiscrete of fixed shape, so checkpoints stay well-defined). Anything else (MiniGrid's
    MissionSpace, a nested Dict or Tuple, Graph, Sequence): EnvError naming the key, its space and both fixes."""
    if isinstance(space, spaces.Box):
        return space, np.asarray
    if isinstance(space, spaces.Discrete):
        start = int(space.start)
        return spaces.Discrete(int(space.n)), lambda v: np.asarray(v, np.int64) - start
    if isinstance(space, spaces.MultiDiscrete):
        start = np.asarray(space.start, np.int64)
        return spaces.MultiDiscrete(space.nvec), lambda v: np.asarray(v, np.int64) - start
    if isinstance(space, spaces.MultiBinary):
        return spaces.Box(0.0, 1.0, space.shape, np.float32), lambda v: np.asarray(v, np.float32)
    if isinstance(space, spaces.Text):
        return _text_converter(space)
    raise EnvError(f"gym env {env_id!r}: observation key {key!r} is a {type(space).__name__} "
                   f"({type(space).__module__}), which ddppo cannot hold as a tensor; leave it out with "
                   f"env.gym.drop_keys=[{key}], or turn it into a Box, Discrete or Text with an observation wrapper "
                   f"in a module of your own that registers an id (env.name=gym:MODULE:ID)")


def _text_converter(space: spaces.Text) -> tuple[spaces.Space, Converter]:
    """gymnasium Text -> (max_length,) character indices: 1 + the character's place in the space's character
    set, 0 after the string's end (and for a character outside the set)."""
    index = {c: i + 1 for i, c in enumerate(space.character_list)}
    length = int(space.max_length)

    def encode(batch: Any) -> np.ndarray:
        strings = [batch] if isinstance(batch, str) else list(np.asarray(batch, dtype=object).reshape(-1))
        out = np.zeros((len(strings), length), np.int64)
        for row, text in enumerate(strings):
            codes = [index.get(c, 0) for c in str(text)[:length]]
            out[row, :len(codes)] = codes
        return out

    return spaces.MultiDiscrete(np.full(length, len(index) + 1)), encode


class _Dropping:
    """env.gym.drop_keys: a gymnasium `FilterObservation` keeping a Dict observation's other keys (a class, not a
    closure, so that AsyncVectorEnv's workers get it pickled)."""

    def __init__(self, env_id: str, drop: tuple[str, ...]):
        self.env_id, self.drop = env_id, drop

    def __call__(self, env: gymnasium.Env) -> gymnasium.Env:
        space = env.observation_space
        if not isinstance(space, spaces.Dict):
            raise EnvError(f"env.gym.drop_keys={list(self.drop)}: gym env {self.env_id!r} has a "
                           f"{type(space).__name__} observation, not a Dict with keys to leave out; set "
                           f"env.gym.drop_keys=[]")
        missing = [k for k in self.drop if k not in space.spaces]
        if missing:
            raise EnvError(f"env.gym.drop_keys={list(self.drop)}: gym env {self.env_id!r} has no observation key "
                           f"{', '.join(map(repr, missing))}; its keys are {', '.join(space.spaces)}")
        return gymnasium.wrappers.FilterObservation(env, [k for k in space.spaces if k not in self.drop])


def _wrapped(env: gymnasium.Env, wrappers: list[Callable[[gymnasium.Env], gymnasium.Env]]) -> gymnasium.Env:
    for wrap in wrappers:
        env = wrap(env)
    return env


def make_gym(env_id: str, options: GymOptions, spec: Any) -> GymVecEnv:
    """Registry factory for env.name=gym:<id>."""
    return GymVecEnv(env_id, options, spec)
