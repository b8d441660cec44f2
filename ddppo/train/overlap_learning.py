"""rollout.overlap_learning: the PPO update of rollout k runs on a learner thread while the collector already
collects rollout k+1 (habitat-baselines VER's `overlap_rollouts_and_learn`).

    main thread     collect k+1 (acting copy, storage B) --------------> join | sync k+1, stats k, stop, save
    learner thread  PPO update on rollout k (policy, storage A, all-reduces) ^

What it trades: exactly one update of policy lag. Rollout k+1 is collected by the acting copy, which holds the
weights from before update k (it is refreshed once update k has joined, before rollout k+2 starts), so update
k+1 starts one update away from the behaviour policy. The clipped objective stays correct: PPO's ratio divides
by the behaviour log-probabilities stored with the rollout, not by the learner's current ones; the GAE
bootstrap and truncation bootstraps use the acting copy too, like the stored values.

Why a thread for the learner, one torch thread each: torch releases the GIL inside its kernels and env workers
step in their own processes, so the collector (waiting on pipes, acting) and the learner (forward, backward,
Adam) run on separate cores. OpenMP's thread count is per thread: the learner thread sets the main thread's
count (run.torch_threads) for itself.

Two storages (double buffer): the learner reads one while the collector writes the other; they swap after the
join. Nothing else is shared: the collector only touches the acting copy, the learner only the policy.

Collectives: only the learner thread issues any while it runs (advantage statistics, gradient buckets); the
main thread issues its own (end-of-rollout sync, stats, stop agreement, checkpoint gather) only after the join,
so one thread at a time per process, in the same order on every rank. The collection's preemption store calls
are not collectives (DistContext's store thread serves them). A lost peer fails the learner's all-reduce with
PeerLostError, which `join` raises on the main thread.

CUDA: the learner runs on its own stream. It waits for the main stream before it starts (GAE's writes to its
storage, the acting copy's read of the weights), and the main stream waits for it after the join (before the
refresh reads the new weights and the collector overwrites the storage it read). Between those points the two
streams touch disjoint tensors. On CPU there are no streams: the thread's join is the synchronisation.
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Callable

import numpy as np
import torch

from ddppo import timing
from ddppo.model.actor_critic import ActorCritic
from ddppo.rollout.storage import RolloutStorage
from ddppo.timing import Timer
from ddppo.train.learning import Outcome, UpdatePhases


def acting_copy(policy: ActorCritic) -> ActorCritic:
    """A copy of `policy` that acts while the learner updates `policy` (no gradients; refreshed by `refresh`,
    whose in-place copies keep the layout). deepcopy copies an LSTM/GRU's weights one by one and never calls
    `flatten_parameters`: on CUDA cuDNN would warn that they are not one contiguous chunk and repack them on every
    acting step, so the copy's recurrent modules are flattened here (a no-op on the CPU)."""
    acting = copy.deepcopy(policy)
    for module in acting.modules():
        if isinstance(module, torch.nn.RNNBase):
            module.flatten_parameters()
    for p in acting.parameters():
        p.requires_grad_(False)
    return acting


class LearnerThread:
    """Runs one call at a time on a fresh daemon thread (on CUDA under its own stream); `join` returns its
    result or raises its exception on the caller's thread."""

    def __init__(self, device: torch.device):
        self.device = device
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self._thread: threading.Thread | None = None
        self._outcome: tuple[bool, Any] = (True, None)

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._thread is not None:
            raise RuntimeError("the learner thread is still running")
        threads = torch.get_num_threads()
        if self.stream is not None:
            self.stream.wait_stream(torch.cuda.current_stream(self.device))

        def run() -> None:
            torch.set_num_threads(threads)  # OpenMP's count is per thread: the same as the main thread's
            try:
                if self.stream is None:
                    self._outcome = (True, fn(*args))
                else:
                    with torch.cuda.stream(self.stream):
                        self._outcome = (True, fn(*args))
            except BaseException as err:  # handed to `join`
                self._outcome = (False, err)

        self._thread = threading.Thread(target=run, name="ddppo-learner", daemon=True)
        self._thread.start()

    def join(self) -> Any:
        """Wait for the call; its result, or its exception raised here."""
        if self._thread is None:
            raise RuntimeError("no learner call to join")
        self._thread.join()
        self._thread = None
        if self.stream is not None:
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
        ok, value = self._outcome
        self._outcome = (True, None)
        if not ok:
            raise value
        return value


class OverlapLearning:
    """rollout.overlap_learning as the training loop's learning strategy (train/learning.py): the double buffer,
    the acting copy and the learner thread, ordering the same phases as SerialLearning (train/phases.py).

    `learning` is the storage whose rollout the next update learns on (the rollout collected last); `collecting` the
    one the collector fills meanwhile; `ready` is that rollout with its advantages (None: nothing collected yet,
    at the start and after a resume, so the first step collects one rollout first).
    """

    def __init__(self, phases: UpdatePhases, policy: ActorCritic, acting: ActorCritic, learning: RolloutStorage,
                 collecting: RolloutStorage, device: torch.device, seed: int):
        self.phases, self.policy, self.acting = phases, policy, acting
        self.learning, self.collecting = learning, collecting
        self.device, self.seed = device, seed
        self.learner = LearnerThread(device)
        self.ready: Any = None

    @staticmethod
    def generator(seed: int, update: int) -> torch.Generator:
        """The learner's own generator for update `update`'s minibatches. Were both threads to draw from torch's
        global generator, the order of their draws (actions sampled, minibatch permutations) would depend on
        timing; this way a run repeats. Derived from (rank seed, update): no state to checkpoint."""
        return torch.Generator().manual_seed(int(np.random.SeedSequence([seed, update]).generate_state(1)[0]))

    @torch.no_grad()
    def refresh(self) -> None:
        """The acting copy takes the policy's current weights (after an update has joined, or a resume)."""
        for dst, src in zip(self.acting.parameters(), self.policy.parameters()):
            dst.copy_(src)
        for dst, src in zip(self.acting.buffers(), self.policy.buffers()):
            dst.copy_(src)

    def swap(self) -> None:
        """The rollout just collected is learned on next; the one just learned on is refilled."""
        self.learning, self.collecting = self.collecting, self.learning

    def step(self, update: int) -> Outcome:
        """Update `update` learns on the rollout collected last while the acting copy collects the next one; after
        the join, the next rollout's end-of-rollout sync, then the acting copy takes the new weights. The first
        call (and the first after a resume) collects its own rollout first, with the acting copy equal to the
        policy."""
        p = self.phases
        if self.ready is None:
            self.refresh()
            self.ready = p.collect(update, self.learning)
            p.agree(self.ready)
        batch = self.ready
        learn_timer, generator = Timer(self.device), self.generator(self.seed, update)
        self.learner.start(lambda: (*p.learn(batch, learn_timer, generator), learn_timer.pop()))
        try:
            following = p.collect(update + 1, self.collecting)  # advantages with the acting copy's bootstrap
        except BaseException:
            self.close()
            raise
        with p.timer(timing.LEARNER_WAIT):
            result, lr, beta, learn_timings = self.learner.join()
        p.agree(following)
        p.hand_over()
        self.ready = following
        self.refresh()
        self.swap()
        timings = p.timer.pop()
        for k, v in learn_timings.items():
            timings[k] = timings.get(k, 0.0) + v
        return Outcome(batch.result, batch.advantages, result, lr, beta, timings, batch.objective)

    def close(self) -> None:
        """Wait for a learner call still running (an error on the main thread), dropping its outcome: the
        process group must not be torn down under a collective in flight."""
        if self.learner.running:
            try:
                self.learner.join()
            except BaseException:  # the main thread's error is the one reported
                pass
