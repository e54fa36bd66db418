// The CUDA recurrent family's launcher (device code: kernels/cuda/recurrent.cu; RecurrentStep and
// the cell body: kernels/cuda/recurrent_body.h; the step loop: recurrent_driver.h). A stream as
// void*, no CUDA types (kernels/cuda/elementwise.h says how every launcher behaves).
#pragma once

namespace whittle::cuda {

// One step of an LSTM or GRU direction over the batch (kernels/cuda/recurrent_body.h).
struct RecurrentStep;
void LaunchRecurrentCell(const RecurrentStep& s, void* stream);

}  // namespace whittle::cuda
