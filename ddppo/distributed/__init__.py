"""The distributed context: rank discovery, process groups, and every collective.

One code path: a single process is a process group of size 1 (backed by an
in-memory store), so the trainer never branches on "distributed or not".

Roles are named groups (placement.py): the config's `placement` section puts each role on ranks, and every
collective below runs on one role's group, `train` unless it names another. The colocated default is `train` on
every rank, whose group is the one group the trainer has always used.

Collectives per update, identical on every rank and in the same order:
  1. `rollout_barrier`         - end of collection (its wait time is the straggler wait)
  2. `all_reduce_sums`         - advantage statistics (sum, sum of squares, count), once, before the
                                 epochs (when ppo.normalize_advantage with GAE, the same on every rank)
  3. `all_reduce_async`        - gradient buckets, once per minibatch (epochs x num_mini_batch), launched
                                 from autograd hooks as backward fills them, in bucket order (buckets.py)
  4. `all_gather_stats`        - episode stats, losses, timings and the stop flag
(+ `gather_objects` on checkpoint updates, which every rank knows in advance).
Waits that are not collectives (ranks arriving minutes apart, e.g. evaluation's `wait_for_ranks`) go through
the store, every call bounded by dist.timeout_s and the whole wait by a deadline.
What the launcher says (rank, world, rendezvous address) is read in launch.py.

The package: context.py (DistContext, the guard, PeerLostError), placement.py (roles on rank ranges, the named
groups they make), store.py (bounded store calls), cuda.py (GPU per rank, shared GPUs, NCCL's failure handling,
cuBLAS), startup.py (store, process group, threads), rendezvous.py (joining, one-line failures), launch.py (what
the launcher says), generation.py (the namespace of one start, agreed by every rank), buckets.py (gradient
buckets all-reduced as backward fills them),
deadline.py (the last-resort bound on a rank that is leaving or stuck in a native call), torch_env.py (torch's NCCL
variables parsed as torch parses them), port.py (a SLURM job's rendezvous port), visible.py (the GPUs a process may
use).
"""

from ddppo.distributed.context import DistContext, PeerLostError, PendingRead, rank_seed
from ddppo.distributed.cuda import choose_device
from ddppo.distributed.launch import Launch, expand_first_host, read_launch, without_launch_vars
from ddppo.distributed.placement import TRAIN, Group, Placement
from ddppo.distributed.startup import init_distributed, run_in_process_group, torch_threads

__all__ = ["TRAIN", "DistContext", "Group", "Launch", "PeerLostError", "PendingRead", "Placement", "choose_device",
           "expand_first_host", "init_distributed", "rank_seed", "read_launch", "run_in_process_group", "torch_threads",
           "without_launch_vars"]
