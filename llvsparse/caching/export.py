"""Embedding compiled kernels outside Python: object files, shared libraries, C headers."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import llvmlite.binding as llvm

from ..backends.cpu import (
    HOST_RUNTIME_IR,
    OTHER_FORM_SUFFIX,
    host_target_machine,
    link_runtime,
    optimize,
)
from ..ir.loops.entry_split import windowed

HEADER_STRUCT = """\
#include <stdint.h>

#ifndef LLVSPARSE_TENSOR_DEFINED
#define LLVSPARSE_TENSOR_DEFINED
/* One tensor argument. Arrays are level arrays in format order, then the values.
   Inputs: every array filled, capacities = lengths. Outputs: arrays NULL with capacity 0
   (or malloc'd buffers); the kernel grows them with malloc/free, writes the final
   positions per level into sizes, and the caller frees them with free(). */
typedef struct {
    int64_t  nlevels;
    int64_t *extents;     /* [nlevels] coordinate extent of each level */
    int64_t *sizes;       /* [nlevels] positions per level (outputs: written) */
    void   **arrays;      /* level arrays, then values */
    int64_t *capacities;  /* elements allocated per array */
    int64_t *params;      /* level parameters in format order */
} llvsparse_tensor;
#endif
"""


def _describe(name: str, ttype) -> list[str]:
    lines = [f" *   {name}: {ttype.order}-d, {ttype.dtype} values, {ttype.index_dtype} indices"]
    for k, level in enumerate(ttype.levels):
        mode = "storage-only" if level.mode is None else f"mode {level.mode}"
        lines.append(f" *     level {k}: {level.kind} ({mode})")
    for slot in ttype.array_slots():
        lines.append(f" *     arrays[{slot.index}] = level {slot.level} {slot.name} "
                     f"({slot.kind})")
    lines.append(f" *     arrays[{len(ttype.array_slots())}] = values")
    for n, (k, param) in enumerate(ttype.param_slots()):
        lines.append(f" *     params[{n}] = level {k} {param}")
    return lines


def header_text(kernel, inst, name: str) -> str:
    doc = [f"/* {kernel.assignment}"]
    if kernel.schedule_text is not None:
        doc.append(f" * schedule: {kernel.schedule_text}")
    doc.append(" * tensors[] order:")
    aliases = kernel.aliases
    for position, tensor in enumerate(inst.arg_order):
        note = " (output)" if position == 0 else ""
        if tensor in aliases:
            note = f" (the tensor {aliases[tensor].tensor} again, for {aliases[tensor]})"
        if tensor in kernel.patterns:
            note = (f" (the diagonal pattern over index {kernel.patterns[tensor]}: a "
                    "coordinate list of (k, k) for every k, each valued true)")
        if tensor in inst.conversions:
            note += " (converted: pass it in the layout below)"
        doc.append(f" *   [{position}] {tensor}{note}")
    for tensor in inst.arg_order:
        doc += _describe(tensor, inst.types[tensor])
    doc.append(" * Returns 0 on success, 1 when memory runs out, 2 when a level function")
    doc.append(" * stores at a negative position (a wrong plugin level). */")
    guard = re.sub(r"\W", "_", name).upper() + "_H"
    return "\n".join([f"#ifndef {guard}", f"#define {guard}", HEADER_STRUCT,
                      "#ifdef __cplusplus", 'extern "C" {', "#endif", *doc,
                      f"int32_t {name}(llvsparse_tensor **tensors);",
                      *_range_declaration(name, windowed(kernel.program(inst))),
                      *_phase_declarations(name, inst.jit.assembly),
                      *(_other_form_declarations(name, inst.jit.other.assembly)
                        if inst.jit.other else []),
                      "#ifdef __cplusplus", "}", "#endif",
                      f"#endif  /* {guard} */",
                      ""])


def _range_declaration(name: str, windows: bool) -> list[str]:
    """The entry over a range of the output's first index (and, for a kernel whose
    threads cut rows, a window of positions: ir/loops/entry_split.py)."""
    if not windows:
        return ["/* Only the output's first index in [lo, hi); the output must be passed",
                "   allocated and zeroed. Disjoint ranges may run on different threads. */",
                f"int32_t {name}_range(llvsparse_tensor **tensors, int64_t lo, int64_t hi);"]
    return ["/* Only the output's first index in [lo, hi), and of the entries its row loop",
            "   walks only positions [window_lo, window_hi): pass the rows that hold those",
            "   positions. Rows lo and hi - 1, which the window may cut, are added into",
            "   atomically; the others are stored. The output must be passed allocated and",
            "   zeroed. Disjoint windows may run on different threads. */",
            f"int32_t {name}_range(llvsparse_tensor **tensors, int64_t lo, int64_t hi,",
            "                      int64_t window_lo, int64_t window_hi);"]


def _phase_declarations(name: str, phases) -> list[str]:
    """The threaded-assembly phases the kernel has, for callers that assemble a sparse
    output on threads (none: no lines)."""
    if not phases:
        return []
    setup = f"int32_t {name}_setup(llvsparse_tensor **tensors);"
    finish = f"int32_t {name}_finish(llvsparse_tensor **tensors, int64_t total);"
    if "count" in phases:
        return [
            "/* Threads assembling the sparse output together: setup once; count each",
            "   disjoint row range [lo, hi) into *entries; allocate the appended arrays and",
            "   the values for the total; fill each range from its offset (the entries of",
            "   the ranges before it); finish once with the total. */",
            setup,
            f"int32_t {name}_count(llvsparse_tensor **tensors, int64_t lo, int64_t hi,",
            "                      int64_t *entries);",
            f"int32_t {name}_fill(llvsparse_tensor **tensors, int64_t lo, int64_t hi,",
            "                     int64_t offset);",
            finish]
    return [
        "/* Threads assembling the sparse output together: setup once; then for each",
        "   disjoint row range [lo, hi), append into a copy of the output descriptor whose",
        "   appended arrays and values are the thread's own (NULL, capacity 0: the kernel",
        "   grows them) while the other arrays stay shared; it stores the range's entries",
        "   in *entries. Concatenate the ranges' appended arrays and values in row order",
        "   into the output's (free the thread's buffers), then finish once with the",
        "   total. */",
        setup,
        f"int32_t {name}_append(llvsparse_tensor **tensors, int64_t lo, int64_t hi,",
        "                       int64_t *entries);",
        finish]


def _other_form_declarations(name: str, phases) -> list[str]:
    other = name + OTHER_FORM_SUFFIX
    return [
        "/* The same entries, the same results, with the other form of its loops: a union",
        "   computing every case and selecting instead of branching per case, an",
        "   intersection searching past every mismatch instead of past long runs, two rows",
        "   summed side by side instead of one at a time. Which is faster depends on the",
        "   operands' patterns: time both on your data. (With fastmath, which lets sums be",
        "   reassociated, the last bits may differ.) */",
        f"int32_t {other}(llvsparse_tensor **tensors);",
        f"int32_t {other}_range(llvsparse_tensor **tensors, int64_t lo, int64_t hi);",
        *_phase_declarations(other, phases)]


_KEYWORDS_TEXT = """
    auto break case char const continue default do double else enum extern float for goto
    if inline int long register restrict return short signed sizeof static struct switch
    typedef union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex
    _Generic _Imaginary _Noreturn _Static_assert _Thread_local alignas alignof bool
    constexpr false nullptr static_assert thread_local true typeof typeof_unqual
"""
C_KEYWORDS = frozenset(_KEYWORDS_TEXT.split())
_FUNCTION = r'(?m)^(?:define|declare)\b[^@]*@"?([\w.$]+)'
# Names the header declares besides the kernel's, the functions the linked runtime
# defines and calls, the C library's allocator (the caller frees and may grow the
# kernel's buffers with it) and the functions LLVM lowers copies and fills to: a
# kernel named after one would replace it.
TAKEN = frozenset({"llvsparse_tensor", "int32_t", "int64_t", "free", "realloc", "memcpy",
                   "memmove", "memset", "memcmp", "bcmp",
                   *re.findall(_FUNCTION, HOST_RUNTIME_IR)})


def check_name(name: str, ir_text: str, entry: str) -> None:
    """Raise ValueError unless ``name`` can replace ``entry`` in the names of the entry
    points of the kernel in ``ir_text`` (``entry``, ``entry_range``, ...): an ASCII C
    identifier, no keyword, and no renamed entry the same as a symbol the code or header
    already uses."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"{name!r} is not a C identifier (ASCII letters, digits and "
                         "underscores, not starting with a digit)")
    if name in C_KEYWORDS:
        raise ValueError(f"{name!r} is a C keyword")
    functions = set(re.findall(_FUNCTION, ir_text))
    entries = {f for f in functions if f.startswith(entry)}
    clash = sorted({name + f[len(entry):] for f in entries} & (functions - entries | TAKEN))
    if clash:
        raise ValueError(f"kernel name {name!r} would define {clash[0]}, which the kernel's "
                         "code or header already uses")


def export_kernel(kernel, inst, path: Path, name: str) -> tuple[Path, Path]:
    check_name(name, inst.jit.llvm_ir, inst.jit.name)
    if path.suffix not in (".o", ".so", ".dylib"):
        raise ValueError(f"export to .o or .so, not {path.suffix or 'a name without suffix'!r}")
    text = inst.jit.llvm_ir.replace(f'@"{inst.jit.name}', f'@"{name}')
    module = llvm.parse_assembly(text)
    link_runtime(module)
    host = host_target_machine()
    target = llvm.Target.from_triple(host.triple)
    tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                      features=llvm.get_host_cpu_features().flatten(),
                                      opt=3, reloc="pic", codemodel="default")
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    optimize(module, tm)
    obj = tm.emit_object(module)
    header = path.with_suffix(".h")
    _write_both(path, header, obj, header_text(kernel, inst, name))
    return path, header


def _scratch(target: Path) -> Path:
    """A fresh name beside ``target`` (same folder, so a rename replaces it atomically);
    files made under it get the permissions a plain write would give them."""
    return target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")


def _write_both(path: Path, header: Path, obj: bytes, text: str) -> None:
    """Write the code and the header under scratch names and rename them into place only
    when both are complete: a failed link once left a header for a library that was never
    written. On any failure no scratch file remains and the targets are as before, except
    when the header cannot replace an old one after the code did (then the new code is
    removed rather than left beside a stale header)."""
    code_tmp, header_tmp = _scratch(path), _scratch(header)
    try:
        header_tmp.write_text(text)
        if path.suffix == ".o":
            code_tmp.write_bytes(obj)
        else:
            _link_shared(obj, code_tmp, path)
        os.replace(code_tmp, path)
        try:
            os.replace(header_tmp, header)
        except OSError:
            path.unlink(missing_ok=True)
            raise
    finally:
        code_tmp.unlink(missing_ok=True)
        header_tmp.unlink(missing_ok=True)


def _link_shared(obj: bytes, path: Path, target: Path) -> None:
    """A shared library at ``path`` (to be renamed to ``target``) from object code, linked
    by the system's C compiler (the object goes in a scratch folder, not beside the
    library where a file may have its name)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise FileNotFoundError("a C compiler (cc) is needed to link a shared library")
    with tempfile.TemporaryDirectory() as folder:
        object_path = Path(folder) / "kernel.o"
        object_path.write_bytes(obj)
        done = subprocess.run([compiler, "-shared", "-o", str(path), str(object_path)],
                              capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"linking {target} failed: {done.stderr.strip()}")
