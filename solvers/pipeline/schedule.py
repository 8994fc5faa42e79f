"""Schedules of Problem 4: a `Partition` of the L layers into contiguous `Stage`s (each on
``replicas`` devices), with the pipeline schedule that runs it (1f1b or gpipe, m micro-batches).
JSON ``{"format": "memsched.partition/1", "stages": [{"first_layer", "last_layer", "replicas"}],
...}``. A DAG partition (stage boundaries at antichains of the layer DAG) also carries
``"order"``: a topological order of the layers in which every stage is contiguous; first_layer
and last_layer are then positions in that order and ``"layers"`` lists each stage's layers.
An interleaved (non-contiguous) allocation carries ``"device_of"``: the device of each stage,
several stages possibly sharing a device.
The referee that charges period and memory is `solvers.pipeline.simulator`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..offload.instance import MAX_LATENCY
from ..units import MAX_BYTES, MIN_BANDWIDTH

if TYPE_CHECKING:
    from .instance import Pipeline

SCHEDULES = ("1f1b", "gpipe")
FORMAT = "memsched.partition/1"
#: the most devices (and replicas of a stage) and micro-batches a partition file may name (as the
#: command line's --devices and --micro-batches), and the largest layer index it may name
MAX_DEVICES = 10**6
MAX_MICRO_BATCHES = 10**6
MAX_LAYER = 10**6


def _json_text(value: Any) -> str:
    """`value` as a partition file spells it (true, "2", 1.5), at most 60 characters."""
    try:
        return json.dumps(value)[:60]
    except (TypeError, ValueError):
        return repr(value)[:60]


def _integer(value: Any, *, path: str, field: str, low: int, high: int) -> int:
    """An integer of a partition file in low..high (a boolean, a float or a string is not one)."""
    if value is None:
        raise InputError("missing (an integer is needed)", path=path, field=field)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"must be an integer in {low}..{high}, got {_json_text(value)}", path=path, field=field)
    if not low <= value <= high:
        raise InputError(f"must be an integer in {low}..{high}, got {value}", path=path, field=field)
    return value


#: the machine parameters a partition was solved with (`memsched partition --json` records them in
#: its partition object): bytes kept per weight byte, link bandwidth (bytes/s; null: communication
#: not charged), seconds per tensor crossing a boundary
MACHINE_KEYS = ("weight_factor", "bandwidth", "latency")
#: the largest weight factor a partition file may record: the range of ``--weight-factor`` (the
#: commands' `cost`, at most 1e15), beyond which weight bytes overflow the simulator's sums
MAX_WEIGHT_FACTOR = 1e15


def _machine_value(value: Any, *, path: str, field: str) -> float | None:
    """One machine parameter of a partition file, in the range of its command-line flag: weight_factor
    in 0..`MAX_WEIGHT_FACTOR`, bandwidth in `units.MIN_BANDWIDTH`..`units.MAX_BYTES` bytes/s (or null:
    not charged), latency in 0..`offload.instance.MAX_LATENCY` seconds; so that the replayed period
    stays finite. `InputError` naming `path` and `field` otherwise."""
    bandwidth = field.endswith("bandwidth")
    if bandwidth and value is None:
        return None
    low, high = (MIN_BANDWIDTH, float(MAX_BYTES)) if bandwidth else \
        (0.0, MAX_LATENCY if field.endswith("latency") else MAX_WEIGHT_FACTOR)
    # (compared as is, not as a float: float() overflows on a huge int)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:  # NaN fails
        want = f"a number of bytes/s in {low:g}..{MAX_BYTES} or null" if bandwidth \
            else f"a finite number in 0..{high:g}"
        raise InputError(f"must be {want}, got {_json_text(value)}", path=path, field=field)
    return float(value)


def machine_from_json(data: Any, *, path: str = "<partition>") -> dict[str, float | None]:
    """The machine a partition was solved with, as far as its JSON records it: a dict with the
    keys of `MACHINE_KEYS` that are present (``weight_factor``; ``bandwidth`` in bytes/s, None
    when communication was not charged; ``latency`` in seconds). Read from the partition object
    (``memsched partition --json`` writes them there) and, for the whole output of that command,
    from its top level (older outputs recorded them only there). Empty for a file that records
    none of them (an older bare partition): the caller keeps its defaults. `InputError` naming
    the field for a value of the wrong kind."""
    found: dict[str, float | None] = {}
    if not isinstance(data, dict):
        return found
    inner = data.get("schedule")
    sources = [(inner, "schedule."), (data, "")] if isinstance(inner, dict) else [(data, "")]
    for src, prefix in sources:
        for key in MACHINE_KEYS:
            if key in src and key not in found:
                found[key] = _machine_value(src[key], path=path, field=prefix + key)
    return found


def machine_field(data: Any, key: str) -> str:
    """The field of a partition's JSON that `machine_from_json` reads machine parameter `key` from:
    ``schedule.KEY`` when its ``schedule`` object has it (read first), else ``KEY``."""
    inner = data.get("schedule") if isinstance(data, dict) else None
    return f"schedule.{key}" if isinstance(inner, dict) and key in inner else key


def on_machine(inst: Pipeline, machine: dict[str, float | None], *, path: str | None, field: str,
               hint: str | None = None) -> Pipeline:
    """`inst` on `machine` (the `MACHINE_KEYS` it has replace the instance's: weight factor, bandwidth in
    bytes/s, latency in s), as ``memsched simulate`` / ``plot`` and `memsched.simulate` / `memsched.plot`
    replay a partition. A latency > 0 needs a bandwidth (machine's, else the instance's): communication
    is not charged without one, so the latency would be silently dropped; `InputError` naming `path` and
    `field` (where the latency came from: ``schedule.latency``, ``latency``, ``--latency``) and `hint`."""
    bandwidth = machine.get("bandwidth", inst.bandwidth)
    if machine.get("latency") and bandwidth is None:
        why = "a latency needs a bandwidth (communication is not charged without one)"
        raise InputError(f"{why}; {hint}" if hint else why, path=path, field=field)
    return inst.with_machine(bandwidth=bandwidth, weight_factor=machine.get("weight_factor"),
                             latency=machine.get("latency"))


def contiguous_span(layers: list[int]) -> tuple[int, int] | None:
    """(first, last) when `layers` (instance indices) are exactly ``first..last`` of the instance's
    layer order, whatever the order they are listed in; None when they leave a gap (or are empty)."""
    if not layers or len(set(layers)) != len(layers):
        return None
    first, last = min(layers), max(layers)
    return (first, last) if last - first + 1 == len(layers) else None


def layer_runs(layers: list[int]) -> str:
    """`layers` (instance indices) sorted, as comma-separated runs: ``[0, 2]`` -> ``"0,2"``,
    ``[3, 1, 2, 5]`` -> ``"1-3,5"``; empty -> ``""``."""
    runs: list[list[int]] = []
    for v in sorted(set(layers)):
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


@dataclass
class Stage:
    """Layers ``first..last`` (inclusive, 0-based) on ``replicas`` devices; ``time`` and
    ``memory`` are the simulator's values once evaluated."""

    first: int
    last: int
    replicas: int = 1
    time: float | None = None
    memory: int | None = None
    in_flight: int | None = None
    link_time: float | None = None


@dataclass
class Partition:
    """A partition into stages with the schedule that runs it (1f1b or gpipe, m micro-batches)."""

    stages: list[Stage]
    schedule: str = "1f1b"
    micro_batches: int | None = None
    devices: int | None = None
    period: float | None = None
    peak_memory: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    order: list[int] | None = None
    device_of: list[int] | None = None

    def stage_layers(self) -> list[list[int]]:
        """Per stage, its layers (instance indices): ``order[first..last]`` for a DAG partition."""
        pick = self.order if self.order is not None else None
        return [[pick[p] if pick is not None else p for p in range(s.first, s.last + 1)] for s in self.stages]

    def stage_span(self, k: int) -> str:
        """Stage `k`'s layers as the outputs print them: ``"first-last"`` for a contiguous partition
        (``"2-2"`` for one layer), and for a DAG partition (with an `order`) its layers as instance
        indices in runs (`layer_runs`: ``"0,2"``, ``"1-3,5"``), never the positions in the order."""
        s = self.stages[k]
        if self.order is None:
            return f"{s.first}-{s.last}"
        return layer_runs([self.order[p] for p in range(s.first, s.last + 1) if 0 <= p < len(self.order)])

    @classmethod
    def from_bounds(cls, bounds: list[tuple[int, int]] | list[tuple[int, int, int]], *, schedule: str = "1f1b",
                    micro_batches: int | None = None, devices: int | None = None) -> Partition:
        """From ``[(first, last)]`` or ``[(first, last, replicas)]``."""
        stages = [Stage(b[0], b[1], b[2] if len(b) > 2 else 1) for b in bounds]
        return cls(stages, schedule=schedule, micro_batches=micro_batches, devices=devices)

    @property
    def bounds(self) -> list[tuple[int, int, int]]:
        """``[(first, last, replicas)]`` per stage."""
        return [(s.first, s.last, s.replicas) for s in self.stages]

    @property
    def devices_used(self) -> int:
        """Sum of the stages' replicas."""
        return sum(s.replicas for s in self.stages)

    def evaluated(self, inst: Pipeline) -> Partition:
        """Fill in per-stage time, memory and the period from the simulator."""
        from .simulator import simulate

        ev = simulate(inst, self)
        for st, t, m, n, c in zip(self.stages, ev.stage_times, ev.stage_memory, ev.in_flight, ev.link_times):
            st.time, st.memory, st.in_flight, st.link_time = t, m, n, c
        self.period, self.peak_memory = ev.period, ev.peak_memory
        return self

    def to_json(self) -> dict[str, Any]:
        """The ``memsched.partition/1`` object, with the evaluated times and memory when known."""
        return {
            "format": FORMAT,
            "schedule": self.schedule,
            "micro_batches": self.micro_batches,
            "devices": self.devices,
            "period": self.period,
            "peak_memory": self.peak_memory,
            "stages": [{"first_layer": s.first, "last_layer": s.last, "replicas": s.replicas, "devices": s.replicas,
                        "time": s.time, "memory": s.memory, "in_flight": s.in_flight, "link_time": s.link_time,
                        **({"layers": layers} if self.order is not None else {})}
                       for s, layers in zip(self.stages, self.stage_layers())],
            **({"order": list(self.order)} if self.order is not None else {}),
            **({"device_of": list(self.device_of)} if self.device_of is not None else {}),
            **self.extra,
        }

    @classmethod
    def from_json(cls, data: Any, *, path: str = "<partition>") -> Partition:
        """Parse a ``memsched.partition/1`` object (`InputError` naming the stage). Its ``problem``, when
        present, is "pipeline", and its ``format`` `FORMAT` (another, such as ``memsched.partition/9``,
        is an `InputError` naming ``format``); without a format, the object is read as a partition. A gpipe
        partition with ``micro_batches`` null or absent gets the solvers' default m = 4P (P its ``devices``, else the
        devices its stages use), as docs/pipeline.md says."""
        declared = data.get("problem") if isinstance(data, dict) else None
        if declared is not None and declared != "pipeline":
            raise InputError(f"the schedule is for {declared!r} but the instance is a pipeline instance", path=path,
                             field="problem")
        if isinstance(data, dict) and "format" in data and data["format"] != FORMAT:
            raise InputError(f"expected {FORMAT!r}, got {_json_text(data['format'])}", path=path, field="format")
        if not isinstance(data, dict) or not isinstance(data.get("stages"), list) or not data["stages"]:
            raise InputError("expected an object with a non-empty 'stages' list", path=path, field="stages")
        bounds = []
        for k, st in enumerate(data["stages"]):
            if not isinstance(st, dict):
                raise InputError(f"expected an object with first_layer and last_layer, got {st!r}", path=path,
                                 field=f"stages[{k}]")
            first = _integer(st.get("first_layer"), path=path, field=f"stages[{k}].first_layer", low=0,
                             high=MAX_LAYER)
            last = _integer(st.get("last_layer"), path=path, field=f"stages[{k}].last_layer", low=0, high=MAX_LAYER)
            replicas = _integer(st.get("replicas", 1), path=path, field=f"stages[{k}].replicas", low=1,
                                high=MAX_DEVICES)
            bounds.append((first, last, replicas))
        schedule = str(data.get("schedule", "1f1b"))
        if schedule not in SCHEDULES:
            raise InputError(f"unknown schedule {schedule!r}", path=path, field="schedule")
        order = data.get("order")
        if order is not None and (not isinstance(order, list)
                                  or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_LAYER
                                             for v in order)):
            raise InputError("must be a list of layer indices", path=path, field="order")
        micro_batches = data.get("micro_batches")
        if micro_batches is not None:
            micro_batches = _integer(micro_batches, path=path, field="micro_batches", low=1, high=MAX_MICRO_BATCHES)
        devices = data.get("devices")
        if devices is not None:
            devices = _integer(devices, path=path, field="devices", low=1, high=MAX_DEVICES)
        part = cls.from_bounds(bounds, schedule=schedule, micro_batches=micro_batches, devices=devices)
        part.order = order
        device_of = data.get("device_of")
        if device_of is not None and (not isinstance(device_of, list) or len(device_of) != len(bounds) or not all(
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_DEVICES for v in device_of)):
            raise InputError(f"must list one device index in 0..{MAX_DEVICES - 1} per stage", path=path,
                             field="device_of")
        part.device_of = device_of
        if schedule == "gpipe" and micro_batches is None:
            # the documented default m = 4P, as the solvers (and so `memsched partition`) take it: P the partition's
            # devices, else the devices its stages use
            P = devices if devices is not None else (max(device_of) + 1 if device_of else part.devices_used)
            part.micro_batches = 4 * P
        return part

    def __len__(self) -> int:
        return len(self.stages)

    def __str__(self) -> str:
        parts = [f"[{s.first}-{s.last}]" + (f"x{s.replicas}" if s.replicas > 1 else "")
                 + (f"@{self.device_of[k]}" if self.device_of is not None else "") for k, s in enumerate(self.stages)]
        return f"{self.schedule}: " + " ".join(parts) + (" (positions in a DAG order)" if self.order else "")
