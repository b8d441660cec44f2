"""`ddppo bench env-fps --transport` measures every round trip it names (figures only: nothing timed is asserted)."""

from ddppo.benchmarks.speed.transport_rtt import round_trips


def test_every_round_trip_is_measured():
    rows = round_trips(samples=50)
    assert [what.split(",")[0].split(" (")[0] for what, *_ in rows] == [
        "bare multiprocessing Pipe", "shared counter", "env worker step", "env worker step"]
    assert all(0 < p50 <= p90 for _, p50, p90 in rows)
