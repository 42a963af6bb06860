"""Every hook is documented in docs/hooks.md and implemented by a plugin or a test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runpoint.seams import hookspecs

ROOT = Path(__file__).parents[2]
HOOKS = sorted(name for name in vars(hookspecs) if name.startswith("runpoint_"))


def test_there_are_hooks() -> None:
    assert len(HOOKS) == 19


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_documented(hook: str) -> None:
    documented = re.findall(r"^### (\w+)$", (ROOT / "docs" / "hooks.md").read_text(), re.M)
    assert hook in documented


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_implemented_by_a_plugin_or_a_test(hook: str) -> None:
    sources = [*ROOT.glob("plugins/**/*.py"), *ROOT.glob("contrib/*/*/*.py")]
    tests = [p for p in ROOT.glob("tests/**/*.py") if p.name != Path(__file__).name]
    implemented = any(f"def {hook}(" in p.read_text() for p in sources + tests)
    assert implemented, f"no plugin or test implements {hook}"
