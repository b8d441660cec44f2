"""Imported by the env workers' forkserver before anything else (its first preload module; see
ddppo.envs.runtime.helper_signals): the forkserver and every worker it forks ignore SIGINT, SIGTERM and SIGUSR1.
Never import it in a rank: the rank would stop hearing the job's signals."""

from ddppo.envs.runtime.helper_signals import ignore_job_signals

ignore_job_signals()
