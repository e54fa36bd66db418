# whittle.Session: outputs equal run-model's bit for bit, the model's inputs and outputs, inputs
# read in place and outputs handed to NumPy without a copy (never one over the other), errors as
# exceptions with the one-line message, and run() from several threads at once (the GIL released
# while Whittle runs).
import gc
import sys
import threading
import time

import numpy as np
import pytest

import whittle
from conftest import MODELS


def _images(n, seed=0):
    return np.random.default_rng(seed).random((n, 1, 28, 28), dtype=np.float32)


@pytest.mark.parametrize("model", ["cnn.onnx", "mlp.onnx"])
def test_outputs_equal_run_model(model, cli, tmp_path):
    session = whittle.Session(MODELS / model)
    name = session.inputs[0].name
    x = _images(8)
    x_path = tmp_path / "x.npy"
    np.save(x_path, x)
    cli("run-model", MODELS / model, "--input", f"{name}={x_path}", "--output-dir", tmp_path / "out")
    out = session.run({name: x})
    assert list(out) == [o.name for o in session.outputs]
    for o in session.outputs:
        expected = np.load(tmp_path / "out" / f"{o.name}.npy")
        assert out[o.name].dtype == expected.dtype and out[o.name].shape == expected.shape
        assert np.array_equal(out[o.name], expected), f"max abs diff {np.abs(out[o.name] - expected).max()}"


def test_inputs_and_outputs():
    session = whittle.Session(MODELS / "cnn.onnx", threads=2)
    assert session.device == "cpu" and session.threads == 2
    (inp,) = session.inputs
    assert inp == whittle.IoInfo("image", np.dtype("float32"), ("batch", 1, 28, 28), "tensor")
    (out,) = session.outputs
    assert out.name == "logits" and out.dtype == np.float32 and out.shape == ("batch", 10)
    # One input: a bare array is enough.
    assert np.array_equal(session.run(_images(2))["logits"], session.run({"image": _images(2)})["logits"])


def test_outputs_are_whittle_memory_without_copy():
    session = whittle.Session(MODELS / "cnn.onnx")
    logits = session.run({"image": _images(4)})["logits"]
    # The array wraps the buffer the run computed it in: its base is that buffer, at its address.
    memory = logits.base.obj
    assert type(memory).__name__ == "_OutputMemory"
    assert memory.address <= logits.ctypes.data < memory.address + memory.nbytes
    assert logits.flags.writeable and logits.flags.c_contiguous
    expected = logits.copy()
    del session, memory
    gc.collect()
    # The array owns the memory: it outlives the session, and other runs do not touch it.
    other = whittle.Session(MODELS / "cnn.onnx").run({"image": _images(4, seed=1)})["logits"]
    assert np.array_equal(logits, expected) and not np.array_equal(other, expected)
    logits[:] = 0  # writable, and nobody else's
    assert not logits.any()


def test_non_contiguous_input_is_made_contiguous():
    session = whittle.Session(MODELS / "mlp.onnx")
    x = _images(4)
    fortran = np.asfortranarray(x)
    assert not fortran.flags.c_contiguous
    assert np.array_equal(session.run(fortran)["logits"], session.run(x)["logits"])


def test_missing_file():
    with pytest.raises(whittle.Error, match="does-not-exist.onnx") as e:
        whittle.Session("does-not-exist.onnx")
    assert e.value.code == "not_found" and "\n" not in str(e.value)
    assert isinstance(e.value, RuntimeError)


def test_bad_inputs():
    session = whittle.Session(MODELS / "cnn.onnx")
    with pytest.raises(whittle.InvalidArgumentError, match="no input named 'x'") as e:
        session.run({"x": _images(1)})
    assert isinstance(e.value, ValueError) and e.value.code == "invalid_argument"
    with pytest.raises(ValueError, match="input 'image' must be float32, got float64"):
        session.run({"image": _images(1).astype(np.float64)})
    with pytest.raises(ValueError, match=r"must have shape \[batch,1,28,28\], got \[1,28,28\]"):
        session.run({"image": _images(1)[0]})
    with pytest.raises(ValueError, match="missing input 'image'"):
        session.run({})
    with pytest.raises(ValueError, match="no Whittle type"):
        session.run({"image": _images(1).astype(np.complex64)})
    with pytest.raises(ValueError, match="device"):
        whittle.Session(MODELS / "cnn.onnx", device="tpu")
    with pytest.raises(ValueError, match="threads"):
        whittle.Session(MODELS / "cnn.onnx", threads=-1)
    # The session is still usable after the errors.
    assert session.run(_images(1))["logits"].shape == (1, 10)


def test_threads_share_a_session_and_release_the_gil():
    session = whittle.Session(MODELS / "cnn.onnx")
    inputs = [_images(64, seed=s) for s in range(4)]
    expected = [session.run(x)["logits"] for x in inputs]
    results = {}

    def work(i):
        for _ in range(3):
            results[i] = session.run(inputs[i])["logits"]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert np.array_equal(results[i], expected[i])

    # While one thread is inside run(), another Python thread keeps running: the GIL is released.
    # The spinner notes the time every 100 steps; some notes must fall well inside the run (a
    # thread switch just before the call could give it a few ms at the start, hence the margin).
    notes = []
    stop = threading.Event()

    def spin():
        n = 0
        while not stop.is_set():
            n += 1
            if n % 100 == 0:
                notes.append(time.perf_counter())

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        big = _images(1024)
        start = time.perf_counter()
        session.run(big)
        end = time.perf_counter()
    finally:
        stop.set()
        spinner.join()
    margin = 0.01
    assert end - start > 4 * margin, f"run() took only {end - start:.3f} s: too short to tell"
    inside = [t for t in notes if start + margin < t < end - margin]
    assert inside, f"no step of the other thread during the {end - start:.3f} s of run()"


def _misaligned(x):
    """x's values in memory whose address is not a multiple of the item size (NumPy allows it)."""
    a = np.frombuffer(bytearray(x.nbytes + 1), dtype=x.dtype, count=x.size, offset=1).reshape(x.shape)
    a[...] = x
    assert not a.flags.aligned
    return a


@pytest.mark.parametrize("model", ["cnn.onnx", "mlp.onnx", "resnet.onnx", "transformer.onnx"])
def test_inputs_are_read_in_place_where_the_layout_allows(model):
    session = whittle.Session(MODELS / model)
    (inp,) = session.inputs
    x = _images(3)
    assert inp.dtype == x.dtype and x.ctypes.data % x.itemsize == 0
    pristine = x.copy()
    refs = sys.getrefcount(x)
    # Read in place: no byte of it copied; the run does not write it.
    in_place = session.run({inp.name: x})
    assert session.input_bytes == (x.nbytes, 0)
    assert np.array_equal(x, pristine)
    # The run let go of the array (its buffer view) once it returned.
    assert sys.getrefcount(x) == refs
    # A read-only array is read in place too.
    frozen = pristine.copy()
    frozen.flags.writeable = False
    read_only = session.run({inp.name: frozen})
    assert session.input_bytes == (2 * x.nbytes, 0)
    # An array at an address its dtype does not suit is copied, and gives the same outputs.
    copied = session.run({inp.name: _misaligned(pristine)})
    assert session.input_bytes == (2 * x.nbytes, x.nbytes)
    for name in in_place:
        assert np.array_equal(in_place[name], copied[name]) and np.array_equal(read_only[name], copied[name])


def test_an_output_never_shares_the_callers_input_memory(tmp_path):
    import onnx  # in the check venv (scripts/install-check-deps.sh)
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["same"]), helper.make_node("Reshape", ["x", "shape"], ["flat"])],
        "aliases",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("same", TensorProto.FLOAT, ["n", 4]),
         helper.make_tensor_value_info("flat", TensorProto.FLOAT, [None])],
        [helper.make_tensor("shape", TensorProto.INT64, [1], [-1])],
    )
    path = tmp_path / "aliases.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    session = whittle.Session(path)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = session.run({"x": x})
    assert session.input_bytes == (x.nbytes, 0)
    assert np.array_equal(out["same"], x) and np.array_equal(out["flat"], x.ravel())
    x[:] = -1  # the caller's array changes; the outputs it gave do not
    assert np.array_equal(out["same"], np.arange(8, dtype=np.float32).reshape(2, 4))
    assert np.array_equal(out["flat"], np.arange(8, dtype=np.float32))
    out["same"][:] = 5  # and writing an output leaves the input alone
    assert (x == -1).all()
