"""Confidence intervals and the sharing-out of episodes (pure functions)."""

import math

import pytest

from ddppo.eval.stats import dataset_quotas, split, summarize, summarize_episodes, t_quantile


@pytest.mark.parametrize("df, table", [(1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (10, 2.228), (30, 2.042),
                                       (1000, 1.962)])
def test_t_quantile_matches_the_table(df, table):
    assert t_quantile(0.975, df) == pytest.approx(table, rel=1.5e-3)


def test_wilson_interval_for_success():
    s = summarize([1.0] * 8 + [0.0] * 2, binary=True)  # 8/10: Wilson 95% CI [0.490, 0.943]
    assert s["mean"] == 0.8 and s["count"] == 10 and s["ci_method"] == "wilson"
    assert s["ci95"] == pytest.approx([0.4902, 0.9433], abs=1e-3)
    assert summarize([0.0] * 24, binary=True)["ci95"] == pytest.approx([0.0, 0.1379], abs=1e-3)


def test_student_t_interval_and_single_episode():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    half = 3.182 * math.sqrt(5 / 3) / 2
    assert s["ci95"] == pytest.approx([2.5 - half, 2.5 + half], abs=5e-3) and s["std"] == pytest.approx(1.2910, 1e-4)
    assert summarize([7.0])["ci95"] == [None, None]
    assert summarize([0.0] * 9 + [30.0], bounds=(0.0, math.inf))["ci95"][0] == 0.0  # a count's CI stays >= 0


def test_metrics_only_where_defined():
    eps = [{"metrics": {"success": 1.0, "spl": 0.5, "return": 2.0, "length": 10.0}},
           {"metrics": {"success": 0.0, "spl": 0.0, "return": -1.0, "length": 20.0, "soft_spl": 0.25}}]
    out = summarize_episodes(eps)
    assert set(out) == {"success", "spl", "soft_spl", "reward", "episode_length"}
    assert out["soft_spl"]["count"] == 1 and out["episode_length"]["mean"] == 15.0


def test_split_and_dataset_quotas():
    assert split(10, 4) == [2, 3, 2, 3] and sum(split(7, 3)) == 7 and split(1, 3) == [0, 0, 1]
    # rank 1 env 1 repeats an episode of rank 0 (more slots than episodes): counted once, by rank 0
    quotas, total = dataset_quotas([[["a", "b"], ["c"]], [["d"], ["a"]]])
    assert quotas == [[2, 1], [1, 0]] and total == 4


def test_every_other_scalar_metric_is_summarised_under_its_own_name_with_a_ci(caplog):
    """An env's own metric (habitat-lab's softspl, any custom measure) gets a summary and CI like the known ones;
    a value that is not a finite number is left out with one debug line; the known names stay as they were."""
    eps = [{"metrics": {"success": 1.0, "return": 1.0, "softspl": 0.9, "custom": 3.0, "trace": [1, 2]}},
           {"metrics": {"success": 0.0, "return": 0.0, "softspl": 0.1, "custom": 5.0, "trace": [3]}},
           {"metrics": {"success": 0.0, "return": 0.5, "softspl": 0.2, "custom": float("nan")}}]
    with caplog.at_level("DEBUG", logger="ddppo.eval.stats"):
        out = summarize_episodes(eps)
    assert list(out) == ["success", "reward", "custom", "softspl"]  # known first (METRICS order), then sorted
    assert out["custom"]["count"] == 2 and out["custom"]["mean"] == 4.0 and out["custom"]["ci_method"] == "student-t"
    half = 12.706 * math.sqrt(2.0) / math.sqrt(2)
    assert out["custom"]["ci95"] == pytest.approx([4.0 - half, 4.0 + half], rel=2e-3)
    assert out["softspl"]["ci95"][0] >= 0.0 and out["softspl"]["ci95"][1] <= 1.0  # habitat-lab's range: [0, 1]
    assert [r.getMessage() for r in caplog.records] == [
        "eval metric 'custom': 1 value(s) that are not finite numbers left out",
        "eval metric 'trace': 2 value(s) that are not finite numbers left out"]
