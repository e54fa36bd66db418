"""Whether ONNX Runtime's uint8 x int8 integer GEMM saturates on this CPU.

On x86-64 CPUs without VNNI (AVX2-only, and AVX-512 without VNNI), ORT's MLAS computes uint8 x int8
products with vpmaddubsw, which adds each pair of products into an int16 with saturation: a pair
of 255 * 127 gives 32767 instead of 64770. ORT's documentation names it ("U8S8 format may have
saturation issue" on such CPUs; quantization.html, "When and why do I need to try U8U8?"). There,
ORT's output for a uint8-activation, int8-weight op is not the op's definition, so a check that
compares Whittle with ORT has to use another reference (the exact NumPy one, or the outputs ORT
gave on a VNNI CPU, stored in the corpus) and may show ORT's result only for information.
"""
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

_cached = []


def ort_u8s8_saturates():
    """True when ORT's MatMulInteger of uint8 [255, 255] by int8 [127, 127] is not 64770 here."""
    if not _cached:
        graph = helper.make_graph(
            [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "probe",
            [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 2])],
            [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 1])],
            [helper.make_tensor("b", TensorProto.INT8, [2, 1], [127, 127])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.intra_op_num_threads = 1
        s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        (y,) = s.run(None, {"a": np.array([[255, 255]], np.uint8)})
        _cached.append(int(y[0, 0]) != 255 * 127 * 2)
    return _cached[0]


if __name__ == "__main__":
    print("ORT's u8s8 GEMM saturates on this CPU:", ort_u8s8_saturates())
