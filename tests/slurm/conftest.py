"""Session fixture: a real, throwaway SLURM cluster (munged + slurmctld + two slurmd) for the slurm tests.

The tests skip with the reason when SLURM cannot be had here (not root, no apt, daemons fail to start),
unless DDPPO_REQUIRE_SLURM=1 (CI), where that is a failure.
"""

from __future__ import annotations

import os
import sys
import time

import pytest

from local_slurm import ClusterUnavailable, LocalSlurm, install_packages

REQUIRED = os.environ.get("DDPPO_REQUIRE_SLURM") == "1"


def unavailable(reason: str):
    if REQUIRED:
        pytest.fail(f"DDPPO_REQUIRE_SLURM=1 but no local SLURM: {reason}", pytrace=False)
    pytest.skip(f"no local SLURM: {reason} (set DDPPO_REQUIRE_SLURM=1 to make this a failure)")


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A running two-node cluster (nodes n1, n2: 2 CPUs each, NodeAddr 127.0.0.1); always torn down."""
    if not sys.platform.startswith("linux"):
        unavailable(f"needs Linux, this is {sys.platform}")
    if os.geteuid() != 0:
        unavailable("the daemons (slurmd runs jobs as their owner) need root")
    t0 = time.monotonic()
    try:
        install_packages()
    except ClusterUnavailable as e:
        unavailable(str(e))
    t_install = time.monotonic() - t0
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except ClusterUnavailable as e:
        cluster.stop()
        unavailable(str(e))
    except BaseException:
        cluster.stop()
        raise
    print(f"\nlocal SLURM up: install {t_install:.1f} s, start {time.monotonic() - t0 - t_install:.1f} s, "
          f"SLURM_CONF={cluster.conf}")
    try:
        yield cluster
    finally:
        t1 = time.monotonic()
        cluster.stop()
        print(f"\nlocal SLURM down in {time.monotonic() - t1:.1f} s")
