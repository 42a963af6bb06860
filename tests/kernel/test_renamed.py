"""The module names a plugin imported before the kernel was grouped by layer still import,
as the very modules under their new names, with a warning naming the new one."""

from __future__ import annotations

import importlib
import sys

import pytest

from runpoint import RENAMED


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED.items()))
def test_an_old_module_name_is_its_new_module_and_warns(old: str, new: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_a_plugin_written_against_an_old_name_registers_the_same_classes() -> None:
    sys.modules.pop("runpoint.policy", None)
    with pytest.warns(DeprecationWarning):
        old = importlib.import_module("runpoint.policy")  # mypy knows only the new name
    from runpoint.seams.policy import Boundary

    assert old.Boundary is Boundary


def test_a_name_that_never_existed_is_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("runpoint.loop")
