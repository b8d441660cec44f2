"""Subprocess env workers with shared-memory observations.

`SubprocVecEnv` splits a rank's `num_envs` over `num_workers` worker processes.
Each worker builds its own in-process VecEnv through the registry (with a
derived seed, its share of the envs and `worker_index`/`worker_count` set in
its EnvSpec) and writes observations, final observations, rewards, done flags
and episode-start flags (they differ for Atari: a lost life is done, but the game
goes on) straight into shared memory. A step's actions come through shared memory
too, started and finished through counters the other side spins on briefly before
it blocks (ddppo.envs.runtime.transport: no pickling, no system call while both
keep up); finished episodes' summaries, errors and the rare commands (reset, state,
close) travel over a pipe.

Robustness: workers, their forkserver and the resource tracker ignore SIGINT,
SIGTERM and SIGUSR1, also when sent to the whole job (ddppo.envs.runtime.helper_signals; the
trainer owns signal handling and closes the workers); an exception in a worker is raised in
the parent as EnvError with the worker's index and traceback; a worker that
dies or does not answer within `EnvSpec.worker_timeout_s` is reported as an
EnvError naming it instead of hanging. After any such error the env is broken:
further calls raise, and `close()` (always safe, idempotent, also run at garbage
collection and interpreter exit) terminates the workers and frees the memory.
Workers are started with "forkserver" (never a plain fork: the parent may have
imported torch). Their stdout and stderr reach the parent's stderr a whole line
at a time, prefixed with the worker's name (ddppo.envs.runtime.worker_output).

Asynchronous use (the one API both rollout modes build on): `send(w, actions)` starts a step of worker
`w`'s envs (rows `bounds[w]`) and returns at once; `recv(min_ready, wait_s)` returns the `WorkerStep`s of
whichever workers have finished: it blocks for the first one (up to the worker timeout), then waits at
most `wait_s` more for `min_ready` in all. A WorkerStep's arrays are views into shared memory, valid until
that worker is sent its next step; copy what must outlive that. `step(actions)` is send-to-all and
receive-all, returning copies. Final observations cross only for the envs that finished.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing as mp
import multiprocessing.connection
import signal
import time
import weakref
from multiprocessing import shared_memory
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from ddppo.envs.base import EnvError, EnvSpec, EpisodeInfo, Obs, StepResult, VecEnv, WorkerStep
from ddppo.envs.runtime.helper_signals import blocked_job_signals, start_sheltered_helpers
from ddppo.envs.runtime.transport import ROW_WORDS, TrainerEnd, control_rows, default_spin_s
from ddppo.envs.runtime.worker import shared_views, worker_main
from ddppo.envs.runtime.worker_output import OutputRelay

log = logging.getLogger(__name__)

_PRELOAD = ["ddppo.envs.runtime.forkserver_init", "numpy", "gymnasium", "ddppo.envs.base", "ddppo.envs.registry",
            "ddppo.envs.runtime.worker"]


def worker_spec(spec: EnvSpec, worker_index: int, num_workers: int) -> EnvSpec:
    """The EnvSpec worker `worker_index` builds its envs with: its share of num_envs (the first
    workers take one more when it does not divide), in-process (num_workers=0), and a seed of its
    own; worker 0 keeps the rank's seed, so one worker reproduces in-process stepping."""
    counts = _split(spec.num_envs, num_workers)
    seed = spec.seed if worker_index == 0 else int(np.random.SeedSequence([spec.seed, worker_index]).generate_state(1)[0])
    return dataclasses.replace(spec, num_envs=counts[worker_index], seed=seed, num_workers=0,
                               worker_index=worker_index, worker_count=num_workers)


def _split(n: int, parts: int) -> list[int]:
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


class SubprocVecEnv:
    """Implements ddppo.envs.base.VecEnv with `num_workers` subprocesses (see the module docstring)."""

    def __init__(self, name: str, options: Mapping[str, Any], spec: EnvSpec, num_workers: int,
                 build: Callable[[str, Mapping[str, Any], EnvSpec], VecEnv], start_method: str = "forkserver",
                 spin_s: float | None = None):
        """`spin_s`: how long a side waiting for the other spins before it blocks (None: the machine's default,
        ddppo.envs.runtime.transport.default_spin_s; 0: block at once, every hand-over through the kernel)."""
        if not 0 < num_workers <= spec.num_envs:
            raise EnvError(f"env.num_workers={num_workers} must be in [1, num_envs={spec.num_envs}]")
        self.num_envs = spec.num_envs
        self.num_workers = num_workers
        self._timeout_s = float(spec.worker_timeout_s)
        self._broken: str | None = None
        self._in_flight: set[int] = set()
        self._spin_s = default_spin_s() if spin_s is None else float(spin_s)
        counts = _split(spec.num_envs, num_workers)
        self._bounds = [(sum(counts[:w]), sum(counts[:w + 1])) for w in range(num_workers)]
        ctx = mp.get_context(start_method)
        if start_method == "forkserver":
            ctx.set_forkserver_preload(_PRELOAD)
        start_sheltered_helpers(start_method)  # SIGTERM/SIGUSR1 to the whole job must not kill them
        self._res = _Resources()
        self._finalizer = weakref.finalize(self, self._res.close)
        for w in range(num_workers):
            parent, child = ctx.Pipe()
            out_read, out_write = ctx.Pipe(duplex=False)
            bell_in, ring_worker = ctx.Pipe(duplex=False)  # raw wake-up bytes (ddppo.envs.runtime.transport)
            rung, ring_trainer = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=worker_main, name=f"env-worker-{w}",
                               args=(child, out_write, (bell_in, ring_trainer), build, name, dict(options),
                                     worker_spec(spec, w, num_workers)))
            with blocked_job_signals():  # a worker ignores them from its start, whatever the start method
                proc.start()
            for end in (child, out_write, bell_in, ring_trainer):
                end.close()
            self._res.bells.append((ring_worker, rung))
            self._res.output.add(out_read, f"env-worker-{w}")
            self._res.conns.append(parent)
            self._res.procs.append(proc)
        try:
            built = self._gather("build", float(spec.worker_start_timeout_s))
            spaces = [b[:2] for b in built]
            self.observation_space, self.action_space = spaces[0]
            for w, other in enumerate(spaces):
                if other != spaces[0]:
                    raise EnvError(f"env worker {w} built spaces {other}, worker 0 built {spaces[0]}")
            self.restores_state = all(b[2] for b in built)  # see ddppo.envs.base.restores_state
            self.episode_metrics = tuple(sorted({n for b in built for n in b[3]}))  # ddppo.envs.base.declared_metrics
            self.scenes = tuple(sorted({n for b in built for n in b[4]}))  # ddppo.envs.base.declared_scenes
            self.env_scenes = [s for b in built for s in b[5]]  # ddppo.envs.base.env_scenes, in env order
            self._attach()
        except BaseException:
            self.close()
            raise

    @property
    def worker_pids(self) -> list[int]:
        return [p.pid for p in self._res.procs]

    # ---- VecEnv ---------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> Obs:
        replies = self._broadcast("reset", seed)  # each worker derives its stream from its own seed and `seed`
        self.env_scenes = [s for r in replies for s in r]  # the new episodes' scenes
        return {k: v.copy() for k, v in self._views["obs"].items()}

    def step(self, actions: np.ndarray) -> StepResult:
        actions = np.asarray(actions)
        for w, (lo, hi) in enumerate(self._bounds):
            self.send(w, actions[lo:hi])
        replies = self._wait_steps(list(range(self.num_workers)), self._timeout_s, self.num_workers)
        self._in_flight.clear()
        v = self._views
        done = v["terminated"] | v["truncated"]
        return StepResult(
            obs={k: a.copy() for k, a in v["obs"].items()},
            reward=v["reward"].copy(),
            terminated=v["terminated"].copy(),
            truncated=v["truncated"].copy(),
            final_obs=_final_rows(v["final_obs"], done),
            started=v["started"].copy(),
            episodes=self._episodes([(w, replies[w]) for w in range(self.num_workers)]),
        )

    # ---- asynchronous stepping (see the module docstring) -------------------------------------
    def recv_all(self) -> list[WorkerStep]:
        """Wait for every worker in flight (up to the worker timeout) and return their steps."""
        out: list[WorkerStep] = []
        while self._in_flight:
            out += self.recv(min_ready=len(self._in_flight), wait_s=self._timeout_s)
        return out

    @property
    def bounds(self) -> list[tuple[int, int]]:
        """(lo, hi) rows of the batch each worker steps."""
        return list(self._bounds)

    @property
    def timeout_s(self) -> float:
        """How long a worker may take for one step before it is reported as hung."""
        return self._timeout_s

    @property
    def in_flight(self) -> frozenset[int]:
        """Workers sent a step whose result has not been received."""
        return frozenset(self._in_flight)

    def send(self, w: int, actions: np.ndarray) -> None:
        """Start a step of worker `w`'s envs with `actions` (its rows only); returns at once."""
        if w in self._in_flight:
            raise EnvError(f"env worker {w} is still stepping; recv its result before sending it another step")
        if self._broken:
            raise EnvError(f"env workers are unusable after an earlier error: {self._broken}")
        lo, hi = self._bounds[w]
        dest = self._views["actions"][lo:hi]
        actions = np.asarray(actions)
        if actions.size != dest.size:
            raise EnvError(f"env worker {w} steps {hi - lo} envs with actions of shape {dest.shape[1:]}; "
                           f"it was sent actions of shape {actions.shape}")
        dest[...] = actions.reshape(dest.shape)
        self._link.post(w)
        self._in_flight.add(w)

    def recv(self, min_ready: int = 1, wait_s: float = 0.0, workers: Iterable[int] | None = None) -> list[WorkerStep]:
        """Finished steps of in-flight workers (of `workers` only, if given), in worker order: at least one
        (waiting up to the worker timeout for it), and up to `min_ready` if they finish within `wait_s` of the
        first."""
        pool = self._in_flight if workers is None else self._in_flight & set(workers)
        if not pool:
            raise EnvError("recv with no env worker stepping: send a step first")
        replies = self._wait_steps(sorted(pool), self._timeout_s, 1)
        want = min(min_ready, len(pool))
        if len(replies) < want and wait_s > 0:
            rest = sorted(pool - set(replies))
            replies.update(self._wait_steps(rest, wait_s, want - len(replies), timeout_ok=True))
        out = []
        for w in sorted(replies):
            self._in_flight.discard(w)
            lo, hi = self._bounds[w]
            v = self._views
            res = StepResult(obs={k: a[lo:hi] for k, a in v["obs"].items()}, reward=v["reward"][lo:hi],
                             terminated=v["terminated"][lo:hi], truncated=v["truncated"][lo:hi],
                             final_obs={k: a[lo:hi] for k, a in v["final_obs"].items()},
                             episodes=self._episodes([(w, replies[w])]), started=v["started"][lo:hi])
            out.append(WorkerStep(w, lo, hi, res))
        return out

    def close(self) -> None:
        self._views, self._link = {}, None  # views into the shared block: it is freed with the last of them
        self._finalizer()

    def place_by_cost(self, costs: dict[str, float]) -> bool:
        """Every worker's envs offered the measured costs (ddppo.envs.base.place_by_cost); True where any moved."""
        return any(self._broadcast("place_by_cost", costs))

    def state_dict(self) -> dict[str, Any]:
        return {"workers": self._broadcast("state_dict")}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "workers" not in state:
            raise EnvError("env state was saved without subprocess workers (env.num_workers=0); "
                           f"this run has env.num_workers={self.num_workers}")
        workers = state["workers"]
        if len(workers) != self.num_workers:
            raise EnvError(f"env state holds {len(workers)} workers, this run has env.num_workers={self.num_workers}")
        for w, sub in enumerate(workers):
            self._send(w, "load_state_dict", sub)
        self.env_scenes = [s for r in self._gather("load_state_dict", self._timeout_s) for s in r]

    def _episodes(self, replies: list[tuple[int, list[EpisodeInfo]]]) -> list[EpisodeInfo]:
        """Workers' finished episodes, numbered in the whole batch; `env_scenes` follows their next scenes."""
        out = []
        for w, episodes in replies:
            for e in episodes:
                out.append(dataclasses.replace(e, env_index=e.env_index + self._bounds[w][0]))
                if e.next_scene is not None:
                    self.env_scenes[out[-1].env_index] = e.next_scene
        return out

    # ---- plumbing -------------------------------------------------------------------------
    def _attach(self) -> None:
        """Allocate one shared block for all batched outputs, the actions and the control rows, and give each
        worker its rows."""
        n, space = self.num_envs, self.action_space
        if space.shape is None or space.dtype is None:
            raise EnvError(f"env workers need an action space of fixed shape and dtype; this env's is {space}")
        fields = [(f"obs/{k}", (n, *s.shape), s.dtype) for k, s in self.observation_space.spaces.items()]
        fields += [(f"final_obs/{k}", (n, *s.shape), s.dtype) for k, s in self.observation_space.spaces.items()]
        fields += [("reward", (n,), np.float32), ("terminated", (n,), bool), ("truncated", (n,), bool),
                   ("started", (n,), bool), ("actions", (n, *space.shape), space.dtype)]
        layout, offset = [], 0
        for key, shape, dtype in fields:
            layout.append((key, shape, np.dtype(dtype).str, offset))
            offset += -(-int(np.prod(shape)) * np.dtype(dtype).itemsize // 64) * 64
        control = offset  # the control rows (ddppo.envs.runtime.transport), one cache line per worker
        self._res.shm = shared_memory.SharedMemory(create=True, size=control + 8 * ROW_WORDS * self.num_workers)
        self._views = shared_views(self._res.shm, layout, 0, n)
        rows = control_rows(self._res.shm.buf, control, self.num_workers)
        rows[:] = 0
        bells = self._res.bells
        self._link = TrainerEnd(rows, [b[0].fileno() for b in bells], [b[1].fileno() for b in bells], self._spin_s)
        for w, (lo, hi) in enumerate(self._bounds):
            self._send(w, "attach", (self._res.shm.name, layout, lo, hi, control, w, self._spin_s))
        self._gather("attach", self._timeout_s)

    def _broadcast(self, cmd: str, arg: Any = None) -> list[Any]:
        for w in range(self.num_workers):
            self._send(w, cmd, arg)
        return self._gather(cmd, self._timeout_s)

    def _send(self, w: int, cmd: str, arg: Any = None) -> None:
        if self._broken:
            raise EnvError(f"env workers are unusable after an earlier error: {self._broken}")
        if self._in_flight:
            raise EnvError(f"env workers {sorted(self._in_flight)} are still stepping; recv before {cmd!r}")
        try:
            self._res.conns[w].send((cmd, arg))
        except (BrokenPipeError, ConnectionResetError, OSError) as exc:
            self._res.procs[w].join(1.0)  # a closed pipe is usually a dead worker: say how it died
            self._fail(f"env worker {w} cannot be reached for {cmd!r} ({exc}); {self._exit_text(w)}")

    def _gather(self, cmd: str, timeout_s: float) -> list[Any]:
        """One reply per worker, in worker order; raises EnvError on an error, a death or a timeout."""
        replies = self._poll(list(range(len(self._res.conns))), cmd, timeout_s, len(self._res.conns))
        return [replies[w] for w in range(len(self._res.conns))]

    def _wait_steps(self, workers: list[int], timeout_s: float, want: int,
                    timeout_ok: bool = False) -> dict[int, list[EpisodeInfo]]:
        """The finished episodes of `workers`' steps, once `want` have finished (or, with `timeout_ok`, those
        finished within `timeout_s`); raises EnvError on an error, a death or (without `timeout_ok`) a timeout."""
        done, dead = self._link.wait(workers, want, timeout_s, [p.sentinel for p in self._res.procs])
        if dead:
            self._res.procs[dead[0]].join(1.0)
            self._fail(f"env worker {dead[0]} died during 'step'; {self._exit_text(dead[0])}")
        if len(done) < want and not timeout_ok:
            self._fail(f"env worker(s) {sorted(set(workers) - set(done))} did not answer 'step' within "
                       f"{timeout_s:g} s (hung or too slow; see EnvSpec.worker_timeout_s)")
        replies: dict[int, list[EpisodeInfo]] = {w: [] for w in done}
        told = [w for w in done if self._link.has_message(w)]  # episodes finished, or an error
        if told:
            replies.update(self._poll(told, "step", self._timeout_s, len(told)))
        return replies

    def _poll(self, workers: list[int], cmd: str, timeout_s: float, want: int,
              timeout_ok: bool = False) -> dict[int, Any]:
        """Replies of `workers` until `want` have answered (or, with `timeout_ok`, until `timeout_s` passed);
        raises EnvError on an error, a death or (without `timeout_ok`) a timeout."""
        conns, procs = self._res.conns, self._res.procs
        replies: dict[int, Any] = {}
        refused: list[str] = []
        deadline = time.monotonic() + timeout_s
        while len(replies) < want:
            waiting = [w for w in workers if w not in replies]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if timeout_ok:
                    break
                self._fail(f"env worker(s) {waiting} did not answer {cmd!r} within {timeout_s:g} s "
                           "(hung or too slow; see EnvSpec.worker_timeout_s)")
            handles = [conns[w] for w in waiting] + [procs[w].sentinel for w in waiting]
            ready = mp.connection.wait(handles, timeout=remaining)
            for w in waiting:
                if conns[w] in ready or (procs[w].sentinel in ready and conns[w].poll()):
                    try:
                        status, payload = conns[w].recv()
                    except (EOFError, OSError):
                        procs[w].join(1.0)
                        self._fail(f"env worker {w} died during {cmd!r}; {self._exit_text(w)}")
                    if status == "error":
                        self._fail(f"env worker {w} failed during {cmd!r}: {payload}")  # summary, traceback
                    if status == "refused":  # the env kept its own state (load_state_dict): usable, the caller
                        refused.append(f"env worker {w}: {payload}")  # starts fresh episodes
                    replies[w] = payload
                elif procs[w].sentinel in ready:
                    procs[w].join(1.0)
                    self._fail(f"env worker {w} died during {cmd!r}; {self._exit_text(w)}")
        if refused:  # every worker has answered: the pipes stay in step
            raise EnvError(f"env state refused ({'; '.join(refused)})")
        return replies

    def _exit_text(self, w: int) -> str:
        proc = self._res.procs[w]
        code = proc.exitcode
        if code is None:
            return f"pid {proc.pid} still running"
        if code < 0:
            return f"pid {proc.pid} killed by signal {signal.Signals(-code).name}"
        return f"pid {proc.pid} exited with code {code}"

    def _fail(self, message: str) -> None:
        self._broken = message.splitlines()[0]
        self._in_flight.clear()
        self._res.join_s = 0.5  # a broken worker may never answer "close": do not wait long for it
        raise EnvError(message)


class _Resources:
    """Processes, pipes and shared memory; `close` is safe to call at any time, any number of times."""

    def __init__(self):
        self.procs: list[Any] = []
        self.conns: list[Any] = []
        self.bells: list[tuple[Any, Any]] = []  # per worker: (the pipe end that wakes it, the end it wakes us on)
        self.shm: shared_memory.SharedMemory | None = None
        self.output = OutputRelay()  # the workers' stdout/stderr, whole lines at a time
        self.join_s = 5.0  # how long close() waits for workers to exit before killing them

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(("close", None))
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass
        deadline = time.monotonic() + self.join_s
        for proc in self.procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        for proc in self.procs:
            if proc.is_alive():
                log.warning("env worker %s (pid %s) did not exit; terminating it", proc.name, proc.pid)
                proc.kill()
                proc.join(2.0)
        for conn in [*self.conns, *(end for pair in self.bells for end in pair)]:
            conn.close()
        self.output.join(2.0)  # the workers' last lines (a crash report, say) before anything else is printed
        if self.shm is not None:
            try:
                self.shm.close()
            except BufferError:  # views still exported (collection order at exit): freed with them
                pass
            try:
                self.shm.unlink()
            except FileNotFoundError:
                pass
        self.procs, self.conns, self.bells, self.shm = [], [], [], None


def _final_rows(final_obs: dict[str, np.ndarray], done: np.ndarray) -> Obs:
    """Final observations for the caller: copied rows where an episode ended, unspecified (uninitialised) elsewhere."""
    out = {k: np.empty_like(a) for k, a in final_obs.items()}
    if done.any():
        for k, a in final_obs.items():
            out[k][done] = a[done]
    return out
