"""`callers_main_hidden`: a spawned child is not told to run the caller's main script again."""

from __future__ import annotations

import sys
import types
from multiprocessing import spawn

from memsched.solvers.processes import callers_main_hidden


def test_spawn_gets_no_main_script_inside_the_block(monkeypatch, tmp_path):
    script = types.ModuleType("__main__")
    script.__file__ = str(tmp_path / "users_script.py")  # a script run as `python users_script.py`
    monkeypatch.setitem(sys.modules, "__main__", script)
    assert spawn.get_preparation_data("child")["init_main_from_path"] == script.__file__
    with callers_main_hidden():
        data = spawn.get_preparation_data("child")
        assert "init_main_from_path" not in data and "init_main_from_name" not in data
    assert sys.modules["__main__"] is script  # given back, also after an error inside the block
    try:
        with callers_main_hidden():
            raise KeyError("x")
    except KeyError:
        pass
    assert sys.modules["__main__"] is script
