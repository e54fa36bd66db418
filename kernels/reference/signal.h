// Reference kernel of ONNX DFT (lib/ops/signal.cc, rules in lib/ir/dft_shape.h): a direct
// O(N^2) sum per signal in double, twiddles from an exact (k*n mod N) table — no FFT. The truth a
// fast kernel would be tested against; fine for the sizes models and the conformance cases use.
#pragma once

#include "kernels/common/signal_fns.h"
#include "kernels/kernel.h"
#include "lib/ir/dft_shape.h"

namespace whittle {

// x float32/float64 [..., C]; y preallocated with x's dtype and dims d: d[s.axis] = s.out_len,
// last = s.out_comp (checked). The signal is zero-padded or truncated to s.length; an inverse
// one-sided transform extends its half spectrum Hermitian-symmetrically (numpy's irfft).
Status DftReference(const Tensor& x, const DftShape& s, bool inverse, bool onesided, Tensor* y);

namespace reference {
extern const SignalFns kSignalFns;
}  // namespace reference

}  // namespace whittle
