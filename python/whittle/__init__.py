"""Whittle from Python: run ONNX models in Whittle's runtime, compress and fine-tune them with the
same pipeline as compress-model and finetune-model (docs/python.md).

    import whittle
    logits = whittle.Session("models/cnn.onnx").run({"x": x})["logits"]
    report = whittle.compress("models/cnn.onnx", "cnn.int8.onnx", passes=["int8"],
                              calibration="fashion-mnist:train")

Errors Whittle reports raise whittle.Error (a RuntimeError) with the CLIs' one-line message;
bad arguments raise whittle.InvalidArgumentError (an Error and a ValueError), or TypeError.
"""

import json
import os
from collections import namedtuple
from collections.abc import Mapping

import numpy as np

try:
    from . import _whittle
except ImportError as e:  # pragma: no cover - depends on how the library was built
    if "static TLS" in str(e):
        raise ImportError(
            f"{e}: this libwhittle.so was built for programs that link it (initial-exec TLS, the "
            "build tree's); run Python with GLIBC_TUNABLES=glibc.rtld.optional_static_tls=4096, or "
            "install the module with `pip install .`, whose library is built to be opened by Python"
        ) from e
    raise

__all__ = ["Session", "IoInfo", "compress", "finetune", "Error", "InvalidArgumentError", "__version__"]

Error = _whittle.Error
InvalidArgumentError = _whittle.InvalidArgumentError
__version__ = _whittle.__version__

IoInfo = namedtuple("IoInfo", "name dtype shape kind")
IoInfo.__doc__ = """A model input or output: name, dtype (a numpy.dtype; a str such as 'bfloat16'
where NumPy has none), shape (a tuple: int for a fixed dim, str for a named one such as 'batch',
None for an unknown one) and kind ('tensor', 'sequence', 'optional(tensor)', ...)."""


def _dtype(name):
    try:
        return np.dtype(name)
    except TypeError:
        return name


def _io_infos(raw):
    return [IoInfo(name, _dtype(dtype), tuple(shape), kind) for name, dtype, shape, kind in raw]


def _c_array(value):
    """A C-contiguous ndarray of value (no copy when it is one already)."""
    a = np.asarray(value)
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _from_output(value):
    if value is None:
        return None
    if isinstance(value, list):
        return [_from_output(v) for v in value]
    return np.asarray(value)  # wraps Whittle's buffer: no copy; the array keeps it alive


class Session:
    """A loaded model (Session::Load): validated, shapes inferred, rewritten and planned once.

    Session(path, device="cpu", threads=1, optimize=True): device is "cpu", "cuda" (a CUDA build)
    or "reference" (the plain reference kernels); threads are intra-op threads (0 = all cores).
    run() may be called from several Python threads at once: it releases the GIL, and the results
    equal a single-threaded run's.
    """

    def __init__(self, path, device="cpu", threads=1, optimize=True):
        if not isinstance(device, str):
            raise TypeError(f"device must be a str ('cpu', 'cuda' or 'reference'), got {type(device).__name__}")
        self._session = _whittle.Session(os.fspath(path), device, _int("threads", threads, 0), bool(optimize))
        self.inputs = _io_infos(self._session.inputs)
        self.outputs = _io_infos(self._session.outputs)

    @property
    def device(self):
        return self._session.device

    @property
    def threads(self):
        return self._session.threads

    def run(self, feeds):
        """Runs the model: feeds maps input names to arrays (a single array for a one-input model;
        a list of arrays for a sequence input, None for an optional one). Each array must have the
        input's dtype (nothing is converted). A C-contiguous array whose address suits its dtype
        (as NumPy's own are) is read in place, without a copy: do not write to it while run()
        works; others are copied once (a non-contiguous one is made contiguous first). Returns {output name: ndarray} in the model's output order; each array
        wraps the memory Whittle computed it in (no copy) and owns it."""
        if not isinstance(feeds, Mapping):
            if len(self.inputs) != 1:
                raise TypeError(f"run() takes a dict of inputs for a model with {len(self.inputs)} inputs")
            feeds = {self.inputs[0].name: feeds}
        kinds = {i.name: i.kind for i in self.inputs}
        prepared = {}
        for name, value in feeds.items():
            if value is None:
                prepared[name] = None
            elif "sequence" in kinds.get(name, "") and isinstance(value, (list, tuple)):
                prepared[name] = [_c_array(v) for v in value]
            else:
                prepared[name] = _c_array(value)
        out = self._session.run(prepared)
        return {name: _from_output(v) for name, v in out.items()}

    @property
    def input_bytes(self):
        """(bytes read in place, bytes copied): the inputs of this session's runs so far."""
        return self._session.input_bytes

    def __repr__(self):
        return f"whittle.Session(inputs={[i.name for i in self.inputs]}, outputs={[o.name for o in self.outputs]}, device={self.device!r})"


# ---- argument checks (the CLIs' validators, with the keyword names) -------------------------------

def _int(name, value, low=None, high=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise InvalidArgumentError(f"{name} must be {bounds}, got {value}")
    return value


def _float(name, value, low=None, high=None, low_open=False):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    value = float(value)
    bad = (low is not None and (value < low or (low_open and value == low))) or (high is not None and value > high)
    if bad or value != value:
        bounds = (f"> {low}" if low_open else f">= {low}") if high is None else f"in [{low}, {high}]"
        raise InvalidArgumentError(f"{name} must be {bounds}, got {value}")
    return value


def _path(name, value, output=False):
    if value is None:
        return ""
    path = os.fspath(value)
    if output:
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            raise InvalidArgumentError(f"{name} {path} is a directory (a file name is expected)")
        if not os.path.isdir(folder):
            raise InvalidArgumentError(f"{name} {path}: the directory {folder} does not exist")
    return path


_DATA_SCHEMES = ("fashion-mnist:", "idx:", "npy:", "npz:", "calls:", "cifar10:")


def _data(name, value):
    """None, ("spec", SPEC) or ("arrays", inputs, labels or None, description)."""
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        spec = os.fspath(value)
        if not spec.startswith(_DATA_SCHEMES):
            if spec.endswith(".npy"):
                spec = "npy:" + spec
            elif spec.endswith(".npz"):
                spec = "npz:" + spec
        return ("spec", spec)
    labels = None
    if isinstance(value, tuple):
        if len(value) != 2:
            raise TypeError(f"{name}: a tuple is (inputs, labels), got {len(value)} items")
        value, labels = value
        labels = None if labels is None else _c_array(labels)
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{name} must be a data spec (str), a .npy/.npz path, an ndarray or (inputs, labels), "
                        f"got {type(value).__name__}")
    inputs = _c_array(value)
    return ("arrays", inputs, labels, f"numpy {inputs.dtype} {list(inputs.shape)}")


def _spec(value):
    """A pass or fine-tune spec: a str as it is, a dict as key=value pairs."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return ",".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in value.items())
    raise TypeError(f"a spec is a str ('ratio=0.5') or a dict ({{'ratio': 0.5}}), got {type(value).__name__}")


def _passes(passes):
    if isinstance(passes, str):
        passes = [passes]
    steps = []
    for p in passes:
        if isinstance(p, str):
            name, _, spec = p.partition(":")
        elif isinstance(p, tuple) and len(p) == 2:
            name, spec = p[0], _spec(p[1])
        else:
            raise TypeError(f"a pass is 'name', 'name:spec' or (name, spec), got {p!r}")
        steps.append((name, spec))
    return steps


# ---- compress and finetune ------------------------------------------------------------------------

def compress(model, output, passes=(), *, calibration=None, calibration_samples=500, eval=None, eval_limit=None,
             threads=1, seed=1234, bench=True, bench_batch=64, bench_time=1.0, bench_iterations=20, bench_rounds=2,
             portable=False, portable_dense=False, stop_after=None, input_shapes=None, report=None,
             report_json=None, external_data_threshold=None, finetune=None, train=None, train_limit=None,
             target=None, max_drop=None, metric=None, search_passes=None, sensitivity_cache=None, search_evals=8,
             latency_batch=1, verbose=False):
    """compress-model from Python: runs the passes in order on `model` and writes `output` (only on
    success), through the pipeline compress-model runs (same options, same file). Returns the
    report as compress-model --report-json writes it, as a dict. See docs/python.md for each
    option; each is the compress-model flag of the same name (passes=["int8", "svd:ratio=0.5"] are
    --int8 --svd ratio=0.5; calibration= is --calibration-data, eval= --eval-data, finetune= --finetune
    with train= --train-data; target=/max_drop=/search_passes= the accuracy-aware search)."""
    steps = _passes(passes)
    if target is None:
        given = [k for k, v in (("max_drop", max_drop), ("metric", metric), ("search_passes", search_passes),
                                ("sensitivity_cache", sensitivity_cache)) if v is not None]
        given += [k for k, v, d in (("search_evals", search_evals, 8), ("latency_batch", latency_batch, 1)) if v != d]
        if given:
            raise InvalidArgumentError(f"{given[0]}= is only used with target='size'|'latency'|'macs'")
    elif target not in ("size", "latency", "macs"):
        raise InvalidArgumentError(f"target must be 'size', 'latency' or 'macs', got {target!r}")
    if metric is not None and not isinstance(metric, str):
        raise TypeError(f"metric must be a str such as 'top1' or 'cosine', got {type(metric).__name__}")
    out = _path("output", output, output=True)
    reports = {"report": _path("report", report, output=True), "report_json": _path("report_json", report_json, output=True)}
    for key, path in reports.items():
        if path and os.path.abspath(path) == os.path.abspath(out):
            raise InvalidArgumentError(f"{key} {path} is the same file as output")
    if reports["report"] and reports["report"] == reports["report_json"]:
        raise InvalidArgumentError("report and report_json name the same file")
    options = {
        "calibration_samples": _int("calibration_samples", calibration_samples, 1),
        "eval_limit": None if eval_limit is None else _int("eval_limit", eval_limit, 1),
        "threads": _int("threads", threads, 0),
        "seed": _int("seed", seed, 0),
        "bench": bool(bench),
        "bench_batch": _int("bench_batch", bench_batch, 1),
        "bench_time": _float("bench_time", bench_time, 0.0),
        "bench_iterations": _int("bench_iterations", bench_iterations, 1),
        "bench_rounds": _int("bench_rounds", bench_rounds, 1),
        "portable": bool(portable),
        "portable_dense": bool(portable_dense),
        "stop_after": None if stop_after is None else _int("stop_after", stop_after, 0),
        "input_shapes": None if input_shapes is None else {str(k): [int(d) for d in v] for k, v in input_shapes.items()},
        "report": reports["report"],
        "report_json": reports["report_json"],
        "external_data_threshold": None if external_data_threshold is None
        else _int("external_data_threshold", external_data_threshold, 0),
        "finetune": None if finetune is None or finetune is False else ("" if finetune is True else _spec(finetune)),
        "train_limit": None if train_limit is None else _int("train_limit", train_limit, 1),
        "target": target,
        "max_drop": None if max_drop is None else _float("max_drop", max_drop, 0.0, 100.0),
        "metric": metric,
        "search_passes": None if search_passes is None else
        (search_passes if isinstance(search_passes, str) else ",".join(search_passes)),
        "sensitivity_cache": None if sensitivity_cache is None else os.fspath(sensitivity_cache),
        "search_evals": _int("search_evals", search_evals, 1, 1000),
        "latency_batch": _int("latency_batch", latency_batch, 1),
        "verbose": bool(verbose),
    }
    text = _whittle.compress(os.fspath(model), out, steps, _data("calibration", calibration), _data("eval", eval),
                             _data("train", train), options)
    return json.loads(text)


def finetune(student, output, *, train, teacher=None, eval=None, train_limit=None, eval_limit=None, epochs=1,
             batch=64, lr=0.05, optimizer="sgd", nesterov=False, weight_decay=None, temperature=4.0, alpha=0.5,
             no_labels=False, label_smoothing=0.0, max_rollbacks=3, rollback=True, clip=5.0, seed=0, threads=1,
             device="cpu", precision="fp32", lr_scaling=True, cosine=True, teacher_cache=True, batchnorm="train",
             fixed_scales=False, hints=None, hint_weight=1.0, crop_padding=0, hflip=False, checkpoint_dir=None,
             resume=False, report=None, external_data_threshold=None, verbose=False):
    """finetune-model from Python: distills `student` from `teacher` on `train` and writes `output`
    (the best epoch's weights with eval=), through the code finetune-model runs. Returns what
    finetune-model --json prints, as a dict. Each option is the finetune-model flag of the same
    name (rollback=False is --no-rollback, lr_scaling=False --no-lr-scaling, cosine=False
    --no-cosine, teacher_cache=False --no-teacher-cache, hints=[...] --hint each)."""
    out = _path("output", output, output=True)
    report_path = _path("report", report, output=True)
    if report_path and os.path.abspath(report_path) == os.path.abspath(out):
        raise InvalidArgumentError(f"report {report_path} is the same file as output")
    if not (lr == "auto" or isinstance(lr, (int, float, np.integer, np.floating))) or isinstance(lr, bool):
        raise TypeError(f"lr must be a number > 0 or 'auto', got {lr!r}")
    options = {
        "train_limit": None if train_limit is None else _int("train_limit", train_limit, 1),
        "eval_limit": None if eval_limit is None else _int("eval_limit", eval_limit, 1),
        "epochs": _int("epochs", epochs, 1),
        "batch": _int("batch", batch, 1),
        "lr": lr if lr == "auto" else repr(float(lr)),
        "optimizer": optimizer,
        "nesterov": bool(nesterov),
        "weight_decay": None if weight_decay is None else _float("weight_decay", weight_decay, 0.0),
        "temperature": _float("temperature", temperature, 0.0, low_open=True),
        "alpha": _float("alpha", alpha, 0.0, 1.0),
        "no_labels": bool(no_labels),
        "label_smoothing": _float("label_smoothing", label_smoothing, 0.0, 1.0),
        "max_rollbacks": _int("max_rollbacks", max_rollbacks, 0, 1000),
        "rollback": bool(rollback),
        "clip": _float("clip", clip, 0.0),
        "seed": _int("seed", seed, 0),
        "threads": _int("threads", threads, 0),
        "device": device,
        "precision": precision,
        "lr_scaling": bool(lr_scaling),
        "cosine": bool(cosine),
        "teacher_cache": bool(teacher_cache),
        "batchnorm": batchnorm,
        "fixed_scales": bool(fixed_scales),
        "hints": [] if hints is None else [str(h) for h in hints],
        "hint_weight": _float("hint_weight", hint_weight, 0.0),
        "crop_padding": _int("crop_padding", crop_padding, 0),
        "hflip": bool(hflip),
        "checkpoint_dir": "" if checkpoint_dir is None else os.fspath(checkpoint_dir),
        "resume": bool(resume),
        "report": report_path,
        "command_line": f"whittle.finetune({os.fspath(student)!r}, {out!r}, teacher={teacher!r}, train={train!r:.80})",
        "external_data_threshold": None if external_data_threshold is None
        else _int("external_data_threshold", external_data_threshold, 0),
        "verbose": bool(verbose),
    }
    for key in ("optimizer", "device", "precision", "batchnorm"):
        if not isinstance(options[key], str):
            raise TypeError(f"{key} must be a str, got {type(options[key]).__name__}")
    text = _whittle.finetune(os.fspath(student), out, _path("teacher", teacher), _data("train", train),
                             _data("eval", eval), options)
    return json.loads(text)
