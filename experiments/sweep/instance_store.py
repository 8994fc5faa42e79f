"""Instances of a sweep are files: ``<output>/instances/<label>-<hash>.<ext>``, keyed by content hash.

A sweep stores every instance it solves, and every row names the SHA-256 of its instance file
(first 16 hex digits, column ``instance_hash``, also part of the row key). So:

- an instance that is built (``generate`` or a profiled ``model``) is built once: later runs of
  the sweep, and a resume after a crash, read the stored file instead of profiling again
  (profiles are measurements and differ from one run to the next); ``--reprofile`` builds
  it again on purpose, and the rows of the old profile drop out of the table (their keys differ);
- an instance read from a file (``file``, ``example``) is read each run and a copy of its bytes
  is stored: when the file changes, its rows are new rows, never mixed with the old ones;
- rows are reproducible from the stored files alone.

``index.json`` maps the identity of each built `[[instances]]` entry (its kind, parameters and
problem; not its label; for your own network, ``model = "FILE.py:FUNCTION"`` or
``"package.module:FUNCTION"``, also the contents of its source files, `model_sources`) to its
stored file, hash, label and source. An entry whose file is missing or edited, or whose label,
problem or source is not a non-empty string (an index edited by hand), is built again.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsched.solvers.errors import InputError
from memsched.solvers.jsonio import write_atomic, write_json_atomic

from .config import InstanceSpec
from .store import make_folder

INDEX = "index.json"


def digest(data: bytes) -> str:
    """The content hash of an instance file: SHA-256, first 16 hex digits."""
    return hashlib.sha256(data).hexdigest()[:16]


def spec_id(spec: InstanceSpec, threads: int = 1, sources: str | None = None) -> str:
    """Identity of an `[[instances]]` entry for the store: kind, parameters and problem, and for a
    profiled network the torch CPU `threads` it is profiled with (``[measure] threads``: its times
    and clock depend on them) when not the default 1, and the hash of its factory's source files
    (`sources`, `model_sources`) when it has one; neither when absent, so that the ids of stores
    written before stay (a factory network's old entry is not found: it is profiled again)."""
    ident: dict[str, Any] = {"kind": spec.kind, "params": spec.params, "problem": spec.problem}
    if spec.kind == "model" and threads != 1:
        ident["threads"] = threads
    if spec.kind == "model" and sources is not None:
        ident["sources"] = sources
    return hashlib.sha1(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]


def model_sources(model: str) -> str | None:
    """Content hash (SHA-256, first 16 hex digits) of the source files of a ``model`` that is your
    own factory: the files `commands.profile.model_inputs` lists (the FILE of ``FILE.py:FUNCTION``,
    relative to the current folder as the profiler imports it; the module's own ``.py`` files on
    `sys.path` for ``package.module:FUNCTION``, not its parent packages' ``__init__.py``, so that the
    keys of stores written before stay), in their order, a missing one counted as absent.
    None for a zoo network, or a module whose file is not found (nothing to hash)."""
    from ..commands.profile import model_inputs

    inputs = model_inputs(model, packages=False)
    if not inputs:
        return None
    h = hashlib.sha256()
    for _, name in inputs:
        try:
            h.update(hashlib.sha256(Path(name).read_bytes()).digest())
        except OSError:
            h.update(b"missing")
    return h.hexdigest()[:16]


def document(instance: Any) -> bytes | None:
    """The JSON file of an instance (its ``to_dict``), canonical bytes; None when it has none."""
    to_dict = getattr(instance, "to_dict", None)
    if not callable(to_dict):
        return None
    return (json.dumps(to_dict(), sort_keys=True, indent=1) + "\n").encode()


@dataclass(frozen=True)
class Stored:
    """One stored instance: its file, hash, label, problem and source description."""

    path: Path
    hash: str
    label: str
    problem: str
    source: str


class InstanceStore:
    """The ``instances/`` folder of a sweep's output. `readonly` stores nothing (``--list``);
    `rebuild` ignores stored built instances (``--reprofile``)."""

    def __init__(self, folder: Path, *, readonly: bool = False, rebuild: bool = False) -> None:
        self.folder = Path(folder)
        self.readonly = readonly
        self.rebuild = rebuild
        self._index: dict[str, dict[str, Any]] | None = None
        self._sources: dict[str, str | None] = {}  # model -> `model_sources`, hashed once per store

    def key(self, spec: InstanceSpec, threads: int = 1) -> str:
        """The index key of `spec` profiled with `threads` (`spec_id`); a factory network's source
        files are hashed at the first lookup, so that the `built` miss and the `put` after
        profiling agree."""
        sources = None
        if spec.kind == "model":
            model = str(spec.params.get("model", ""))
            if model not in self._sources:
                self._sources[model] = model_sources(model)
            sources = self._sources[model]
        return spec_id(spec, threads, sources)

    @property
    def index(self) -> dict[str, dict[str, Any]]:
        """The folder's index (key -> stored instance entry), read once from its index file."""
        if self._index is None:
            self._index = {}
            path = self.folder / INDEX
            if path.exists():
                try:
                    data = json.loads(path.read_text())
                except (OSError, ValueError):
                    data = {}
                self._index = data if isinstance(data, dict) else {}
        return self._index

    def built(self, spec: InstanceSpec, *, threads: int = 1) -> Stored | None:
        """The stored file of a built entry (profiled with `threads`), when there is one (and
        `rebuild` is off). An entry whose file is missing or edited, or whose label, problem or
        source is not a non-empty string (an index edited by hand), is none: built again."""
        if self.rebuild:
            return None
        entry = self.index.get(self.key(spec, threads))
        if not isinstance(entry, dict) or not _described(entry):
            return None
        path = self.folder / str(entry.get("file", ""))
        if not path.is_file() or digest(path.read_bytes()) != entry.get("hash"):
            return None  # missing or edited: build again
        return Stored(path, entry["hash"], entry["label"], entry["problem"], entry["source"])

    def put(self, spec: InstanceSpec, data: bytes, *, label: str, problem: str, source: str, ext: str = ".json",
            built: bool = False, threads: int = 1) -> Stored | None:
        """Store `data` (an instance file's bytes); None when read-only. Built entries are indexed
        (a profiled one with the `threads` it was profiled with, `spec_id`). A folder where the file
        goes is an `InputError` naming it."""
        h = digest(data)
        if self.readonly:
            return None
        name = f"{_safe(label)}-{h}{ext}"
        path = self.folder / name
        if path.is_dir():  # (read_bytes: IsADirectoryError, an internal error)
            raise InputError("is a folder, expected a file (a stored instance)", path=str(path))
        if not path.exists() or path.read_bytes() != data:
            make_folder(self.folder, "the stored instances")
            write_atomic(path, lambda tmp: tmp.write_bytes(data))
        if built:
            self.index[self.key(spec, threads)] = {
                "file": name, "hash": h, "label": label, "problem": problem, "source": source,
                "stored": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
            write_json_atomic(self.folder / INDEX, self.index)
        return Stored(path, h, label, problem, source)


def check_folder(folder: Path) -> None:
    """Before any work: the store's `folder` (``<output>/instances``) is a folder or absent; a file
    (or a link to nothing) in its place is an `InputError` naming it (it failed as an internal
    error once the first instance was stored)."""
    if os.path.lexists(folder) and not folder.is_dir():
        raise InputError("is a file, expected a folder (the sweep's stored instances)", path=str(folder))


def _described(entry: dict[str, Any]) -> bool:
    """Whether an index entry names its label, problem and source as non-empty strings."""
    return all(isinstance(entry.get(k), str) and entry[k] for k in ("label", "problem", "source"))


def _safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label)[:80] or "instance"
