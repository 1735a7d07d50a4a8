"""The cuda-python loader and launcher: its error mapping and the device call's memory
mirroring, through a fake driver module whose device memory is host memory and whose
launch runs the emulated kernel; and, marked ``gpu``, the same calls on a real GPU
(skipped, with the reason, where there is none)."""

from __future__ import annotations

import ctypes
import enum
import subprocess
import sys
import types

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.backends.cuda import driver
from llvsparse.backends.cuda.device_ir import device_name
from llvsparse.backends.cuda.emulator import emulate

import llvsparse as ls
from llvsparse.calls.gpu_call import device_code, device_phases, gpu_plan
from llvsparse.calls.gpu_device import device_call
from llvsparse.tensors import dlpack
from llvsparse.tensors.gpu_resident import DeviceTensor

ERRORS = {1: "CUDA_ERROR_INVALID_VALUE", 100: "CUDA_ERROR_NO_DEVICE",
          218: "CUDA_ERROR_INVALID_PTX", 719: "CUDA_ERROR_LAUNCH_FAILED"}


class FakeDriver(types.SimpleNamespace):
    """What the loader calls of ``cuda.bindings.driver``, each returning (status, ...)
    as cuda-python does; ``fail`` maps a call's name to the status it returns."""

    def __init__(self, launch=None, devices: int = 1, fail: dict[str, int] | None = None):
        super().__init__()
        self.CUresult = enum.IntEnum("CUresult", {"CUDA_SUCCESS": 0, **{
            name: code for code, name in ERRORS.items()}})
        self.CUdevice_attribute = types.SimpleNamespace(
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR=75,
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR=76)
        self.devices, self.fail, self.run = devices, fail or {}, launch
        self.memory: dict[int, ctypes.Array] = {}
        self.loaded: list[bytes] = []
        self.calls: list[str] = []

    def _ok(self, name: str, *values):
        self.calls.append(name)
        return (self.fail.get(name, 0), *values)

    def cuGetErrorName(self, status):
        return (0, ERRORS[int(status)].encode())

    def cuInit(self, flags):
        return self._ok("cuInit")

    def cuDeviceGetCount(self):
        return self._ok("cuDeviceGetCount", self.devices)

    def cuDeviceGet(self, ordinal):
        return self._ok("cuDeviceGet", ordinal)

    def cuDevicePrimaryCtxRetain(self, handle):
        return self._ok("cuDevicePrimaryCtxRetain", "context")

    def cuCtxSetCurrent(self, context):
        return self._ok("cuCtxSetCurrent")

    def cuStreamCreate(self, flags):
        return self._ok("cuStreamCreate", "stream")

    def cuDeviceGetAttribute(self, attribute, handle):
        return self._ok("cuDeviceGetAttribute", 8 if attribute == 75 else 0)

    def cuModuleLoadData(self, image):
        self.loaded.append(ctypes.string_at(image))
        return self._ok("cuModuleLoadData", "module")

    def cuModuleGetGlobal(self, module, name):
        """A global of the emulated module the launches run (its host address)."""
        return self._ok("cuModuleGetGlobal", self.run.global_address(name.decode()), 8)

    def cuModuleGetFunction(self, module, name):
        return self._ok("cuModuleGetFunction", name.decode())

    def cuMemAlloc(self, nbytes):
        buffer = ctypes.create_string_buffer(nbytes)
        self.memory[ctypes.addressof(buffer)] = buffer
        return self._ok("cuMemAlloc", ctypes.addressof(buffer))

    def cuMemFree(self, pointer):
        del self.memory[pointer]
        return self._ok("cuMemFree")

    def cuMemcpyHtoD(self, destination, source, nbytes):
        ctypes.memmove(destination, source, nbytes)
        return self._ok("cuMemcpyHtoD")

    def cuMemcpyDtoH(self, destination, source, nbytes):
        ctypes.memmove(destination, source, nbytes)
        return self._ok("cuMemcpyDtoH")

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        """The device entry's five arguments (table, status, bounds, threads, extra)."""
        pointers = (ctypes.c_uint64 * 5).from_address(params)
        self.run(function, gx, bx, *(ctypes.c_uint64.from_address(p).value for p in pointers))
        return self._ok("cuLaunchKernel")

    def cuStreamSynchronize(self, stream):
        return self._ok("cuStreamSynchronize")


def emulated_launch(kernel: ls.Kernel):
    """A launch that runs ``kernel``'s emulated device kernels over the grid asked for,
    the phase (whole, count, fill) named by the function launched."""
    inst = kernel._with_code()
    plan = gpu_plan(kernel, inst)
    code = device_code(kernel, inst, plan)
    emulated = emulate(code.llvm_ir, code.name, device_phases(plan), plan.lanes, plan.windows)
    phases = {device_name(code.name, phase): phase for phase in device_phases(plan)}
    launches: list[tuple[int, int]] = []  # (grid, threads) of each launch
    launches_by_phase: list[str] = []

    def run(function: str, grid: int, block: int, table: int, status: int, bounds: int,
            threads: int, extra: int) -> None:
        launches.append((grid, threads))
        launches_by_phase.append(phases[function])
        failed = emulated.launch(phases[function], grid, block, table, bounds, threads,
                                 extra)
        if failed:
            ctypes.c_int32.from_address(status).value = failed
    run.launches, run.phases = launches, launches_by_phase
    run.global_address = emulated.engine.get_global_value_address
    return run


@pytest.fixture(autouse=True)
def _fresh_contexts(monkeypatch):
    monkeypatch.setattr(driver, "_CONTEXTS", {})


def test_driver_errors_carry_the_cuda_error_name() -> None:
    fake = FakeDriver(fail={"cuModuleLoadData": 218})
    gpu = driver.device(0, fake)
    assert gpu.sm == "sm_80"
    with pytest.raises(driver.CudaError, match="cuModuleLoadData failed: "
                                               "CUDA_ERROR_INVALID_PTX") as caught:
        gpu.function(".version 8.0", "k")
    assert caught.value.name == "CUDA_ERROR_INVALID_PTX" and caught.value.code == 218


@pytest.mark.parametrize(("fake", "match"), [
    (FakeDriver(fail={"cuInit": 100}), "no usable CUDA driver: .*CUDA_ERROR_NO_DEVICE"),
    (FakeDriver(devices=0), "GPU 0 asked for, 0 present"),
])
def test_no_device_is_a_clear_error(fake, match) -> None:
    with pytest.raises(driver.NoDevice, match=match):
        driver.device(0, fake)


def test_missing_cuda_python_names_the_extra(monkeypatch) -> None:
    monkeypatch.setattr(driver, "DRIVER_MODULE", "llvsparse_no_such_module.driver")
    with pytest.raises(driver.NoDevice, match=r"pip install 'llvsparse\[cuda\]'"):
        driver.load_driver()


def test_launch_checks_its_grid() -> None:
    gpu = driver.device(0, FakeDriver())
    with pytest.raises(ValueError, match="at least one block"):
        gpu.launch("k", 0, 128, ())


@pytest.mark.parametrize(("expression", "formats", "reference"), [
    ("y(i) = A(i,j) * x(j)", {"A": "csr", "x": "dense"}, lambda A, x: A @ x),
    ("C(i,k) = A(i,j) * B(j,k)", {"A": "csr", "B": "dense", "C": "dense"},
     lambda A, B: A @ B),
])
@pytest.mark.parametrize("rows", [0, 1, 200])
@pytest.mark.parametrize("schedule", ["thread_per_row", "nonzero_split"])
def test_device_call_mirrors_descriptors(expression, formats, reference, rows,
                                         schedule) -> None:
    """The device path's host side (descriptors and a nonzero split's bounds copied to
    device memory, the PTX loaded, the launch's arguments and grid, the output copied
    back, memory freed) against numpy, with the fake driver's launch running the
    emulated kernel."""
    kernel = ls.compile(expression, target="cuda", gpu_schedule=schedule, **formats)
    rng = np.random.default_rng(rows)
    A = sp.random(rows, 30, density=0.2, format="csr", random_state=rng)
    operands = {"A": A, "x": rng.random(30), "B": rng.random((30, 4))}
    operands = {n: operands[n] for n in formats if n in operands}
    fake = FakeDriver(emulated_launch(kernel))
    got = device_call(kernel, True, operands, {}, gpu=driver.device(0, fake))
    assert np.allclose(got.to_numpy(), reference(**operands))
    assert b".entry llvsparse_kernel_device(" in fake.loaded[0]
    assert b".target sm_80" in fake.loaded[0]
    assert not fake.memory  # every device allocation freed
    assert fake.calls.count("cuLaunchKernel") == 1
    (grid, threads), = fake.run.launches
    assert grid == max(1, -(-threads // 128))
    assert threads == rows if schedule == "thread_per_row" else threads <= max(rows, 1)


@pytest.mark.parametrize("rows", [0, 1, 200])
def test_device_call_entry_split(rows) -> None:
    """An entry split through the driver: the windows of positions and each window's
    rows copied to the device, one launch, the atomically summed rows copied back."""
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", target="cuda",
                        gpu_schedule="entry_split")
    rng = np.random.default_rng(rows)
    dense = rng.standard_normal((rows, 300)) * (rng.random((rows, 300)) < 0.05)
    if rows > 1:
        dense[rows // 2] = rng.standard_normal(300)  # a row many windows share
    A, x = sp.csr_matrix(dense), rng.standard_normal(300)
    fake = FakeDriver(emulated_launch(kernel))
    got = device_call(kernel, True, {"A": A, "x": x}, {}, gpu=driver.device(0, fake))
    assert np.allclose(got.to_numpy(), A @ x)
    (grid, threads), = fake.run.launches
    assert threads == -(-A.nnz // 32) and grid == max(1, -(-threads // 128))
    assert b"atom.global.add.f64" in fake.loaded[0] or b"atom.add.f64" in fake.loaded[0]
    assert not fake.memory


ADD_FORMATS = {"A": "csr", "F": "csr", "C": "csr"}
SPGEMM_FORMATS = {"A": "csr", "G": "csr", "C": "csr"}
SDDMM_FORMATS = {"A": "csr", "D": "dense", "E": "dense", "C": "csr"}


@pytest.mark.parametrize(("expression", "formats", "reference"), [
    ("C(i,j) = A(i,j) + F(i,j)", ADD_FORMATS, lambda A, F: A + F),
    ("C(i,j) = A(i,j) * F(i,j)", ADD_FORMATS, lambda A, F: A.multiply(F)),
    ("C(i,j) = A(i,j) * D(i,k) * E(j,k)", SDDMM_FORMATS,
     lambda A, D, E: A.multiply(D @ E.T)),
    ("C(i,j) = A(i,k) * G(k,j)", SPGEMM_FORMATS, lambda A, G: A @ G),
])
@pytest.mark.parametrize(("rows", "pattern"), [(0, "random"), (1, "random"), (200, "random"),
                                               (200, "no entries"), (130, "empty rows")])
def test_device_call_counts_then_fills(expression, formats, reference, rows, pattern) -> None:
    """count_fill through the driver: a count launch, the counts copied back and
    scanned on the host, the output's arrays allocated on the host and the device by
    the count (no device heap), a fill launch, the arrays copied back; the result a
    CSR tensor equal to scipy's, every device allocation freed."""
    kernel = ls.compile(expression, target="cuda", **formats)
    assert kernel.gpu_plan().schedule == "count_fill"
    rng = np.random.default_rng(rows)
    density = 0.0 if pattern == "no entries" else 0.2
    A = sp.random(rows, 30, density=density, format="csr", random_state=rng)
    if pattern == "empty rows":
        A = sp.csr_matrix(sp.diags((np.arange(rows) % 3 != 0).astype(float)) @ A)
    operands = {"A": A, "F": sp.random(rows, 30, density=0.2, format="csr", random_state=rng),
                "G": sp.random(30, 20, density=0.2, format="csr", random_state=rng),
                "D": rng.random((rows, 4)), "E": rng.random((30, 4))}
    operands = {n: operands[n] for n in formats if n in operands}
    fake = FakeDriver(emulated_launch(kernel))
    cache: dict = {}
    for _ in range(2):  # the second call reuses the loaded module
        got = device_call(kernel, True, operands, cache, gpu=driver.device(0, fake))
        expected = sp.csr_matrix(reference(**operands))
        assert got.format.name == "csr" and got.shape == expected.shape
        assert np.allclose(got.to_numpy(), expected.toarray())
        assert got.to_scipy().nnz == got.values.size
    assert fake.run.phases == ["count", "fill"] * 2
    assert fake.calls.count("cuModuleLoadData") == 1
    assert b".entry llvsparse_kernel_count_device(" in fake.loaded[0]
    assert b".entry llvsparse_kernel_fill_device(" in fake.loaded[0]
    assert b"malloc" not in fake.loaded[0]
    assert not fake.memory  # every device allocation freed


def test_device_fill_reads_the_scanned_offsets() -> None:
    """The fill launch gets the exclusive scan of what the count launch wrote, as a
    device array of threads + 1 offsets."""
    kernel = ls.compile("C(i,j) = A(i,j) + F(i,j)", target="cuda", **ADD_FORMATS)
    seen: list[np.ndarray] = []
    inner = emulated_launch(kernel)

    def run(function, grid, block, table, status, bounds, threads, extra):
        inner(function, grid, block, table, status, bounds, threads, extra)
        if function.endswith("_count_device"):
            seen.append(np.ctypeslib.as_array((ctypes.c_int64 * threads).from_address(extra))
                        .copy())
        elif function.endswith("_fill_device"):
            seen.append(np.ctypeslib.as_array((ctypes.c_int64 * (threads + 1))
                                              .from_address(extra)).copy())
    fake = FakeDriver(run)
    A = sp.random(7, 9, density=0.4, format="csr", random_state=np.random.default_rng(2))
    F = sp.random(7, 9, density=0.4, format="csr", random_state=np.random.default_rng(3))
    got = device_call(kernel, True, {"A": A, "F": F}, {}, gpu=driver.device(0, fake))
    counts, offsets = seen
    assert np.array_equal(counts, np.diff((A + F).indptr))
    assert np.array_equal(offsets, np.concatenate([[0], np.cumsum(counts)]))
    assert np.allclose(got.to_numpy(), (A + F).toarray())


def test_failing_launch_is_an_exception() -> None:
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", target="cuda")
    fake = FakeDriver(emulated_launch(kernel), fail={"cuLaunchKernel": 719})
    with pytest.raises(driver.CudaError, match="CUDA_ERROR_LAUNCH_FAILED"):
        device_call(kernel, True, {"A": sp.eye(3, format="csr"), "x": np.ones(3)}, {},
                    gpu=driver.device(0, fake))
    assert not fake.memory


def test_device_tensors_stay_on_the_device(monkeypatch) -> None:
    """A tensor moved with to_device is copied once, not on each call; results match."""
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", target="cuda")
    fake = FakeDriver(emulated_launch(kernel))
    monkeypatch.setattr(driver, "load_driver", lambda: fake)
    rng = np.random.default_rng(3)
    A = sp.random(50, 40, density=0.2, format="csr", random_state=rng)
    tensor = ls.Tensor.from_scipy(A, format="csr")
    on_gpu = tensor.to_device()
    assert on_gpu.to_host() is tensor and on_gpu.shape == (50, 40)
    resident = len(fake.memory)
    assert resident == len(on_gpu.pointers) >= 3  # positions, coordinates, values
    cache: dict = {}
    for _ in range(2):
        x = rng.random(40)
        copies = fake.calls.count("cuMemcpyHtoD")
        got = device_call(kernel, True, {"A": on_gpu, "x": x}, cache)
        assert np.allclose(got.to_numpy(), A @ x)
        per_call = fake.calls.count("cuMemcpyHtoD") - copies
        assert len(fake.memory) == resident  # the call freed its own copies only
    copies = fake.calls.count("cuMemcpyHtoD")
    host = device_call(kernel, True, {"A": tensor, "x": x}, cache)  # A copied this time
    assert np.allclose(host.to_numpy(), A @ x)
    assert fake.calls.count("cuMemcpyHtoD") - copies - per_call == len(on_gpu.pointers)
    on_gpu.free()
    assert not fake.memory


def test_device_tensor_on_another_gpu_is_refused(monkeypatch) -> None:
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", target="cuda")
    fake = FakeDriver(emulated_launch(kernel))
    monkeypatch.setattr(driver, "load_driver", lambda: fake)
    on_gpu = ls.Tensor.from_scipy(sp.eye(3, format="csr"), format="csr").to_device()
    other = driver.device(0, FakeDriver(emulated_launch(kernel)))
    with pytest.raises(ValueError, match="A is on GPU 0, not on the GPU 0 this call"):
        device_call(kernel, True, {"A": on_gpu, "x": np.ones(3)}, {}, gpu=other)


class DLPackArray:
    """What a DLPack producer (cupy, torch) hands over: a capsule and its device."""

    def __init__(self, capsule: object, device: tuple[int, int]):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, stream=None, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def test_dlpack_host_arrays_in_and_out_without_copies() -> None:
    """numpy arrays come in through DLPack as dense tensors sharing their memory (or
    packed into the format asked for); dense tensors go out the same way; a sparse
    tensor says it has no strided view."""
    a = np.arange(12.0).reshape(3, 4)
    dense = ls.Tensor.from_dlpack(a)
    assert np.shares_memory(dense.values, a) and dense.shape == (3, 4)
    back = np.from_dlpack(dense)
    assert np.shares_memory(back, a) and np.array_equal(back, a)
    packed = ls.Tensor.from_dlpack(a * (a > 5), format="csr")
    assert packed.format.name == "csr" and np.array_equal(packed.to_numpy(), a * (a > 5))
    with pytest.raises(TypeError, match="a csr tensor has none"):
        np.from_dlpack(packed)
    with pytest.raises(ValueError, match="not row-major contiguous"):
        dlpack.consume(np.arange(10.0)[::2].__dlpack__())
    with pytest.raises(ValueError, match="device type 7"):
        ls.Tensor.from_dlpack(DLPackArray(None, (7, 0)))


def test_dlpack_device_arrays_in_and_out(monkeypatch) -> None:
    """A device tensor goes out as a CUDA capsule of its device pointer and comes back in
    as a device tensor borrowing that memory (no allocation, no copy), which a kernel
    reads in place; releasing the borrower calls the producer's deleter."""
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", target="cuda")
    fake = FakeDriver(emulated_launch(kernel))
    monkeypatch.setattr(driver, "load_driver", lambda: fake)
    rng = np.random.default_rng(5)
    x = rng.random(40)
    owner = ls.Tensor.from_numpy(x).to_device()
    (pointer,) = owner.pointers.values()
    allocations = fake.calls.count("cuMemAlloc")
    capsule = owner.__dlpack__()
    assert owner.__dlpack_device__() == (dlpack.CUDA, 0)
    borrowed = ls.Tensor.from_dlpack(DLPackArray(capsule, owner.__dlpack_device__()))
    assert isinstance(borrowed, DeviceTensor) and borrowed.shape == (40,)
    assert list(borrowed.pointers.values()) == [pointer]
    assert fake.calls.count("cuMemAlloc") == allocations
    A = sp.random(30, 40, density=0.2, format="csr", random_state=rng)
    got = device_call(kernel, True, {"A": A, "x": borrowed}, {})
    assert np.allclose(got.to_numpy(), A @ x)
    assert np.array_equal(borrowed.to_host().to_numpy(), x)  # copied from the device
    exported = len(dlpack._EXPORTED)
    borrowed.free()
    assert len(dlpack._EXPORTED) == exported - 1 and pointer in fake.memory
    with pytest.raises(TypeError, match="unconsumed DLPack capsule"):
        dlpack.consume(capsule)  # a capsule is consumed once
    with pytest.raises(ValueError, match="dense device tensor, not csr"):
        ls.Tensor.from_dlpack(DLPackArray(owner.__dlpack__(), (dlpack.CUDA, 0)), "csr")
    owner.free()
    assert not fake.memory
    sparse = ls.Tensor.from_scipy(A, format="csr").to_device()
    with pytest.raises(TypeError, match="csr tensor has none"):
        sparse.__dlpack__()
    sparse.free()


def _real_device() -> driver.Device:
    try:
        return driver.device(0)
    except driver.NoDevice as error:
        pytest.skip(f"no GPU here: {error}")


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [0, 1, 1000])
def test_spmv_on_a_gpu(rows, monkeypatch) -> None:
    monkeypatch.setattr(driver, "_CONTEXTS", {})
    _real_device()
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", target="cuda")
    rng = np.random.default_rng(rows)
    A = sp.random(rows, 300, density=0.05, format="csr", random_state=rng)
    x = rng.random(300)
    assert np.allclose(kernel(A=A, x=x).to_numpy(), A @ x)


@pytest.mark.gpu
def test_spmm_on_a_gpu() -> None:
    _real_device()
    kernel = ls.compile("C(i,k) = A(i,j) * B(j,k)", A="csr", B="dense", C="dense",
                        target="cuda")
    rng = np.random.default_rng(1)
    A = sp.random(500, 200, density=0.05, format="csr", random_state=rng)
    B = rng.random((200, 8))
    assert np.allclose(kernel(A=A, B=B).to_numpy(), A @ B)


def test_import_needs_no_cuda_python() -> None:
    """``import llvsparse`` (and compiling for the GPU targets) loads no cuda module."""
    code = ("import sys, llvsparse as ls\n"
            "ls.compile('y(i) = A(i,j) * x(j)', A='csr', x='dense', target='cuda')\n"
            "print(sorted(m for m in sys.modules if m == 'cuda' or m.startswith('cuda.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=True)
    assert done.stdout.strip() == "[]"
