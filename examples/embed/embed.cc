// Runs a bundled image classifier (models/cnn.onnx or models/mlp.onnx: input [1,1,28,28] float32,
// output [1,10] logits) through Whittle's C++ API on one deterministic image and prints the
// top-1 class. Usage: embed_cpp MODEL.onnx
#include <cstdio>
#include <map>
#include <string>

#include "whittle/session.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.onnx\n", argv[0]);
    return 2;
  }
  auto session = whittle::Session::Load(argv[1]);
  if (!session.ok()) {
    std::fprintf(stderr, "load: %s\n", session.status().ToString().c_str());
    return 1;
  }
  const whittle::Session& s = **session;
  // The same image as embed.c: pixel i = ((i * 37) % 256) / 256 (exact in float32).
  whittle::Tensor image(whittle::DType::kFloat32, {1, 1, 28, 28});
  float* px = image.data<float>();
  for (int64_t i = 0; i < image.numel(); ++i) px[i] = static_cast<float>((i * 37) % 256) / 256.0f;
  auto out = s.Run({{s.inputs()[0].name, image}});
  if (!out.ok()) {
    std::fprintf(stderr, "run: %s\n", out.status().ToString().c_str());
    return 1;
  }
  const whittle::Tensor& logits = (*out)[0];
  const float* l = logits.data<float>();
  int64_t best = 0;
  for (int64_t i = 1; i < logits.numel(); ++i)
    if (l[i] > l[best]) best = i;
  std::printf("top1 %lld\n", static_cast<long long>(best));
  return 0;
}
