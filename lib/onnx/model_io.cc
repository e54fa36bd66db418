// PLACEHOLDER: replaced by the ONNX loader/saver.
