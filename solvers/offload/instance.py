"""A chain with a host link: the offloading instance (docs/offload.md).

The chain file format is extended compatibly by an optional top-level object

    "host_link": {"bandwidth": 12e9, "latency": 0.0}

with the bandwidth in bytes per second and the latency in seconds (per transfer). A chain
file without it is an offloading instance once a bandwidth is given on the command line
(``--bandwidth 12GB/s``). Transfer times are converted to the chain's time unit
(``meta.units.time``: "ms" by default, or "s", "us"), and sizes from the chain's memory unit
(``meta.units.memory``: bytes by default, or a byte unit of `units.MEMORY_UNIT_BYTES` such as
"KiB" or "MB") to bytes; a chain in another memory unit cannot be offloaded (`InputError`).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..chain.instance import Chain
from ..errors import InputError, flag
from ..jsonio import read_json, warn_unknown, warns_once_loaded, write_json_atomic
from ..units import MAX_BYTES, MIN_BANDWIDTH, byte_unit, short_number

#: the keys of a chain file's ``host_link``; others are reported (`jsonio.warn_unknown`) and ignored
LINK_KEYS = ("bandwidth", "latency")
#: largest latency per transfer accepted (seconds): a day
MAX_LATENCY = 86400.0


def memory_unit_bytes(chain: Chain) -> int:
    """Bytes per size unit of `chain` (`units.byte_unit`: 1 for bytes, the default; 1024 for "KiB",
    10^6 for "MB", ...); `InputError` naming the field for a unit that is no byte unit (the link's
    bandwidth is in bytes/s)."""
    return byte_unit(chain, "offloading (transfers over a link in bytes/s)")


@dataclass(eq=False)
class OffloadInstance:
    """`chain` plus a host link of `bandwidth` bytes/s and `latency` seconds per transfer."""

    chain: Chain
    bandwidth: float
    latency: float = 0.0

    def __post_init__(self) -> None:
        # the offloading problem charges B(i) holding its inputs to its end (bwd_overhead, docs/offload.md)
        self.chain = self.chain.held()
        self.check()

    def check(self) -> None:
        """The rules of the loader, also for an instance edited in Python since it was built: the link
        (``bandwidth`` bytes/s in `MIN_BANDWIDTH`..`MAX_BYTES`, ``latency`` seconds in 0..`MAX_LATENCY`,
        stored as floats), a chain timed in seconds and sized in bytes (transfer times exist), and
        `Chain.check`. The first bad value is an `InputError` naming ``host_link.<key>`` or the chain's field."""
        for key, value in (("bandwidth", self.bandwidth), ("latency", self.latency)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):  # a comparison would be a TypeError
                raise InputError(f"{key} must be a number, got {value!r}", field=f"host_link.{key}")
        # (compared exactly: an integer beyond float range, 10**400, is out of range, not an OverflowError)
        if not (MIN_BANDWIDTH <= self.bandwidth <= MAX_BYTES):  # as `units.parse_bandwidth` (--bandwidth)
            raise InputError(_out_of_range("bandwidth", self.bandwidth), field="host_link.bandwidth")
        if not 0 <= self.latency <= MAX_LATENCY:
            raise InputError(_out_of_range("latency", self.latency), field="host_link.latency")
        self.bandwidth, self.latency = float(self.bandwidth), float(self.latency)  # in range: finite floats
        self.chain.time_units_per_second()  # a chain timed in counted work (MFLOP) has no transfer times
        memory_unit_bytes(self.chain)  # a chain whose sizes are in no byte unit has no transfer times either
        self.chain.check()  # a chain edited in place since it was built (x[3] = -1) is refused here too

    @property
    def name(self) -> str:
        """The chain's name."""
        return self.chain.name

    @property
    def length(self) -> int:
        """Number of stages L of the chain."""
        return self.chain.length

    @property
    def time_scale(self) -> float:
        """Chain time units per second."""
        return self.chain.time_units_per_second()

    @property
    def bytes_per_unit(self) -> int:
        """Bytes per size unit of the chain (`memory_unit_bytes`)."""
        return memory_unit_bytes(self.chain)

    def transfer_time(self, size: int) -> float:
        """Time (chain unit) to move `size` size units (the chain's ``meta.units.memory``, `bytes_per_unit`
        bytes each) across the link, latency included."""
        return (size * self.bytes_per_unit / self.bandwidth + self.latency) * self.time_scale

    def to_dict(self) -> dict[str, Any]:
        """The chain's JSON object with a ``host_link`` (bandwidth in bytes/s, latency in s)."""
        data = self.chain.to_dict()
        data["host_link"] = {"bandwidth": self.bandwidth, "latency": self.latency}
        return data

    def save(self, path: str | Path) -> None:
        """Write the instance's JSON to `path` (atomically)."""
        write_json_atomic(path, self.to_dict())

    @classmethod
    @warns_once_loaded
    def load(cls, path: str | Path, bandwidth: float | None = None, latency: float | None = None) -> OffloadInstance:
        """A chain file with a "host_link" object, or any chain file plus `bandwidth` (bytes/s). A key of
        ``host_link`` other than `LINK_KEYS` is an `UnknownFieldWarning` (the chain's, `Chain.from_dict`)."""
        path = str(path)
        data = read_json(path)
        chain = Chain.from_dict(data, path=path)
        link = data.get("host_link")
        if link is not None and not isinstance(link, dict):
            raise InputError("must be an object", path=path, field="host_link")
        link = link or {}
        warn_unknown(link, LINK_KEYS, path, "host_link", "a host link")
        if bandwidth is None:
            if "bandwidth" not in link:
                raise InputError(f"no host bandwidth: add host_link.bandwidth to the file or pass {flag('bandwidth')}",
                                 path=path, field="host_link.bandwidth")
            bandwidth = link["bandwidth"]
        if latency is None:
            latency = link.get("latency", 0.0)
        for key, value in (("bandwidth", bandwidth), ("latency", latency)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"must be a number, got {value!r}", path=path, field=f"host_link.{key}")
        try:  # the range checks come first (`__post_init__`): float(10**400) would overflow
            return cls(chain, bandwidth, latency)
        except InputError as err:  # the same message, with the file (and the field kept apart, as raised)
            raise InputError(err.message, path=path, field=err.field) from None


def _out_of_range(key: str, value: float) -> str:
    """The message for a host link's `key` ("bandwidth" in bytes/s or "latency" in seconds) out of
    its range; `value` as the file wrote it, an integer too long to print by its number of digits."""
    shown = short_number(value) if isinstance(value, int) else repr(value)
    if key == "bandwidth":
        return f"bandwidth must be a number of bytes/s in {MIN_BANDWIDTH:g}..{MAX_BYTES}, got {shown}"
    return f"latency must be a number of seconds in 0..{MAX_LATENCY:g}, got {shown}"
