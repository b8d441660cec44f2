"""Helpers of the rollout tests (the storage helpers serve tests/ppo/test_batches.py too)."""

from __future__ import annotations

import gymnasium
import numpy as np
import torch

from ddppo.rollout.storage import RolloutStorage


class NeverStop:
    """A stand-in for Preemption that never ends a rollout early (collectors built without a process group)."""

    def begin(self, update):
        pass

    def should_stop(self, update, step):
        return False

    def finished(self, update):
        pass

    def rank_weight(self, steps_per_env):  # preemption.rank_weighting off
        return 1.0

    min_steps = 1  # no floor under the variable mode's two-sided weights: nothing cuts a rollout here


class AlternatingScenes:
    """A scripted batch of envs whose scenes alternate episode by episode, so a rollout holds steps of several
    scenes per env and the samples of each scene are known exactly (`scene_at`).

    Env n's episodes last `lengths[n]` steps; its k-th step (counted from the start) plays scene
    `cycle[(k // lengths[n] + n) % len(cycle)]`. A finished episode reports its scene and, with `tells_next`, the
    scene of the episode that starts in its place (`EpisodeInfo.next_scene`). `env_scenes` is each env's current
    scene. It also implements the asynchronous worker API (ddppo.envs.base.AsyncVecEnv), one env per worker:
    worker w's steps come back only on every `periods[w]`-th `recv` (default 1), so in variable mode some envs
    collect more steps than others."""

    def __init__(self, lengths, cycle=("a", "b"), tells_next=True, periods=None):
        import gymnasium
        import numpy as np

        self.np = np
        self.num_envs = len(lengths)
        self.lengths, self.cycle, self.tells_next = list(lengths), tuple(cycle), tells_next
        self.periods = list(periods) if periods is not None else [1] * self.num_envs
        self.observation_space = gymnasium.spaces.Dict({"obs": gymnasium.spaces.Box(-1e9, 1e9, (1,), np.float32)})
        self.action_space = gymnasium.spaces.Discrete(2)
        self.scenes = tuple(sorted(set(self.cycle)))
        self.steps = [0] * self.num_envs  # steps each env has taken since the start
        self._actions, self._recvs = {}, 0

    def scene_at(self, n, k):
        return self.cycle[(k // self.lengths[n] + n) % len(self.cycle)]

    @property
    def env_scenes(self):
        return [self.scene_at(n, k) for n, k in enumerate(self.steps)]

    def _obs(self, rows):
        return {"obs": self.np.array([[float(self.steps[n])] for n in rows], self.np.float32)}

    def reset(self):
        return self._obs(range(self.num_envs))

    def _step_rows(self, rows):
        from ddppo.envs.base import EpisodeInfo, StepResult

        np = self.np
        done, episodes = np.zeros(len(rows), bool), []
        for j, n in enumerate(rows):
            k = self.steps[n]
            self.steps[n] += 1
            if self.steps[n] % self.lengths[n] == 0:
                done[j] = True
                told = {"next_scene": self.scene_at(n, k + 1)} if self.tells_next else {}
                # step_s: a scripted time, 1 ms per step of the episode
                episodes.append(EpisodeInfo(n, {"return": 0.0, "length": float(self.lengths[n])}, self.scene_at(n, k),
                                            **told, step_s=0.001 * self.lengths[n]))
        obs = self._obs(rows)
        return StepResult(obs, np.zeros(len(rows), np.float32), done, np.zeros(len(rows), bool), obs, episodes)

    def step(self, actions):
        return self._step_rows(list(range(self.num_envs)))

    def close(self):
        pass

    def state_dict(self):
        return {"steps": list(self.steps), "recvs": self._recvs}

    def load_state_dict(self, state):
        self.steps, self._recvs = list(state["steps"]), state["recvs"]

    # the asynchronous worker API, one env per worker
    @property
    def bounds(self):
        return [(n, n + 1) for n in range(self.num_envs)]

    @property
    def in_flight(self):
        return frozenset(self._actions)

    timeout_s = 10.0

    def send(self, w, actions):
        self._actions[w] = actions

    def recv(self, min_ready=1, wait_s=0.0, workers=None):
        from ddppo.envs.base import WorkerStep

        pool = sorted(w for w in self._actions if workers is None or w in workers)
        self._recvs += 1
        ready = [w for w in pool if self._recvs % self.periods[w] == 0] or pool[:1]
        for w in ready:
            del self._actions[w]
        return [WorkerStep(w, w, w + 1, self._step_rows([w])) for w in ready]

    def recv_all(self):
        out = []
        while self._actions:
            out += self.recv()
        return out


def expected_scene_samples(env, first, counts, believed):
    """What an exact per-scene tally holds for steps first[n] .. first[n] + counts[n] - 1 of each env n of an
    `AlternatingScenes` env: {scene: samples}. Where the env does not tell the next episode's scene, the steps of
    an episode unfinished at the rollout's end count for `believed[n]` (the scene the collector last knew env n
    in: at the start, or of its latest finished episode), which is updated. {scene: (num_envs,) samples per env}."""
    out = {}
    for n in range(env.num_envs):
        L, end = env.lengths[n], first[n] + counts[n]
        for k in range(first[n], end):
            finished = (k // L + 1) * L <= end  # its episode ends within the rollout
            scene = env.scene_at(n, k) if finished or env.tells_next else believed[n]
            out.setdefault(scene, [0] * env.num_envs)[n] += 1
            if (k + 1) % L == 0 and not env.tells_next:
                believed[n] = env.scene_at(n, k)
    return out


# ------------------------------------------------------------------ a storage filled with recognisable steps
OBS_SPACE = gymnasium.spaces.Dict({
    "vec": gymnasium.spaces.Box(-1, 1, (3,), np.float32),
    "img": gymnasium.spaces.Box(0, 255, (4, 4, 1), np.uint8),
})
ACTIONS = gymnasium.spaces.Discrete(4)


def make_storage(T=6, N=4, layers=1, H=5, action_space=ACTIONS):
    return RolloutStorage(T, N, OBS_SPACE, action_space, {"rnn": torch.zeros(N, layers, H)}, torch.device("cpu"))


def obs_at(t, N=4):
    """Distinct, recognisable observations: vec = t + env/10, img = t."""
    vec = torch.tensor([[t + n / 10] * 3 for n in range(N)], dtype=torch.float32)
    img = torch.full((N, 4, 4, 1), t, dtype=torch.uint8)
    return {"vec": vec, "img": img}


def fill(s, steps, N=4, done_at=()):
    """begin + `steps` inserts with recognisable values: action t, value 10t+n, reward t+n/100; the memory at the
    start has env n's rows filled with n (recognisable too)."""
    rnn = s.memory0["rnn"]
    hidden = torch.arange(N, dtype=torch.float32).view(N, 1, 1).expand_as(rnn).clone()
    s.begin(obs_at(0, N), torch.ones(N), {"rnn": hidden})
    for t in range(steps):
        done = torch.tensor([1.0 if (t, n) in done_at else 0.0 for n in range(N)])
        s.insert(torch.full((N,), t % 4), torch.full((N,), -0.1 * t), 10.0 * t + torch.arange(N),
                 t + torch.arange(N) / 100, done, obs_at(t + 1, N))
    return hidden
