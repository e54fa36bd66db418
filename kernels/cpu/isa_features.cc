// The CPU-feature probe (kernels/cpu/isa/features.h): GCC's CPUID reading (__builtin_cpu_supports
// also checks that the OS saves the wider registers), then the WHITTLE_ISA cap, which also caps
// oneDNN's JIT kernels unless ONEDNN_MAX_CPU_ISA says otherwise.
#include <oneapi/dnnl/dnnl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/isa/features.h"

#if defined(__clang__) && __clang_major__ < 16 && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#define WHITTLE_CPUID_AVXVNNI 1  // clang < 16 has no "avxvnni" for __builtin_cpu_supports
#endif

namespace whittle::cpu {
namespace {

IsaFeatures Detect() {
  IsaFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.popcnt = __builtin_cpu_supports("popcnt");
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
#ifdef WHITTLE_CPUID_AVXVNNI
  // CPUID.(EAX=7,ECX=1):EAX bit 4; the YMM state it needs is the one the AVX2 check saw.
  unsigned a = 0, b = 0, c = 0, d = 0;
  f.avx_vnni = f.avx2 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
#else
  f.avx_vnni = __builtin_cpu_supports("avxvnni");
#endif
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512vbmi = __builtin_cpu_supports("avx512vbmi");
  f.avx512vpopcntdq = __builtin_cpu_supports("avx512vpopcntdq");
#endif
  return f;
}

IsaFeatures Capped(IsaFeatures f) {
  const char* env = std::getenv("WHITTLE_ISA");
  if (!env || std::strcmp(env, "avx512") == 0) return f;
  const bool scalar = std::strcmp(env, "scalar") == 0;
  if (!scalar && std::strcmp(env, "avx2") != 0) {
    std::fprintf(stderr, "whittle: ignoring WHITTLE_ISA=%s (expected scalar, avx2 or avx512)\n", env);
    return f;
  }
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512vnni = f.avx512vbmi = f.avx512vpopcntdq = false;
  if (scalar) f.avx2 = f.fma = f.avx_vnni = false;
  // oneDNN has no scalar kernels: SSE4.1 is its floor. Its own variable wins where set.
  if (!std::getenv("ONEDNN_MAX_CPU_ISA") &&
      dnnl_set_max_cpu_isa(scalar ? dnnl_cpu_isa_sse41 : dnnl_cpu_isa_avx2) != dnnl_success)
    std::fprintf(stderr, "whittle: WHITTLE_ISA=%s could not cap oneDNN (it already ran)\n", env);
  return f;
}

}  // namespace

const IsaFeatures& CpuFeaturesUncapped() {
  static const IsaFeatures f = Detect();
  return f;
}

const IsaFeatures& CpuFeatures() {
  static const IsaFeatures f = Capped(CpuFeaturesUncapped());
  return f;
}

}  // namespace whittle::cpu
