"""One sweep at a time per output folder: an advisory lock on ``<output>/.sweep.lock``.

The lock is `fcntl.flock` on an open file, so the kernel releases it when the holder ends in
any way (also ``kill -9``): a stale lock file never blocks a later sweep. The file holds the
holder's pid, sweep name and start time, for the message of the sweep that is refused. Where
`fcntl` is missing (Windows) the lock is a no-op.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from memsched.solvers.errors import InputError

LOCK_NAME = ".sweep.lock"


def check_lock_path(out_dir: Path) -> None:
    """Before any work: the lock file of `out_dir` is not a folder; else `InputError` naming it."""
    path = Path(out_dir) / LOCK_NAME
    if path.is_dir():
        raise InputError("is a folder, expected a file (the sweep's lock file)", path=str(path))


class SweepLock:
    """Hold the lock of `out_dir` while in the ``with`` block; `InputError` when another sweep holds
    it, or when its file cannot be opened (naming it)."""

    def __init__(self, out_dir: Path, name: str) -> None:
        self.path = Path(out_dir) / LOCK_NAME
        self.name = name
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the exclusive lock on the sweep's output folder (no-op where fcntl is missing)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:  # a folder in its place, no permission
            raise InputError(f"cannot open the sweep's lock file ({err.strerror or err})",
                             path=str(self.path)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            who = (f"sweep {holder.get('sweep')!r} (pid {holder.get('pid')}, started {holder.get('started')})"
                   if holder else "another sweep")
            raise InputError(f"{who} is already writing to this folder; wait for it to end, or give another "
                             f"--output", path=str(self.path.parent)) from None
        info = {"pid": os.getpid(), "sweep": self.name,
                "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Release the lock if held."""
        if self._fd is None:
            return
        import fcntl

        os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> SweepLock:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _holder(fd: int) -> dict[str, Any]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
