#!/usr/bin/env python3
"""Writes the ONNX backend node test cases of the installed onnx package (1.23 in the check venv:
opsets up to 23) as test data in the layout onnx_conformance reads: DIR/node/<case>/model.onnx and
test_data_set_N/{input,output}_M.pb. Debian's libonnx-testdata stops at ONNX 1.12 (opset 17); this
is how the newer opsets' cases are run. The expected outputs are the onnx package's own, computed
by its reference implementation when the cases were written.

    build/check-venv/bin/python tests/conformance/gen_onnx_node_data.py build/onnx-node-data
"""
import os
import shutil
import sys
import warnings

# Bumped when the written layout changes, so that ctest writes the cases again (run_onnx_wheel_cases.sh).
GENERATOR = "seq1"


def value_proto(v, decl):
    """A TensorProto, SequenceProto or OptionalProto of value v, as decl's type says."""
    import onnx
    from onnx import numpy_helper

    if isinstance(v, (onnx.TensorProto, onnx.SequenceProto, onnx.OptionalProto)):
        return v
    if decl.type.HasField("sequence_type"):
        return numpy_helper.from_list(list(v), decl.name)
    if decl.type.HasField("optional_type"):
        elem = decl.type.optional_type.elem_type
        kind = onnx.OptionalProto.SEQUENCE if elem.HasField("sequence_type") else onnx.OptionalProto.TENSOR
        return numpy_helper.from_optional(v, decl.name, kind)
    return numpy_helper.from_array(v, decl.name)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_onnx_node_data.py OUTPUT_DIR")
    out = sys.argv[1]
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node.collect_testcases(None)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    written = 0
    for case in cases:
        graph = case.model.graph
        if any(v.type.HasField("map_type") for v in list(graph.input) + list(graph.output)):
            continue  # maps: Whittle runs tensors, sequences and optionals
        d = os.path.join(tmp, "node", case.name)
        os.makedirs(d)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds = os.path.join(d, "test_data_set_%d" % i)
            os.makedirs(ds)
            for kind, values, decl in (("input", inputs, graph.input), ("output", outputs, graph.output)):
                for j, v in enumerate(values):
                    t = value_proto(v, decl[j])
                    with open(os.path.join(ds, "%s_%d.pb" % (kind, j)), "wb") as f:
                        f.write(t.SerializeToString())
        written += 1
    with open(os.path.join(tmp, "VERSION"), "w") as f:
        f.write(onnx.__version__ + " " + GENERATOR + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    print("wrote %d node cases from onnx %s to %s" % (written, onnx.__version__, out))


if __name__ == "__main__":
    main()
