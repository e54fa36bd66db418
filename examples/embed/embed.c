/* Runs a bundled image classifier (models/cnn.onnx or models/mlp.onnx: input [1,1,28,28]
 * float32, output [1,10] logits) through Whittle's C API on one deterministic image and prints
 * the top-1 class. Usage: embed_c MODEL.onnx */
#include <stdio.h>

#include "whittle/whittle_c.h"

int main(int argc, char** argv) {
  float image[28 * 28];
  const int64_t dims[4] = {1, 1, 28, 28};
  whittle_session* s = NULL;
  whittle_tensor* in = NULL;
  whittle_tensor* out[1] = {NULL};
  const char* name;
  const float* logits;
  size_t i, n, best = 0;
  int rc = 1;

  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.onnx\n", argv[0]);
    return 2;
  }
  if (whittle_session_load(argv[1], 1, &s) != 0) {
    fprintf(stderr, "load: %s\n", whittle_last_error());
    return 1;
  }
  if (whittle_session_num_inputs(s) != 1 || whittle_session_num_outputs(s) != 1) {
    fprintf(stderr, "expected one input and one output\n");
    goto done;
  }
  /* The same image as embed.cc: pixel i = ((i * 37) % 256) / 256 (exact in float32). */
  for (i = 0; i < 28 * 28; ++i) image[i] = (float)((i * 37) % 256) / 256.0f;
  if (whittle_tensor_create(1 /* float32 */, dims, 4, image, &in) != 0) {
    fprintf(stderr, "tensor: %s\n", whittle_last_error());
    goto done;
  }
  name = whittle_session_input_name(s, 0);
  if (whittle_session_run(s, &name, (const whittle_tensor* const*)&in, 1, out) != 0) {
    fprintf(stderr, "run: %s\n", whittle_last_error());
    goto done;
  }
  if (whittle_tensor_dtype(out[0]) != 1) {
    fprintf(stderr, "expected float32 logits\n");
    goto done;
  }
  n = 1;
  for (i = 0; i < whittle_tensor_rank(out[0]); ++i) n *= (size_t)whittle_tensor_dims(out[0])[i];
  logits = (const float*)whittle_tensor_data(out[0]);
  for (i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  printf("top1 %zu\n", best);
  rc = 0;
done:
  whittle_tensor_free(out[0]);
  whittle_tensor_free(in);
  whittle_session_free(s);
  return rc;
}
