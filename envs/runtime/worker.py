"""An env worker process (ddppo.envs.runtime.vector.SubprocVecEnv's): it builds its share of the envs, then serves steps
through shared memory (ddppo.envs.runtime.transport) and the rare commands over its pipe."""

from __future__ import annotations

import traceback
from multiprocessing import shared_memory
from typing import Any, Callable

import numpy as np

from ddppo.envs.base import (EnvError, EnvSpec, Obs, VecEnv, declared_metrics, declared_scenes, env_scenes,
                             exception_summary, fresh_reset, place_by_cost, restores_state)
from ddppo.envs.runtime.helper_signals import ignore_job_signals
from ddppo.envs.runtime.transport import WorkerEnd, control_rows
from ddppo.envs.runtime.worker_output import redirect_output_to


def shared_views(shm: shared_memory.SharedMemory, layout: list, lo: int, hi: int) -> dict[str, Any]:
    """Numpy views of rows lo:hi of every field: {"obs": {key: arr}, "final_obs": {...}, "reward": arr, ...}."""
    views: dict[str, Any] = {"obs": {}, "final_obs": {}}
    for key, shape, dtype, offset in layout:
        array = np.ndarray(shape, dtype=np.dtype(dtype), buffer=shm.buf, offset=offset)[lo:hi]
        group, _, sub = key.partition("/")
        if sub:
            views[group][sub] = array
        else:
            views[group] = array
    return views


def worker_main(conn, output, bells, build: Callable[[str, Any, EnvSpec], VecEnv], name: str, options: dict,
                spec: EnvSpec) -> None:
    """Build the env with `build` (the registry's make_vec_env, passed in so this package does not import the
    registry that imports it), then serve steps (through shared memory, once attached) and commands (over
    `conn`) until "close" or the parent goes away. `bells`: the pipe ends it is woken on and wakes the trainer
    with (ddppo.envs.runtime.transport)."""
    ignore_job_signals()  # the trainer owns them (ddppo.envs.runtime.helper_signals)
    redirect_output_to(output)
    env, shm, views, link = None, None, None, None
    try:
        try:
            env = build(name, options, spec)
            conn.send(("ok", (env.observation_space, env.action_space, restores_state(env), declared_metrics(env),
                               declared_scenes(env), env_scenes(env))))
        except BaseException as exc:
            conn.send(("error", f"{exception_summary(exc)}\n{traceback.format_exc()}"))
            return
        while True:
            try:
                cmd, arg = ("step", views["actions"].copy()) if link is not None and link.next() else conn.recv()
            except (EOFError, OSError):  # the parent is gone
                return
            if cmd == "close":
                return
            try:
                if cmd == "step":
                    episodes = _step(env, views, arg)
                    link.publish(bool(episodes))  # the summaries follow on the pipe
                    if episodes:
                        conn.send(("ok", episodes))
                    continue
                if cmd == "attach":
                    shm_name, layout, lo, hi, control, w, spin_s = arg
                    shm = shared_memory.SharedMemory(name=shm_name)
                    views = shared_views(shm, layout, lo, hi)
                    link = WorkerEnd(control_rows(shm.buf, control, w + 1)[w], bells[0].fileno(), bells[1].fileno(),
                                     conn, spin_s)
                    reply = None
                elif cmd == "load_state_dict":
                    try:
                        env.load_state_dict(arg)
                    except EnvError as exc:  # a state that does not fit this env: refused, the worker still usable
                        conn.send(("refused", str(exc).splitlines()[0]))
                        continue
                    reply = env_scenes(env)
                else:
                    reply = _command(env, views, cmd, arg)
                conn.send(("ok", reply))
            except Exception as exc:
                if cmd == "step":
                    link.publish(True)  # the error follows on the pipe
                conn.send(("error", f"{exception_summary(exc)}\n{traceback.format_exc()}"))
    finally:
        views, link = None, None
        if env is not None:
            env.close()
        if shm is not None:
            shm.close()
        conn.close()


def _step(env: VecEnv, views: dict[str, Any], actions: np.ndarray) -> list:
    """Step the envs, write what they return into the shared block; the finished episodes' summaries."""
    result = env.step(actions)
    _write(views["obs"], result.obs)
    done = np.asarray(result.terminated) | np.asarray(result.truncated)
    if done.any():  # final observations are read only where an episode ended
        for k, v in views["final_obs"].items():
            v[done] = np.asarray(result.final_obs[k])[done]
    views["reward"][:] = result.reward
    views["terminated"][:] = result.terminated
    views["truncated"][:] = result.truncated
    views["started"][:] = result.episode_start  # Atari: a lost life ends no game
    return result.episodes


def _command(env: VecEnv, views: dict[str, Any], cmd: str, arg: Any) -> Any:
    """The reply to one of the rare commands that come over the pipe."""
    if cmd == "reset":
        _write(views["obs"], env.reset() if arg is None else fresh_reset(env, arg))
        return env_scenes(env)
    if cmd == "place_by_cost":
        return place_by_cost(env, arg)
    if cmd == "state_dict":
        return env.state_dict()
    raise EnvError(f"unknown env worker command {cmd!r}")


def _write(dest: dict[str, np.ndarray], obs: Obs) -> None:
    for k, v in dest.items():
        v[:] = obs[k]
