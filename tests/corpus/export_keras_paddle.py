#!/usr/bin/env python3
"""Exports the corpus files that come from Keras (through tf2onnx) and from PaddlePaddle (through
Paddle2ONNX): small MobileNet-style nets with random weights, written by the real exporters, so
the runtime and the passes are tested on what those exporters write: NHWC inputs with a
Transpose, ZeroPadding2D as an explicit Pad before strided depthwise convs, BatchNormalization
left as Mul and Add after depthwise convs, swish and hard-swish gates as Sigmoid/HardSigmoid + Mul,
squeeze-excitation Muls, Identity nodes after BatchNormalization and Clip (Paddle2ONNX).

Neither framework is a dependency of Whittle or of its tests, which read the committed files:
    python3 -m venv /tmp/kp && /tmp/kp/bin/pip install tensorflow-cpu tf2onnx paddlepaddle paddle2onnx packaging
    /tmp/kp/bin/python tests/corpus/export_keras_paddle.py tests/corpus
(Either half runs alone when only one framework imports.)
"""
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "."


def keras_net():
    import tensorflow as tf
    import tf2onnx
    L = tf.keras.layers
    tf.random.set_seed(0)

    def block(x, expand, out_ch, stride, act):
        c = x.shape[-1]
        h = L.Conv2D(c * expand, 1, use_bias=False)(x)
        h = L.BatchNormalization()(h)
        h = L.Activation(act)(h)
        if stride == 2:
            h = L.ZeroPadding2D(((0, 1), (0, 1)))(h)
        h = L.DepthwiseConv2D(3, strides=stride, padding="valid" if stride == 2 else "same", use_bias=False)(h)
        h = L.BatchNormalization()(h)
        h = L.Activation(act)(h)
        s = L.GlobalAveragePooling2D(keepdims=True)(h)  # squeeze-excitation
        s = L.Conv2D(max(4, c // 2), 1, activation="swish")(s)
        s = L.Conv2D(c * expand, 1, activation="sigmoid")(s)
        h = L.Multiply()([h, s])
        h = L.Conv2D(out_ch, 1, use_bias=False)(h)
        h = L.BatchNormalization()(h)
        return L.Add()([x, h]) if stride == 1 and c == out_ch else h

    inp = tf.keras.Input((32, 32, 3), name="image")
    x = L.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(inp)
    x = L.BatchNormalization()(x)
    x = L.ReLU(6.0)(x)
    x = block(x, 2, 16, 1, tf.nn.relu6)
    x = block(x, 2, 24, 2, "swish")
    x = block(x, 2, 24, 1, "swish")
    x = L.GlobalAveragePooling2D()(x)
    logits = L.Dense(10)(x)
    m = tf.keras.Model(inp, logits)
    # Random BatchNormalization statistics, so the folds are exercised with values that matter.
    rng = tf.random.Generator.from_seed(1)
    for layer in m.layers:
        if isinstance(layer, L.BatchNormalization):
            g, b, mu, var = layer.get_weights()
            layer.set_weights([rng.uniform(g.shape, 0.5, 1.5).numpy(), rng.normal(b.shape, 0, 0.1).numpy(),
                               rng.normal(mu.shape, 0, 0.1).numpy(), rng.uniform(var.shape, 0.5, 1.5).numpy()])
    spec = (tf.TensorSpec((None, 32, 32, 3), tf.float32, name="image"),)
    path = os.path.join(out, "keras_mobilenet_tf2onnx_op17.onnx")
    tf2onnx.convert.from_keras(m, input_signature=spec, opset=17, output_path=path)
    print("wrote", path)


def paddle_net():
    import paddle
    import paddle.nn as nn
    paddle.seed(0)

    class ConvBn(nn.Layer):
        def __init__(self, cin, cout, k, stride, groups, act):
            super().__init__()
            self.conv = nn.Conv2D(cin, cout, k, stride, k // 2, groups=groups, bias_attr=False)
            self.bn = nn.BatchNorm2D(cout)
            self.act = act

        def forward(self, x):
            x = self.bn(self.conv(x))
            return self.act(x) if self.act else x

    class Se(nn.Layer):
        def __init__(self, c):
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2D(1)
            self.fc1, self.fc2 = nn.Conv2D(c, c // 4, 1), nn.Conv2D(c // 4, c, 1)

        def forward(self, x):
            s = nn.functional.hardsigmoid(self.fc2(nn.functional.relu(self.fc1(self.pool(x)))))
            return x * s

    class Net(nn.Layer):
        def __init__(self):
            super().__init__()
            self.stem = ConvBn(3, 16, 3, 2, 1, nn.Hardswish())
            self.b1 = nn.Sequential(ConvBn(16, 32, 1, 1, 1, nn.ReLU6()), ConvBn(32, 32, 3, 2, 32, nn.ReLU6()),
                                    ConvBn(32, 24, 1, 1, 1, None))
            self.b2 = nn.Sequential(ConvBn(24, 48, 1, 1, 1, nn.Hardswish()), ConvBn(48, 48, 5, 1, 48, nn.Hardswish()),
                                    Se(48), ConvBn(48, 24, 1, 1, 1, None))
            self.pool = nn.AdaptiveAvgPool2D(1)
            self.fc = nn.Linear(24, 10)

        def forward(self, x):
            x = self.b1(self.stem(x))
            x = x + self.b2(x)
            return self.fc(paddle.flatten(self.pool(x), 1))

    net = Net()
    for layer in net.sublayers():
        if isinstance(layer, nn.BatchNorm2D):
            c = layer.weight.shape[0]
            layer.weight.set_value(paddle.uniform([c], min=0.5, max=1.5))
            layer.bias.set_value(paddle.normal(0.0, 0.1, [c]))
            layer._mean.set_value(paddle.normal(0.0, 0.1, [c]))
            layer._variance.set_value(paddle.uniform([c], min=0.5, max=1.5))
    net.eval()
    spec = [paddle.static.InputSpec(shape=[None, 3, 32, 32], dtype="float32", name="image")]
    path = os.path.join(out, "paddle_mobilenet_p2o_op13")
    paddle.onnx.export(net, path, input_spec=spec, opset_version=13)
    print("wrote", path + ".onnx")


for name, fn in (("keras", keras_net), ("paddle", paddle_net)):
    try:
        fn()
    except ImportError as e:
        print("skipped the %s half: %s" % (name, e))
