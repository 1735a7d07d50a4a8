"""On-disk cache of compiled kernels (object code), so a new process skips LLVM.

Entries are keyed by everything that determines the machine code: expression, operand
types, options, the host CPU (name and features) and the llvsparse and llvmlite
versions. Each object file is stored beside a metadata file holding one SHA-256 over the
object bytes and the canonical JSON of the rest of the metadata: the metadata says how to
call the code (which operands are converted, whether the output is cleared), so an edit
to either file is a different digest. An entry whose digest does not match, or whose
metadata fails the caller's check, is deleted and rebuilt, never loaded.

``LLVSPARSE_CACHE_DIR`` sets the folder (default ``~/.cache/llvsparse``);
``LLVSPARSE_CACHE=0`` disables the disk cache. ``LLVSPARSE_CACHE_MAX_MB`` (default 256)
bounds its size: after a store that exceeds it, the least recently used entries go
until it is under three quarters of the bound (a process counts other processes' entries
from its first store and every ``RELIST``-th one, when it lists the folder).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from .. import __version__
from .. import ir as ir_package
from ..backends import cpu as cpu_backend
from ..formats import registry as level_registry


def cache_dir() -> Path | None:
    if os.environ.get("LLVSPARSE_CACHE", "1").strip().lower() in ("0", "false", "off", "no"):
        return None
    root = os.environ.get("LLVSPARSE_CACHE_DIR")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "llvsparse"


def _sources_digest() -> str:
    """A hash of the compiler's own sources: any change to code generation or the kernel
    ABI invalidates every entry, even between releases. Sub-packages count too (ir/opt's
    passes shape the loops the emitter emits), and so does the whole API package (the
    compile entry, the build and the schedule a kernel's text resolves to)."""
    api_package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for folder in (*(Path(module.__file__).resolve().parent
                     for module in (ir_package, cpu_backend, level_registry)), api_package):
        for path in sorted(folder.rglob("*.py")):
            digest.update(path.relative_to(folder).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


# Taken when the compiler is imported (3 ms), not at the first compile: a process names
# the code it runs. Read later, a source tree edited after the import (a checkout, an
# upgrade under a running kernel) labelled old code with the new sources' key, which
# the disk cache then served to processes running the new code.
_FINGERPRINT = _sources_digest()


def compiler_fingerprint() -> str:
    """The hash of the compiler's sources as this process imported them."""
    return _FINGERPRINT


def entry_key(parts: tuple) -> str:
    host = (llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    text = repr((parts, host, __version__, llvmlite.__version__, compiler_fingerprint()))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def digest(obj: bytes, meta: dict) -> str:
    """SHA-256 of the object code and the metadata (but its digest) as canonical JSON."""
    rest = {k: v for k, v in meta.items() if k != DIGEST}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(obj + b"\0" + text.encode()).hexdigest()


DIGEST = "sha256"


def load(key: str, check: Callable[[dict], None] | None = None) -> tuple[bytes, dict] | None:
    """The object code and metadata of an entry, or None (missing or corrupt). ``check``
    raises ValueError on metadata the caller cannot use; that entry is deleted too."""
    folder = cache_dir()
    if folder is None:
        return None
    meta_path, obj_path = folder / f"{key}.json", folder / f"{key}.o"
    try:
        meta = json.loads(meta_path.read_text())
        obj = obj_path.read_bytes()
    except (OSError, ValueError, RecursionError):  # missing, truncated, not UTF-8, ...
        discard(key)
        return None
    # The key inside guards against an entry copied or renamed under another key (every
    # entry's kernel has the same symbol name, so it would load and run the wrong code).
    try:
        if not isinstance(meta, dict) or meta.get("key") != key \
                or digest(obj, meta) != meta.get(DIGEST):
            raise ValueError("digest")
        if check is not None:
            check(meta)
    except (ValueError, TypeError):
        discard(key)
        return None
    with contextlib.suppress(OSError):
        os.utime(meta_path)  # recently used: evicted last
    return obj, meta


# What a kernel entry's metadata holds besides its key and digest, with each value's type.
KERNEL_FIELDS = {"name": str, "concrete": str, "lattices": str, "parallel_mode": (int, type(None)),
                 "initializes_output": bool, "conversions": dict,
                 "other_form_key": (str, type(None)), "workspace": (list, type(None)),
                 "precomputes": (list, type(None)), "other_forms": (list, type(None))}


def kernel_check(orders: dict[str, int], out: str) -> Callable[[dict], None]:
    """A check of a kernel entry's metadata against the kernel being compiled, whose
    operands (the output ``out`` among them) have these orders: exactly the expected
    keys, each of its type; a parallel mode that is a mode of the output; conversions of
    inputs only, each to a mode order that is a permutation of the input's modes."""
    def check(meta: dict) -> None:
        if set(meta) != {*KERNEL_FIELDS, "key", DIGEST}:
            raise ValueError(f"keys {sorted(meta)}")
        for field, kind in KERNEL_FIELDS.items():
            value = meta[field]
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
                raise ValueError(f"{field} is {value!r}")
        if not meta["name"].isidentifier():
            raise ValueError(f"name {meta['name']!r}")
        mode = meta["parallel_mode"]
        if mode is not None and not 0 <= mode < orders[out]:
            raise ValueError(f"parallel_mode {mode}")
        for name, modes in meta["conversions"].items():
            if name != out and name in orders and modes == "full_top" and orders[name] > 1:
                continue
            if name == out or name not in orders or not isinstance(modes, list) \
                    or any(type(m) is not int for m in modes) \
                    or sorted(modes) != list(range(orders[name])):
                raise ValueError(f"conversion of {name!r} to {modes!r}")
    return check


def discard(key: str) -> None:
    """Delete an entry that must not be loaded, so that it is rebuilt."""
    folder = cache_dir()
    if folder is not None:
        for suffix in (".json", ".o"):
            with contextlib.suppress(OSError):
                (folder / f"{key}{suffix}").unlink(missing_ok=True)


def store(key: str, obj: bytes, meta: dict) -> None:
    """Write an entry atomically (object first, metadata last); failures are ignored."""
    folder = cache_dir()
    if folder is None or not obj:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _atomic_write(folder / f"{key}.o", obj)
        meta = dict(meta, key=key)
        meta[DIGEST] = digest(obj, meta)
        text = json.dumps(meta).encode()
        _atomic_write(folder / f"{key}.json", text)
        _bound(folder, len(obj) + len(text), _max_bytes())
    except OSError:
        return


# Listing the folder stats every entry: done on every store, that cost 0.2 s a compile
# once the folder held 4,500 kernels (quadratic over a test run). A process now lists a
# folder on its first store there, then only when the bytes it knows of (that listing's
# total plus its own stores since) pass the bound, or at every RELIST-th store, so that
# what other processes stored meanwhile counts too.
RELIST = 64
_KNOWN: dict[Path, tuple[int, int]] = {}  # folder -> (bytes known, stores since listing)
_KNOWN_LOCK = threading.Lock()


def _bound(folder: Path, added: int, max_bytes: int) -> None:
    """Keep ``folder`` under ``max_bytes`` after a store of ``added`` bytes."""
    with _KNOWN_LOCK:
        known, stores = _KNOWN.get(folder, (None, 0))
        if known is not None and known + added <= max_bytes and stores + 1 < RELIST:
            _KNOWN[folder] = (known + added, stores + 1)
            return
    total = evict(folder, max_bytes)
    with _KNOWN_LOCK:
        _KNOWN[folder] = (total, 0)


def _max_bytes() -> int:
    try:
        return int(float(os.environ.get("LLVSPARSE_CACHE_MAX_MB", "256")) * 2**20)
    except (ValueError, OverflowError):  # "abc", "inf"
        return 256 * 2**20


def evict(folder: Path, max_bytes: int) -> int:
    """Delete least recently used entries (by their metadata file's time) while the
    folder holds more than ``max_bytes``, down to three quarters of it; returns the
    bytes left."""
    entries = []
    total = 0
    for meta_path in folder.glob("*.json"):
        obj_path = meta_path.with_suffix(".o")
        try:
            size = meta_path.stat().st_size + obj_path.stat().st_size
            entries.append((meta_path.stat().st_mtime, size, meta_path, obj_path))
        except OSError:
            continue
        total += size
    if total <= max_bytes:
        return total
    for _, size, meta_path, obj_path in sorted(entries, key=lambda e: e[0]):
        meta_path.unlink(missing_ok=True)
        obj_path.unlink(missing_ok=True)
        total -= size
        if total <= max_bytes * 3 // 4:
            break
    return total


def _atomic_write(path: Path, data: bytes) -> None:
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temp, path)
    except OSError:
        Path(temp).unlink(missing_ok=True)  # e.g. a directory where the entry goes
        raise
