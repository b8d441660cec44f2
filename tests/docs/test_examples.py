"""The guides' worked examples are the files the tests run: every ```python title="NAME.py"``` block of a guide
is docs/examples/NAME.py, character for character (tests/integration/test_own_environment.py,
test_own_policy.py and tests/api/test_python_api_example.py run those files through the real CLI and package)."""

from __future__ import annotations

import re

import pytest

from testutil import REPO

EXAMPLES = REPO / "docs" / "examples"
GUIDES = ["custom-environment.md", "custom-policy.md", "custom-core.md", "python-api.md", "objectives.md"]
BLOCK = re.compile(r'^```python title="([\w.]+)"\n(.*?)^```$', re.S | re.M)


def titled_blocks(text: str) -> dict[str, str]:
    return {name: body for name, body in BLOCK.findall(text)}


@pytest.mark.parametrize("guide", GUIDES)
def test_a_guide_shows_its_example_file_as_it_is(guide):
    blocks = titled_blocks((REPO / "docs" / "guides" / guide).read_text())
    assert blocks, f"{guide} shows no example file"
    for name, body in blocks.items():
        assert body == (EXAMPLES / name).read_text(), f"{guide}'s {name} differs from docs/examples/{name}"


def test_the_check_can_fail():
    text = '```python title="a.py"\nx = 1\n```\n\n```python\nnot titled\n```\n'
    assert titled_blocks(text) == {"a.py": "x = 1\n"}
