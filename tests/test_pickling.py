"""Kernels, tensors and results pickle (a kernel raised ctypes' ValueError): a kernel
travels as its specification plus object code, and a fresh process runs it without LLVM
where it would compile the same code, or compiles it again where it would not."""

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
from llvsparse.kernel.pickling import _other_object

S = sp.random(40, 40, density=0.15, format="csr", random_state=3) + sp.eye(40)
X = np.random.default_rng(1).random(40)

CASES = [
    # (expression, formats, out_format, operands, numpy reference from the operands)
    ("y(i) = A(i,j) * x(j)", {"A": "csr"}, "dense", lambda: {"A": S, "x": X},
     lambda o: o["A"] @ o["x"]),
    ("y(i) = A(i,j) * A(j,i)", {"A": "csr"}, "dense", lambda: {"A": S},
     lambda o: (o["A"].multiply(o["A"].T)).sum(axis=1).A1),
    ("t = A(i,i)", {"A": "csr"}, "dense", lambda: {"A": S}, lambda o: o["A"].diagonal().sum()),
    ("C(i,j) = A(i,j) + B(i,j)", {"A": "csr", "B": "dia"}, "csr",
     lambda: {"A": S, "B": S.todia()}, lambda o: (o["A"] + o["B"]).toarray()),
    ("y(i) = A(i,j) * x(j)", {"A": "hash"}, "hash", lambda: {"A": S, "x": X},
     lambda o: o["A"] @ o["x"]),
]


def _run_fresh(blob: bytes, env: dict) -> str:
    script = textwrap.dedent("""
        import pickle, sys
        import numpy as np
        from llvsparse.backends.cpu import STATS
        import llvsparse.caching.disk
        if sys.argv[1] == "other-version":
            llvsparse.caching.disk.compiler_fingerprint = lambda: "another compiler"
        kernel, tensors, result, reference = pickle.loads(sys.stdin.buffer.read())
        again = kernel(**tensors)
        ok = np.allclose(np.asarray(again.to_numpy()), reference) and \\
            np.allclose(np.asarray(result.to_numpy()), reference)
        print(ok, STATS["llvm_compiles"], STATS["disk_loads"])
    """)
    done = subprocess.run([sys.executable, "-c", script, env.pop("MODE")], input=blob,
                          capture_output=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().split()


def _forms_carried(kernel) -> str:
    """How many loop forms' object code a pickle of ``kernel`` carries: its own, and its
    other form's where this process had compiled that (an earlier test's probe)."""
    return str(1 + (_other_object(kernel.last.jit) is not None))


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("mode", ["same", "other-version"])
def test_a_pickled_kernel_runs_in_a_fresh_process(case, mode):
    expression, formats, out_format, make, reference = CASES[case]
    operands = make()
    tensors = {n: ls.asarray(v, format=formats.get(n, "dense")) for n, v in operands.items()}
    kernel = ls.compile(expression, out_format=out_format, **formats)
    result = kernel(**tensors)
    expected = reference(operands)
    np.testing.assert_allclose(np.asarray(result.to_numpy()), expected)
    blob = pickle.dumps((kernel, tensors, result, expected))
    env = dict(os.environ, LLVSPARSE_CACHE="0", MODE=mode)  # no disk cache to hide behind
    ok, compiles, loads = _run_fresh(blob, env)
    assert ok == "True"
    if mode == "same":  # the object code from the pickle, no LLVM
        assert (compiles, loads) == ("0", _forms_carried(kernel))
    else:  # another compiler: built again, the pickled code never loaded
        assert int(compiles) >= 1 and loads == "0"


def test_a_kernel_pickled_again_keeps_its_object_code():
    """A kernel unpickled and pickled again (as a Dask scheduler forwards it to a
    worker) lost its object code: the instances it loaded went only into the process's
    cache, so the worker compiled it again; the second pickle carries them too."""
    expression, formats, out_format, make, reference = CASES[0]
    operands = make()
    tensors = {n: ls.asarray(v, format=formats.get(n, "dense")) for n, v in operands.items()}
    kernel = ls.compile(expression, out_format=out_format, **formats)
    result = kernel(**tensors)
    forwarded = pickle.loads(pickle.dumps(kernel))
    blob = pickle.dumps((forwarded, tensors, result, reference(operands)))
    env = dict(os.environ, LLVSPARSE_CACHE="0", MODE="same")
    assert _run_fresh(blob, env) == ["True", "0", _forms_carried(kernel)]


def test_tensors_and_results_round_trip_and_stay_checked():
    A = ls.asarray(S)
    back = pickle.loads(pickle.dumps(A))
    np.testing.assert_array_equal(back.to_numpy(), S.toarray())
    assert back.format == A.format and back.dtype == A.dtype
    # Packed tensors come back sealed: their index arrays are read-only again.
    assert not any(a.flags.writeable for level in back.level_arrays for a in level.values())
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    np.testing.assert_allclose(kernel(A=back, x=X).to_numpy(), S @ X)


def test_a_binding_says_it_cannot_be_pickled():
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    with pytest.raises(TypeError, match="pickle the Kernel"):
        pickle.dumps(kernel.bind(A=ls.asarray(S), x=X))


def test_a_tensor_from_unaligned_out_of_band_buffers_runs():
    """Pickle protocol 5 leaves numpy's buffers where the receiver put them
    (dask.distributed slices them out of a message): an unaligned CSR was refused by
    every kernel (CorruptTensorError: 'pos' must be aligned); it is copied aligned."""
    tensor = ls.Tensor.from_scipy(S, format="csr")
    buffers = []
    data = pickle.dumps(tensor, protocol=5, buffer_callback=buffers.append)
    assert buffers
    shifted = []
    for buffer in buffers:
        raw = bytearray(len(buffer.raw()) + 1)
        raw[1:] = buffer.raw()
        shifted.append(memoryview(raw)[1:])
    received = pickle.loads(data, buffers=shifted)
    y = ls.evaluate("y(i) = A(i,j) * x(j)", A=received, x=X).to_numpy()
    np.testing.assert_allclose(y, S @ X)
    assert not received.level_arrays[1]["crd"].flags.writeable  # still sealed


def test_a_kernel_pickled_after_its_probe_keeps_its_other_loop_form():
    """SpMV has two loop forms, the second compiled when a binding's probe first asks
    for it; a pickle carried only the first, so the receiver's bindings could never
    run (or time) the other. It travels as object code too: run there without LLVM."""
    from llvsparse.calls import probe

    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    A = ls.asarray(S, format="csr")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(probe.FORCED, "form", "other")
        np.testing.assert_allclose(kernel(A=A, x=X).to_numpy(), S @ X)
    assert kernel.last.jit.compiled is not None  # the other form, compiled here
    script = textwrap.dedent("""
        import pickle, sys
        import numpy as np
        from llvsparse.calls import probe
        from llvsparse.backends.cpu import STATS
        kernel, A, x, expected = pickle.loads(sys.stdin.buffer.read())
        probe.FORCED["form"] = "other"
        assert np.allclose(kernel(A=A, x=x).to_numpy(), expected)
        print(sorted(kernel._last_bound.code), STATS["llvm_compiles"])
    """)
    done = subprocess.run([sys.executable, "-c", script],
                          input=pickle.dumps((kernel, A, X, S @ X)), capture_output=True,
                          timeout=300, env=dict(os.environ, LLVSPARSE_CACHE="0"), check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["['other']", "0"]


# Each damaged pickle is loaded and run in a child forked for it: the process cache would
# serve every later load the first one's kernel, and a crash ends only that child.
FLIPPED_LOADS = textwrap.dedent("""
    import os, pickle, signal, sys
    import numpy as np
    import llvsparse
    blobs, A, x, expected = pickle.loads(sys.stdin.buffer.read())
    for k, blob in enumerate(blobs):
        sys.stdout.flush()
        child = os.fork()
        if child == 0:
            try:
                kernel = pickle.loads(blob)
            except Exception as error:
                outcome = f"refused {type(error).__name__} {error}"
            else:
                try:
                    ok = np.allclose(kernel(A=A, x=x).to_numpy(), expected)
                    outcome = "correct" if ok else "WRONG"
                except Exception as error:
                    outcome = f"raised {type(error).__name__} {error}"
            print(k, outcome.replace(chr(10), " "), flush=True)
            os._exit(0)
        status = os.waitpid(child, 0)[1]
        if os.WIFSIGNALED(status):
            print(k, "KILLED", signal.Signals(os.WTERMSIG(status)).name, flush=True)
""")


@pytest.mark.slow
def test_a_pickled_kernel_with_damaged_object_code_is_refused_not_run():
    """Random byte flips in the object code a pickled kernel carries killed the process
    that loaded it (SIGSEGV, SIGABRT, SIGILL in 23 of 60): nothing checked the bytes, as
    the disk cache's digest does. Each is loaded and run in a process of its own, so
    that a crash fails the test rather than ending pytest."""
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    A = ls.asarray(S, format="csr")
    np.testing.assert_allclose(kernel(A=A, x=X).to_numpy(), S @ X)
    blob = pickle.dumps(kernel)
    obj = kernel.last.jit.object_code
    start = blob.find(obj)
    assert start > 0 and blob.count(obj) == 1
    rng = np.random.default_rng(37)
    blobs = []
    for at in rng.integers(start, start + len(obj), 60):
        damaged = bytearray(blob)
        damaged[at] ^= int(rng.integers(1, 256))
        blobs.append(bytes(damaged))
    done = subprocess.run([sys.executable, "-c", FLIPPED_LOADS],
                          input=pickle.dumps((blobs, A, X, S @ X)), capture_output=True,
                          timeout=600, env=dict(os.environ, LLVSPARSE_CACHE="0"), check=False)
    lines = done.stdout.decode().splitlines()
    assert done.returncode == 0, (done.returncode, lines[-3:], done.stderr.decode()[-2000:])
    assert len(lines) == 60
    refused = [line for line in lines if "refused UnpicklingError" in line
               and "does not match its SHA-256" in line]
    assert len(refused) == 60, [line for line in lines if line not in refused][:5]
