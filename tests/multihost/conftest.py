"""Fixtures of the multi-host tests: test hosts as network namespaces (tests/multihost/netns.py).

They skip with one reason where namespaces cannot be built (not root, no iproute2), unless
DDPPO_REQUIRE_NETNS=1 (CI, which runs as root), where that is a failure. iproute2 is installed with apt-get
when missing, as tests/slurm does for slurm-wlm.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import netns  # noqa: E402
import testutil  # noqa: E402


def unavailable(reason: str):
    testutil.unavailable("DDPPO_REQUIRE_NETNS", "no network namespaces", reason)


@pytest.fixture(scope="session")
def _netns_ready():
    try:
        netns.install_packages()
    except netns.NetnsUnavailable as err:
        unavailable(str(err))
    reason = netns.why_unavailable()
    if reason:
        unavailable(reason)
    netns.remove_stale()  # networks of killed earlier runs (their owner pid is gone), ours only


@pytest.fixture
def network(_netns_ready):
    """`network(n_hosts, resolve="cluster"|"debian")` -> netns.Network; every network is removed at the end of
    the test, also when it fails or is interrupted."""
    made: list[netns.Network] = []

    def make(n_hosts: int = 2, resolve: str = "cluster") -> netns.Network:
        try:
            net = netns.Network(n_hosts, resolve)
        except RuntimeError as err:
            unavailable(str(err))
        made.append(net)
        return net

    try:
        yield make
    finally:
        for net in made:
            net.close()


@pytest.fixture(scope="session")
def netem(_netns_ready):
    """Skips (never fails: a kernel feature, not a package) where `tc netem` does not work."""
    reason = netns.netem_available()
    if reason:
        pytest.skip(reason)
