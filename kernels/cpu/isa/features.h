// The one CPU-feature probe of the CPU kernels: what this CPU and OS run, read once, with the
// WHITTLE_ISA=scalar|avx2|avx512 cap applied once (how to measure the AVX2 or scalar paths on an
// AVX-512 machine). Every run-time choice of a per-ISA kernel asks CpuFeatures(); nothing else in
// kernels/ reads CPUID or WHITTLE_ISA. Per-ISA code lives in *_avx2.cc / *_avx512*.cc files
// compiled with exactly their ISA's flags (CMakeLists.txt), never behind compile-time ISA macros in
// shared code.
#pragma once

namespace whittle::cpu {

struct IsaFeatures {
  // x86 extensions the kernels use. After the cap: WHITTLE_ISA=avx2 clears every AVX-512 flag,
  // =scalar also avx2, fma and avx_vnni (popcnt stays: it is no vector ISA).
  bool popcnt = false, avx2 = false, fma = false, avx_vnni = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false, avx512vbmi = false,
       avx512vpopcntdq = false;

  // The AVX2 level the vector kernels need (AVX2 + FMA), and the AVX-512 level (F, BW, VL).
  bool Avx2() const { return avx2 && fma; }
  bool Avx512() const { return Avx2() && avx512f && avx512bw && avx512vl; }
  // 256-bit vpdpbusd/vpdpwssd, by AVX512-VNNI (with VL) or AVX-VNNI.
  bool DotBytes256() const { return (Avx512() && avx512vnni) || (Avx2() && avx_vnni); }
};

// The features in use: the CPU's, capped by WHITTLE_ISA (read once). The cap also holds oneDNN
// to AVX2 (scalar: SSE4.1) unless ONEDNN_MAX_CPU_ISA is set, so every oneDNN entry point calls
// this before its first oneDNN call (kernels/cpu/conv_onednn.cc, sgemm.cc, qgemm_backend.cc).
const IsaFeatures& CpuFeatures();
// The CPU's own features, whatever WHITTLE_ISA says (tests that run every ISA the CPU has).
const IsaFeatures& CpuFeaturesUncapped();

}  // namespace whittle::cpu
