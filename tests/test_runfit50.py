"""`memsched run` at sizes this machine cannot allocate: bad input (exit 2, one line naming the sizing flags), as
`memsched profile` answers them, not an internal error (exit 3)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


def test_an_allocation_this_machine_refuses_is_bad_input(cli, monkeypatch):
    import memsched.models.run as model_run

    def refuse(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
                           "you tried to allocate 206158430208 bytes. Error code 12 (Cannot allocate memory)")

    monkeypatch.setattr(model_run, "run", refuse)
    res = cli("run", "resnet18", "--batch", "16384", "--image-size", "1024", "--width", "8", "--budget", "90%",
              "--threads", "1")
    assert res.code == 2, res.err
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "--batch/--image-size" in lines[0] and "does not fit in memory" in lines[0], lines
    assert res.out == ""


def test_another_runtime_error_stays_an_internal_error(cli, monkeypatch):
    import memsched.models.run as model_run

    def broken(*args, **kwargs):
        raise RuntimeError("some bug")

    monkeypatch.setattr(model_run, "run", broken)
    res = cli("run", "resnet18", "--batch", "2", "--image-size", "32", "--width", "8", "--budget", "90%",
              "--threads", "1")
    assert res.code == 3 and "internal error" in res.err, res.err
