"""The project's own files a user looks for: CITATION.cff (Citation File Format 1.2.0: the fields it requires, the
DD-PPO paper referenced, the same version and repository as the package and the site) and CHANGELOG.md (an entry
per plan, dated, and the version policy that says what is public)."""

from __future__ import annotations

import re

import yaml

from testutil import REPO

CFF = REPO / "CITATION.cff"
CHANGELOG = REPO / "CHANGELOG.md"


def pyproject_value(key: str) -> str | None:
    found = re.search(rf'^{key} = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    return found.group(1) if found else None


def test_the_citation_file_names_ddppo_and_the_dd_ppo_paper():
    cff = yaml.safe_load(CFF.read_text())
    assert cff["cff-version"] == "1.2.0"
    assert {"message", "title", "authors"} <= set(cff) and cff["type"] == "software"
    assert cff["version"] == pyproject_value("version")
    site = yaml.safe_load((REPO / "mkdocs.yml").read_text().split("\nnav:")[0].replace("!ENV", ""))
    # one address or none in all three (none is recorded yet: none is invented)
    assert cff.get("repository-code") == site.get("repo_url") == pyproject_value("Source")
    (paper,) = [r for r in cff["references"] if "DD-PPO" in r["title"]]
    assert paper["year"] == 2020 and paper["authors"][0]["family-names"] == "Wijmans"
    assert all("family-names" in a or "name" in a for r in [cff, *cff["references"]] for a in r["authors"])


def test_the_changelog_is_dated_by_plan_and_says_what_is_public():
    text = CHANGELOG.read_text()
    entries = re.findall(r"^### (\d{4}-\d{2}-\d{2}): .*\(issues? ([\d, -]+)\)$", text, re.M)
    assert len(entries) >= 6, entries
    dates = [d for d, _ in entries]
    assert dates == sorted(dates, reverse=True)  # newest first
    policy = text.split("## Version policy", 1)[1]
    for public in ("command line", "Config keys", "checkpoint format", "Metric names"):
        assert public.lower() in policy.lower(), public
