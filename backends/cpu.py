"""CPU backend: optimize an llvmlite module for the host and JIT it with MCJIT."""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import llvmlite.binding as llvm
from llvmlite import ir
from llvmlite.binding.newpassmanagers import NewPassManager

from ..ir.loops.assembly_phases import GATHER_PHASES, SPLIT_PHASES
from .llvm.counting import COUNTER

_LOCK = threading.Lock()
_STATE: dict[str, object] = {}
STATS: Counter = Counter()  # llvm_compiles, disk_loads: what tests and benchmarks read


def _initialize() -> llvm.TargetMachine:
    with _LOCK:
        if "tm" not in _STATE:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _align_innermost_loops()
            libc = ctypes.CDLL(ctypes.util.find_library("c"))
            for symbol in ("free", "malloc", "posix_memalign", "madvise"):
                llvm.add_symbol(symbol, ctypes.cast(getattr(libc, symbol), ctypes.c_void_p).value)
            _STATE["tm"] = _new_target_machine()
        return _STATE["tm"]


def _align_innermost_loops() -> None:
    """Start innermost loops on a 32-byte boundary on x86 (LLVM's default is 16).

    A sparse inner loop is ~25 bytes; where it straddles a 32-byte fetch window it ran
    15-25% slower (row-wise SpMV on bcsstk33 against the same loop in scipy, on Zen 4), and
    which case a kernel got depended on where MCJIT happened to place it.
    """
    if platform.machine().lower() in ("x86_64", "amd64"):
        llvm.set_option("", "-x86-experimental-pref-innermost-loop-alignment=5")


def _new_target_machine() -> llvm.TargetMachine:
    """A host target machine. MCJIT takes ownership of the one it is given (and frees it
    with the engine), so every engine gets its own."""
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=_host_features(),
        opt=3, reloc="default", codemodel="jitdefault")


def _host_features() -> str:
    """The host's features, with gathers avoided on x86: the SLP vectorizer turned a jammed
    SDDMM's eight row loads into a hardware gather that ran 2x slower than eight scalar
    loads (Zen 4). Slot-major padded-row SpMV, the only other kernel that used one, ran
    as fast either way."""
    features = llvm.get_host_cpu_features().flatten()
    if platform.machine().lower() in ("x86_64", "amd64"):
        features += ",+prefer-no-gather"
    return features


# Output arrays of 4 MiB or more are 2 MiB-aligned and advised as huge pages: a kernel that
# assembles a large sparse result otherwise spends as long in page faults as in its loops.
HOST_RUNTIME_IR = """
declare ptr @malloc(i64)
declare i32 @posix_memalign(ptr, i64, i64)
declare i32 @madvise(ptr, i64, i32)
declare void @free(ptr)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
define linkonce_odr ptr @llvsparse_alloc(i64 %bytes) {
entry:
  %big = icmp uge i64 %bytes, 4194304
  br i1 %big, label %huge, label %small
small:
  %plain = call ptr @malloc(i64 %bytes)
  ret ptr %plain
huge:
  %slot = alloca ptr
  %status = call i32 @posix_memalign(ptr %slot, i64 2097152, i64 %bytes)
  %ok = icmp eq i32 %status, 0
  br i1 %ok, label %advise, label %failed
advise:
  %aligned = load ptr, ptr %slot
  %ignored = call i32 @madvise(ptr %aligned, i64 %bytes, i32 14)
  ret ptr %aligned
failed:
  ret ptr null
}

; Grows a buffer of llvsparse_alloc from old_bytes to bytes without holding two resident
; copies: the old buffer is copied 2 MiB at a time and, from 1 MiB on, each step's whole
; pages of it are released (MADV_DONTNEED) once copied; free() alone would keep a freed
; heap block resident, and glibc's realloc copied whole (posix_memalign's blocks, and any
; below its dynamic mmap threshold, up to 32 MiB): cage10's first A*A^T call peaked at 1.6x
; its inputs and output. A new buffer of 4 MiB or more is 2 MiB-aligned, and only its
; copied part, resident anyway, is advised as huge pages: the rest may never be written,
; and there a huge page would make the first byte written resident in 2 MiB.
define linkonce_odr ptr @llvsparse_realloc(ptr %old, i64 %old_bytes, i64 %bytes) {
entry:
  %slot = alloca ptr
  %big = icmp uge i64 %bytes, 4194304
  br i1 %big, label %huge, label %small
small:
  %plain = call ptr @malloc(i64 %bytes)
  br label %allocated
huge:
  %status = call i32 @posix_memalign(ptr %slot, i64 2097152, i64 %bytes)
  %aligned_ok = icmp eq i32 %status, 0
  br i1 %aligned_ok, label %advise, label %failed
advise:
  %aligned = load ptr, ptr %slot
  %certain = and i64 %old_bytes, -2097152
  %ignored = call i32 @madvise(ptr %aligned, i64 %certain, i32 14)
  br label %allocated
allocated:
  %new = phi ptr [ %plain, %small ], [ %aligned, %advise ]
  %null = icmp eq ptr %new, null
  br i1 %null, label %failed, label %start
start:
  %releases = icmp uge i64 %old_bytes, 1048576
  %base = ptrtoint ptr %old to i64
  %base_up = add i64 %base, 4095
  %first_page = and i64 %base_up, -4096
  br label %step
step:
  %done = phi i64 [ 0, %start ], [ %copied, %next ]
  %kept = phi i64 [ %first_page, %start ], [ %released, %next ]
  %rest = sub i64 %old_bytes, %done
  %last = icmp ult i64 %rest, 2097152
  %size = select i1 %last, i64 %rest, i64 2097152
  %to = getelementptr i8, ptr %new, i64 %done
  %from = getelementptr i8, ptr %old, i64 %done
  call void @llvm.memcpy.p0.p0.i64(ptr %to, ptr %from, i64 %size, i1 false)
  %copied = add i64 %done, %size
  %copied_end = add i64 %base, %copied
  %page_end = and i64 %copied_end, -4096
  %pages = sub i64 %page_end, %kept
  %some = icmp sgt i64 %pages, 0
  %release_now = and i1 %releases, %some
  br i1 %release_now, label %release, label %next
release:
  %start_page = inttoptr i64 %kept to ptr
  %dropped = call i32 @madvise(ptr %start_page, i64 %pages, i32 4)
  br label %next
next:
  %released = phi i64 [ %kept, %step ], [ %page_end, %release ]
  %more = icmp ult i64 %copied, %old_bytes
  br i1 %more, label %step, label %copied_all
copied_all:
  call void @free(ptr %old)
  ret ptr %new
failed:
  ret ptr null
}

; Threads share a call's chunks here, outside the GIL. state: [0] next chunk to draw,
; [1] first failing status, [2] gate: threads inside, plus CLOSED once the caller is done
; (a helper arriving after that leaves at once, so the caller never waits for a thread
; that has not started).
define linkonce_odr void @llvsparse_run_chunks(ptr %range, ptr %table, ptr %bounds,
                                               i64 %count, ptr %state) {
entry:
  %fail_p = getelementptr i64, ptr %state, i64 1
  %gate_p = getelementptr i64, ptr %state, i64 2
  %before = atomicrmw add ptr %gate_p, i64 1 acq_rel
  %closed = icmp sge i64 %before, 4611686018427387904
  br i1 %closed, label %leave, label %take
take:
  %k = atomicrmw add ptr %state, i64 1 monotonic
  %more = icmp slt i64 %k, %count
  br i1 %more, label %check, label %leave
check:
  %failed = load atomic i64, ptr %fail_p monotonic, align 8
  %ok = icmp eq i64 %failed, 0
  br i1 %ok, label %run, label %leave
run:
  %lo_at = shl i64 %k, 1
  %lo_p = getelementptr i64, ptr %bounds, i64 %lo_at
  %lo = load i64, ptr %lo_p, align 8
  %hi_p = getelementptr i64, ptr %lo_p, i64 1
  %hi = load i64, ptr %hi_p, align 8
  %status = call i32 %range(ptr %table, i64 %lo, i64 %hi)
  %good = icmp eq i32 %status, 0
  br i1 %good, label %take, label %fail
fail:
  %wide = sext i32 %status to i64
  %ignored = cmpxchg ptr %fail_p, i64 0, i64 %wide acq_rel monotonic
  br label %leave
leave:
  %gone = atomicrmw sub ptr %gate_p, i64 1 acq_rel
  ret void
}

define linkonce_odr void @llvsparse_close_and_wait(ptr %state) {
entry:
  %gate_p = getelementptr i64, ptr %state, i64 2
  %old = atomicrmw or ptr %gate_p, i64 4611686018427387904 acq_rel
  br label %wait
wait:
  %gate = load atomic i64, ptr %gate_p acquire, align 8
  %idle = icmp eq i64 %gate, 4611686018427387904
  br i1 %idle, label %done, label %wait
done:
  ret void
}
"""


def link_runtime(module: llvm.ModuleRef, runtime_ir: str = HOST_RUNTIME_IR) -> None:
    """Give a kernel module its allocator (host version unless told otherwise)."""
    runtime = llvm.parse_assembly(runtime_ir)
    runtime.triple, runtime.data_layout = module.triple, module.data_layout
    module.link_in(runtime)


def host_allocator() -> int:
    """Address of ``llvsparse_alloc`` compiled once on its own, for Python to reserve
    output buffers that kernels then own (grow, free) exactly like their own."""
    _initialize()
    with _LOCK:
        if "alloc" not in _STATE:
            module = llvm.parse_assembly(HOST_RUNTIME_IR)
            engine = llvm.create_mcjit_compiler(module, _new_target_machine())
            engine.finalize_object()
            _STATE["alloc_engine"] = engine
            _STATE["alloc"] = engine.get_function_address("llvsparse_alloc")
        return _STATE["alloc"]


def host_runtime_function(name: str) -> int:
    """Address of one function of the host runtime (compiled with the allocator)."""
    host_allocator()
    return _STATE["alloc_engine"].get_function_address(name)


def host_chunk_runner() -> tuple[int, int]:
    """Addresses of ``llvsparse_run_chunks`` and ``llvsparse_close_and_wait``: threads
    draw a call's chunks natively, never needing the GIL."""
    return (host_runtime_function("llvsparse_run_chunks"),
            host_runtime_function("llvsparse_close_and_wait"))


def host_target_machine() -> llvm.TargetMachine:
    return _initialize()


def optimize(module: llvm.ModuleRef, tm: llvm.TargetMachine, level: int = 3) -> None:
    """Run the new pass manager's O3 pipeline with loop and SLP vectorization, and free
    it (``_free_pass_manager``)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    # Runtime unrolling of short sparse segments costs more in remainder loops than it
    # saves (row-wise SpMV on 4M random entries: 6.8 -> 8.2 ms unrolled, re-measured with
    # aligned loops); interleaving stays on.
    pto.loop_unrolling = False
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    try:
        pm.run(module, pb)
    finally:
        _free_pass_manager(pm)


def _free_pass_manager(pm) -> None:
    """Free a pass manager that llvmlite never frees: ModulePassManager lists ffi.ObjectRef
    before NewPassManager among its bases, so ObjectRef's empty ``_dispose`` hides the
    one that deletes it, and every compile left its O3 pipeline and what its passes
    hold (91.6 KB of malloc'd memory a kernel, evicted or not). Detached afterwards, so
    an llvmlite that frees it on collection does not free it again."""
    NewPassManager._dispose(pm)
    pm.detach()


@dataclass
class JitKernel:
    """A compiled kernel: its entry address and every stage of its code."""

    name: str
    llvm_ir: str | None  # None when loaded from the disk cache
    llvm_ir_optimized: str | None
    address: int
    engine: object = field(repr=False)
    module: object = field(repr=False)
    object_code: bytes = field(default=b"", repr=False)
    range_address: int = 0  # the kernel body over a range of the outermost loop
    counter: int = 0  # a counting build's loop-head counter (backends/llvm/counting.py)
    # Phases of a split assembly (setup, count, fill, finish), where the kernel has them.
    assembly: dict[str, int] = field(default_factory=dict)
    phases: dict = field(default_factory=dict)  # seconds spent per compile phase
    # The same kernel in its other form (``{name}_other_form``), where some of its
    # loops have two (see KernelCompiler.other_form): compiled with it (``compiled``),
    # or by ``other_builder`` when first asked for (see ``other``).
    compiled: JitKernel | None = field(default=None, repr=False)
    other_builder: Callable[[], JitKernel] | None = field(default=None, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def has_other(self) -> bool:
        """Whether the kernel has another form, compiled or not yet."""
        return self.compiled is not None or self.other_builder is not None

    @property
    def other(self) -> JitKernel | None:
        """The other form, compiled now if it was left for its first use (a cold SpMV
        compile spent half its optimizer and code generator time on a form that a
        kernel called once never runs); None where the kernel has one form."""
        if self.compiled is None and self.other_builder is not None:
            with self.lock:
                if self.compiled is None:
                    self.compiled = self.other_builder()
                    self.other_builder = None
        return self.compiled

    @property
    def asm(self) -> str | None:
        """Host assembly, produced on request (it costs as much as the optimizer)."""
        if self.llvm_ir_optimized is None:
            return None
        module = llvm.parse_assembly(self.llvm_ir_optimized)
        return _initialize().emit_assembly(module)


def jit(module: ir.Module, name: str) -> JitKernel:
    """Optimize and JIT ``module``; the kernel keeps its IR, optimized IR, assembly and
    object code (for the disk cache)."""
    tm = _initialize()
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    start = time.perf_counter()
    text = str(module)
    ref = llvm.parse_assembly(text)
    link_runtime(ref)
    ref.verify()
    parsed = time.perf_counter()
    optimize(ref, tm)
    optimized = str(ref)
    tuned = time.perf_counter()
    objects: list[bytes] = []
    with _LOCK:
        engine = llvm.create_mcjit_compiler(ref, _new_target_machine())
        engine.set_object_cache(lambda _module, buffer: objects.append(buffer), None)
        engine.finalize_object()
        STATS["llvm_compiles"] += 1
    if len(objects) == 1:
        # The engine that compiled the module keeps it, about 0.9 MB for a small kernel
        # against 0.05 MB for one that loads the object code (3.9 ms): the compiling
        # engine goes, and only the code it made stays.
        kernel = _from_object(objects[0], name, name)
        for form in (kernel, kernel.other):
            if form is not None:
                form.llvm_ir, form.llvm_ir_optimized = text, optimized
    else:
        kernel = _entries(JitKernel(name, text, optimized, 0, engine, ref))
        kernel.object_code = objects[0] if objects else b""
    kernel.phases = {"parse+verify": parsed - start, "optimize": tuned - parsed,
                     "machine code": time.perf_counter() - tuned}
    return kernel


def load_object(object_code: bytes, name: str, key: str) -> JitKernel:
    """Load cached object code into MCJIT without running LLVM's optimizer or codegen."""
    kernel = _from_object(object_code, name, key)
    STATS["disk_loads"] += 1
    return kernel


def _from_object(object_code: bytes, name: str, key: str) -> JitKernel:
    """A kernel in an engine of its own that holds only ``object_code`` (and an empty
    module named ``key``)."""
    _initialize()
    placeholder = llvm.parse_assembly("")
    placeholder.name = key
    with _LOCK:
        engine = llvm.create_mcjit_compiler(placeholder, _new_target_machine())
        engine.set_object_cache(None, lambda _module: object_code)
        engine.finalize_object()
        kernel = _entries(JitKernel(name, None, None, 0, engine, placeholder))
    if not kernel.address or not kernel.range_address:
        raise RuntimeError(f"object code has no symbol {name}")
    kernel.object_code = object_code
    return kernel


OTHER_FORM_SUFFIX = "_other_form"


def _entries(kernel: JitKernel) -> JitKernel:
    """``kernel`` with the addresses of its functions in its engine, and of the same
    kernel in its other form where the module has one."""
    engine, name = kernel.engine, kernel.name
    kernel.address = engine.get_function_address(name)
    kernel.range_address = engine.get_function_address(f"{name}_range")
    kernel.counter = engine.get_global_value_address(COUNTER)
    kernel.assembly = _assembly_addresses(engine, name)
    other = f"{name}{OTHER_FORM_SUFFIX}"
    if not name.endswith(OTHER_FORM_SUFFIX) and engine.get_function_address(other):
        kernel.compiled = _entries(JitKernel(other, kernel.llvm_ir, kernel.llvm_ir_optimized,
                                             0, engine, kernel.module))
    return kernel


def _assembly_addresses(engine, name: str) -> dict[str, int]:
    """The phase entries of the threaded assembly a kernel has (one complete set, or
    none)."""
    for phases in (SPLIT_PHASES, GATHER_PHASES):
        found = {phase: engine.get_function_address(f"{name}_{phase}") for phase in phases}
        if all(found.values()):
            return found
    return {}
