// The seam that lets the CUDA backend's device code be checked on a machine without a GPU: the
// arithmetic and indexing of a kernel live in plain functions marked WH_HD in kernels/cuda/*_body.h
// headers, which nvcc compiles into the __global__ kernels (kernels/cuda/*.cu: thin drivers that
// map blockIdx/threadIdx onto them and put __syncthreads between their phases) and g++ compiles
// into tests that run every block and thread of the same grid on the CPU (tests/kernels/
// cuda_body_test.cc) against the reference kernels. No CUDA header here; the intrinsics a body
// needs (dp4a, popcount) have a host definition with the device's semantics.
#pragma once

#include <cstdint>

#include "kernels/common/hd.h"

namespace whittle::cuda {

// c + the sum of the four signed byte products of a and b (the device's __dp4a), wrapping like
// the device's 32-bit adds.
WH_HD int32_t Dp4a(int32_t a, int32_t b, int32_t c) {
#ifdef __CUDA_ARCH__
  return __dp4a(a, b, c);
#else
  uint32_t s = static_cast<uint32_t>(c);
  for (int i = 0; i < 4; ++i) {
    const int32_t x = static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i));
    const int32_t y = static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i));
    s += static_cast<uint32_t>(x * y);
  }
  return static_cast<int32_t>(s);
#endif
}

// Thread tid's cells of a 64 x 64 tile at (m0, n0) — rows m0 + ty + 16 i, columns n0 + tx + 16 j
// for i, j < 4 (tid = 16 ty + tx), the register layout of the tiled products — that lie inside
// M x N: f(i, j, m, n) for each.
template <class F>
WH_HD void ForTileCells(int tid, int64_t m0, int64_t n0, int64_t M, int64_t N, F&& f) {
  const int tx = tid % 16, ty = tid / 16;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
      if (m < M && n < N) f(i, j, m, n);
    }
}

WH_HD int Popc64(uint64_t x) {
#ifdef __CUDA_ARCH__
  return __popcll(x);
#else
  return __builtin_popcountll(x);
#endif
}

// Wrapping int32 arithmetic (the device wraps; on the host signed overflow would be undefined).
WH_HD int32_t WrapAdd32(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
WH_HD int32_t WrapMul32(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}

// Round half to even (the default rounding mode on the host, rintf on the device).
WH_HD float RoundHalfEven(float v) {
#ifdef __CUDA_ARCH__
  return rintf(v);
#else
  return __builtin_rintf(v);
#endif
}

// A device check report (kernels/kernel.h's kDeviceCheckWords): the first caller of a run puts
// its tag in report[0] and its details in report[1..4]; later ones leave it (and report[0] is
// never 0 again until the runtime has read it, so the details are never torn).
WH_HD void ReportCheck(int64_t* report, int64_t tag, int64_t a, int64_t b, int64_t c, int64_t d) {
#ifdef __CUDA_ARCH__
  using U = unsigned long long;
  if (atomicCAS(reinterpret_cast<U*>(report), U(0), static_cast<U>(tag)) != U(0)) return;
#else
  if (report[0] != 0) return;
  report[0] = tag;
#endif
  report[1] = a;
  report[2] = b;
  report[3] = c;
  report[4] = d;
}

}  // namespace whittle::cuda
