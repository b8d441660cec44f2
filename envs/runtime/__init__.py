"""The runtime every family shares: vector (SubprocVecEnv: env workers in subprocesses, their shared memory),
worker (the worker process: its envs stepped from and into shared memory), transport (the step hand-over: counters
in shared memory, a short spin, then a pipe byte),
worker_output (the workers' stdout/stderr relayed a line at a time), helper_signals (the forkserver and workers
sheltered from the job's signals), forkserver_init (what the forkserver imports first). It knows no family: a
worker builds its envs through the registry's factory it is handed."""
