/* Whittle's C API: load a model and run it from C or any language with a C FFI.
 * Every call returns 0 on success or a non-zero code; whittle_last_error() gives the one-line
 * message of the calling thread's last failure. Sessions are thread-safe to run concurrently.
 * Tensors passed in are borrowed; tensors returned are owned by the caller (whittle_tensor_free). */
#ifndef WHITTLE_C_H_
#define WHITTLE_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct whittle_session whittle_session;
typedef struct whittle_tensor whittle_tensor;

/* dtype codes equal ONNX TensorProto.DataType (1 = float32, 7 = int64, ...). */
int whittle_session_load(const char* model_path, int num_threads, whittle_session** out);
/* The same on a device: "cpu", or "cuda" (a CUDA build on a machine with a GPU; nodes without a
 * CUDA kernel run on the CPU). Inputs and outputs stay host memory either way. */
int whittle_session_load_on(const char* model_path, int num_threads, const char* device, whittle_session** out);
/* The same with the arithmetic precision of the GEMMs on "cuda": "fp32" (exact float32, the
 * default), "tf32", "fp16" or "bf16" (tensor cores inside cuBLAS; tensors and accumulation stay
 * float32, like run-model --precision). The CPU takes "fp32" only. */
int whittle_session_load_with(const char* model_path, int num_threads, const char* device, const char* precision,
                              whittle_session** out);
/* The same with flags: WHITTLE_CUDA_GRAPHS (on "cuda" only) replays each input shape's run as
 * one CUDA graph once three runs have shown it stays on the GPU, and drops the graph where it is no
 * faster (SessionOptions::cuda_graphs, run-model --cuda-graphs). */
#define WHITTLE_CUDA_GRAPHS 1u
int whittle_session_load_ex(const char* model_path, int num_threads, const char* device, const char* precision,
                            unsigned flags, whittle_session** out);
void whittle_session_free(whittle_session* s);
/* Budgets for the sessions this process loads after the call, for models it did not make
 * (SessionOptions::max_memory_bytes and max_run_ms; 0: none, the default): a model whose tensors
 * would need more memory is refused at load or run, and a run that takes longer than max_run_ms
 * stops and fails, whittle_last_error naming the node it reached; the session stays usable.
 * Negative values are an error. */
int whittle_set_limits(int64_t max_memory_bytes, int64_t max_run_ms);
size_t whittle_session_num_inputs(const whittle_session* s);
size_t whittle_session_num_outputs(const whittle_session* s);
const char* whittle_session_input_name(const whittle_session* s, size_t i);
const char* whittle_session_output_name(const whittle_session* s, size_t i);

/* Copies data (dims[0..rank) elements of dtype) into a new tensor. */
int whittle_tensor_create(int32_t dtype, const int64_t* dims, size_t rank, const void* data, whittle_tensor** out);
/* A zero-filled tensor for an input the caller fills (whittle_tensor_mutable_data) and feeds run
 * after run: on "cuda" page-locked host memory, which a run uploads with no staging copy
 * (Session::NewHostTensor); plain memory on "cpu". Slow to allocate: make it once, refill it.
 * It serves as an output of whittle_session_run_into the same way. */
int whittle_session_new_input(const whittle_session* s, int32_t dtype, const int64_t* dims, size_t rank,
                              whittle_tensor** out);
void whittle_tensor_free(whittle_tensor* t);
int32_t whittle_tensor_dtype(const whittle_tensor* t);
size_t whittle_tensor_rank(const whittle_tensor* t);
const int64_t* whittle_tensor_dims(const whittle_tensor* t);
const void* whittle_tensor_data(const whittle_tensor* t);
/* The same bytes, writable (not while a run reads the tensor). */
void* whittle_tensor_mutable_data(whittle_tensor* t);

/* Runs with n_inputs named inputs; outputs[i] receives output i (num_outputs of them). */
int whittle_session_run(const whittle_session* s, const char* const* input_names, const whittle_tensor* const* inputs,
                        size_t n_inputs, whittle_tensor** outputs);

/* As whittle_session_run, with output i written into outputs[i] (num_outputs of them), a tensor
 * of output i's dtype and dims that the caller made and keeps for run after run. Made with
 * whittle_session_new_input on "cuda", it is page-locked memory the GPU writes directly, every
 * output behind one wait (Session::RunInto). A dtype or dims mismatch is an error naming the output. */
int whittle_session_run_into(const whittle_session* s, const char* const* input_names, const whittle_tensor* const* inputs,
                             size_t n_inputs, whittle_tensor* const* outputs);

/* The memory Whittle holds on device ("cuda") in this process, in bytes: now, and at its highest
 * since the process started or whittle_device_memory_reset_peak (weights, activations, CUDA
 * graphs; not the CUDA context or cuBLAS's own). Either pointer may be null. */
int whittle_device_memory(const char* device, int64_t* live_bytes, int64_t* peak_bytes);
int whittle_device_memory_reset_peak(const char* device);

const char* whittle_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* WHITTLE_C_H_ */
