"""The runtime every family shares: vector (SubprocVecEnv: env workers in subprocesses, their shared memory),
worker_output (the workers' stdout/stderr relayed a line at a time), helper_signals (the forkserver and workers
sheltered from the job's signals), forkserver_init (what the forkserver imports first). It knows no family: a
worker builds its envs through the registry's factory it is handed."""
