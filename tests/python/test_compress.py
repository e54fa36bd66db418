# whittle.compress and whittle.finetune: the same files as compress-model and finetune-model with
# the same options (sha256), the reports as dicts, NumPy arrays as calibration data, and errors as
# exceptions with the CLIs' one-line messages.
import hashlib
import json

import numpy as np
import pytest

import whittle
from conftest import MODELS


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _without_times(report):
    """The report with the fields that differ between two runs (times, paths) left out."""
    if isinstance(report, dict):
        return {k: _without_times(v) for k, v in report.items()
                if k not in ("seconds", "output", "input", "samples_per_s", "data_wait_s", "comm_s")}
    if isinstance(report, list):
        return [_without_times(v) for v in report]
    return report


def test_int8_same_file_as_compress_model(cli, tmp_path):
    cli_out, py_out, cli_json = tmp_path / "cli.onnx", tmp_path / "py.onnx", tmp_path / "cli.json"
    cli("compress-model", MODELS / "cnn.onnx", "-o", cli_out, "--int8", "--calibration-data", "fashion-mnist:train",
        "--calibration-samples", 200, "--eval-data", "fashion-mnist:test", "--eval-limit", 200, "--no-bench",
        "--report-json", cli_json, "-q")
    report = whittle.compress(MODELS / "cnn.onnx", py_out, passes=["int8"], calibration="fashion-mnist:train",
                              calibration_samples=200, eval="fashion-mnist:test", eval_limit=200, bench=False)
    assert _sha(py_out) == _sha(cli_out)
    assert isinstance(report, dict) and report["output"] == str(py_out)
    assert [p["pass"] for p in report["passes"]] == ["int8"]
    assert _without_times(report) == _without_times(json.loads(cli_json.read_text()))


def test_numpy_calibration_equals_npy_file(cli, tmp_path):
    x = np.random.default_rng(3).random((64, 1, 28, 28), dtype=np.float32)
    np.save(tmp_path / "calib.npy", x)
    cli("compress-model", MODELS / "mlp.onnx", "-o", tmp_path / "cli.onnx", "--int8", "--svd", "ratio=0.5",
        "--calibration-data", f"npy:{tmp_path / 'calib.npy'}", "--no-bench", "-q")
    from_array = tmp_path / "array.onnx"
    report = whittle.compress(MODELS / "mlp.onnx", from_array, passes=["int8", ("svd", {"ratio": 0.5})],
                              calibration=x, bench=False)
    assert report["calibration_samples"] == 64 and report["calibration_data"].startswith("numpy float32")
    from_path = tmp_path / "path.onnx"
    whittle.compress(MODELS / "mlp.onnx", from_path, passes="int8 svd:ratio=0.5".split(),
                     calibration=tmp_path / "calib.npy", bench=False)
    assert _sha(from_array) == _sha(tmp_path / "cli.onnx") == _sha(from_path)


def test_compressed_model_runs(tmp_path):
    out = tmp_path / "int8.onnx"
    whittle.compress(MODELS / "mlp.onnx", out, passes=["int8"], calibration="fashion-mnist:train",
                     calibration_samples=100, bench=False)
    x = np.random.default_rng(0).random((16, 1, 28, 28), dtype=np.float32)
    original = whittle.Session(MODELS / "mlp.onnx").run(x)["logits"]
    compressed = whittle.Session(out).run(x)["logits"]
    assert compressed.shape == original.shape
    assert (compressed.argmax(1) == original.argmax(1)).mean() >= 0.75


def test_compress_errors(tmp_path):
    out = tmp_path / "out.onnx"
    with pytest.raises(whittle.InvalidArgumentError, match="--svd: unknown option 'bogus'"):
        whittle.compress(MODELS / "mlp.onnx", out, passes=["svd:bogus=1"], bench=False)
    with pytest.raises(ValueError, match="no pass given"):
        whittle.compress(MODELS / "mlp.onnx", out, passes=[], bench=False)
    with pytest.raises(ValueError, match="--target needs --max-drop"):
        whittle.compress(MODELS / "mlp.onnx", out, target="size", calibration="fashion-mnist:train")
    with pytest.raises(ValueError, match="max_drop= is only used with target"):
        whittle.compress(MODELS / "mlp.onnx", out, passes=["int8"], max_drop=1)
    with pytest.raises(ValueError, match="does not exist"):
        whittle.compress(MODELS / "mlp.onnx", tmp_path / "no" / "out.onnx", passes=["int8"])
    with pytest.raises(ValueError, match="calibration_samples must be >= 1"):
        whittle.compress(MODELS / "mlp.onnx", out, passes=["int8"], calibration_samples=0)
    with pytest.raises(whittle.Error, match="missing.onnx") as e:
        whittle.compress(tmp_path / "missing.onnx", out, passes=["int8"], bench=False)
    assert e.value.code == "not_found"
    with pytest.raises(whittle.Error, match="calibration"):
        whittle.compress(MODELS / "mlp.onnx", out, passes=["int8"], calibration="fashion-mnist:nope", bench=False)
    with pytest.raises(TypeError):
        whittle.compress(MODELS / "mlp.onnx", out, passes=["int8"], calibration=[1, 2, 3])
    assert not out.exists()  # nothing is written on an error


def test_finetune_same_file_as_finetune_model(cli, tmp_path):
    student = tmp_path / "svd.onnx"
    whittle.compress(MODELS / "mlp.onnx", student, passes=["svd:ratio=0.5"], calibration="fashion-mnist:train",
                     calibration_samples=100, bench=False)
    cli_out, py_out = tmp_path / "cli.onnx", tmp_path / "py.onnx"
    printed = cli("finetune-model", student, "--teacher", MODELS / "mlp.onnx", "--train-data", "fashion-mnist:train",
                  "--train-limit", 256, "--eval-data", "fashion-mnist:test", "--eval-limit", 256, "--epochs", 1,
                  "-o", cli_out, "--json", "-q")
    result = whittle.finetune(student, py_out, teacher=MODELS / "mlp.onnx", train="fashion-mnist:train",
                              train_limit=256, eval="fashion-mnist:test", eval_limit=256, epochs=1)
    assert _sha(py_out) == _sha(cli_out)
    assert len(result["epochs"]) == 1 and result["output_params"] > 0 and result["device"] == "cpu"
    assert _without_times(result) == _without_times(json.loads(printed))


def test_compress_with_finetune(tmp_path):
    report = whittle.compress(MODELS / "mlp.onnx", tmp_path / "ft.onnx", passes=["svd:ratio=0.5"],
                              calibration="fashion-mnist:train", calibration_samples=100, finetune={"epochs": 1},
                              train="fashion-mnist:train", train_limit=256, bench=False)
    assert report["finetune"]["train_samples"] == 256 and len(report["finetune"]["epochs"]) == 1


def test_finetune_errors(tmp_path):
    student = MODELS / "mlp.onnx"
    with pytest.raises(ValueError, match="--teacher is needed for distillation"):
        whittle.finetune(student, tmp_path / "o.onnx", train="fashion-mnist:train")
    with pytest.raises(ValueError, match="--lr"):
        whittle.finetune(student, tmp_path / "o.onnx", train="fashion-mnist:train", teacher=student, lr=-1)
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        whittle.finetune(student, tmp_path / "o.onnx", train="fashion-mnist:train", teacher=student, epochs=0)
    with pytest.raises(ValueError, match="optimizer"):
        whittle.finetune(student, tmp_path / "o.onnx", train="fashion-mnist:train", teacher=student, optimizer="adam")
    with pytest.raises(whittle.Error, match="nope.onnx"):
        whittle.finetune(tmp_path / "nope.onnx", tmp_path / "o.onnx", train="fashion-mnist:train", alpha=0)
