"""On-disk cache of compiled kernels (object code), so a new process skips LLVM.

Entries are keyed by everything that determines the machine code: expression, operand
types, options, the host CPU (name and features) and the llvsparse and llvmlite
versions. Each object file is stored with its SHA-256 in a metadata file; an entry whose
hash does not match is deleted and rebuilt, never loaded.

``LLVSPARSE_CACHE_DIR`` sets the folder (default ``~/.cache/llvsparse``);
``LLVSPARSE_CACHE=0`` disables the disk cache. ``LLVSPARSE_CACHE_MAX_MB`` (default 256)
bounds its size: after a store that exceeds it, the least recently used entries go
until it is under three quarters of the bound.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from . import __version__, runtime
from . import ir as ir_package
from .backends import cpu as cpu_backend
from .formats import registry as level_registry


def cache_dir() -> Path | None:
    if os.environ.get("LLVSPARSE_CACHE", "1").strip().lower() in ("0", "false", "off", "no"):
        return None
    root = os.environ.get("LLVSPARSE_CACHE_DIR")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "llvsparse"


@functools.cache
def compiler_fingerprint() -> str:
    """A hash of the compiler's own sources: any change to code generation or the kernel
    ABI invalidates every entry, even between releases."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for module in (ir_package, cpu_backend, runtime, level_registry):
        folder = Path(module.__file__).resolve().parent
        for path in sorted(folder.glob("*.py")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    digest.update((package / "api.py").read_bytes())
    return digest.hexdigest()


def entry_key(parts: tuple) -> str:
    host = (llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    text = repr((parts, host, __version__, llvmlite.__version__, compiler_fingerprint()))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def load(key: str) -> tuple[bytes, dict] | None:
    """The object code and metadata of an entry, or None (missing or corrupt)."""
    folder = cache_dir()
    if folder is None:
        return None
    meta_path, obj_path = folder / f"{key}.json", folder / f"{key}.o"
    try:
        meta = json.loads(meta_path.read_text())
        obj = obj_path.read_bytes()
    except (OSError, ValueError):
        return None
    # The key inside guards against an entry copied or renamed under another key (every
    # entry's kernel has the same symbol name, so it would load and run the wrong code).
    if not isinstance(meta, dict) or meta.get("key") != key \
            or hashlib.sha256(obj).hexdigest() != meta.get("sha256"):
        discard(key)
        return None
    with contextlib.suppress(OSError):
        os.utime(meta_path)  # recently used: evicted last
    return obj, meta


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
        meta = dict(meta, key=key, sha256=hashlib.sha256(obj).hexdigest())
        _atomic_write(folder / f"{key}.json", json.dumps(meta).encode())
        evict(folder, _max_bytes())
    except OSError:
        return


def _max_bytes() -> int:
    try:
        return int(float(os.environ.get("LLVSPARSE_CACHE_MAX_MB", "256")) * 2**20)
    except (ValueError, OverflowError):  # "abc", "inf"
        return 256 * 2**20


def evict(folder: Path, max_bytes: int) -> None:
    """Delete least recently used entries (by their metadata file's time) while the
    folder holds more than ``max_bytes``, down to three quarters of it."""
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
        return
    for _, size, meta_path, obj_path in sorted(entries, key=lambda e: e[0]):
        meta_path.unlink(missing_ok=True)
        obj_path.unlink(missing_ok=True)
        total -= size
        if total <= max_bytes * 3 // 4:
            return


def _atomic_write(path: Path, data: bytes) -> None:
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temp, path)
    except OSError:
        Path(temp).unlink(missing_ok=True)  # e.g. a directory where the entry goes
        raise
