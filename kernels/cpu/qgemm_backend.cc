// Which int8 GEMM runs: our kernels or oneDNN's dnnl_gemm_u8s8s32, chosen per product. The
// split is measured by tests/bench/qgemm_bench.cc. Without VNNI (Zen 3 and this project's AVX2
// machines) oneDNN was at most ~1.2x faster on the MLP shapes, slower on the conv shapes, and its
// accumulators differ from the exact int32 sums on full-range data (vpmaddubsw saturates int16
// pair sums): ours is used. Where oneDNN runs with AVX512-VNNI it is exact and 2-3x faster than
// ours for K >= 32 and >= 4096 outputs: it is used there.
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.h>
#include <string>

#include "kernels/cpu/isa/features.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/qgemm.h"

namespace whittle {
namespace {

// The common value of a zero-point vector (null: 0); false when the entries differ.
bool ScalarZp(const std::vector<int32_t>* zp, int32_t* v) {
  *v = zp && !zp->empty() ? (*zp)[0] : 0;
  if (!zp) return true;
  for (int32_t z : *zp)
    if (z != *v) return false;
  return true;
}

std::atomic<int> g_backend_override{-1};

}  // namespace

bool QGemmAccOneDnn(const QMatrix& a, const QMatrix& b, int64_t M, int64_t N, int64_t K, int32_t* acc, int threads,
                    bool a_trans, bool b_trans) {
  if (b.dtype != DType::kInt8 || (a.dtype != DType::kUInt8 && a.dtype != DType::kInt8)) return false;
  int32_t azp = 0, bzp = 0;
  if (!ScalarZp(a.zero_point, &azp) || !ScalarZp(b.zero_point, &bzp)) return false;
  if (bzp < -128 || bzp > 127 || azp < (a.dtype == DType::kUInt8 ? 0 : -128) || azp > (a.dtype == DType::kUInt8 ? 255 : 127))
    return false;
  const int32_t co = 0;
  (void)cpu::CpuFeatures();  // WHITTLE_ISA's cap on oneDNN first
  ScopedOmpThreads team(threads);
  const char ta = a_trans ? 'T' : 'N', tb = b_trans ? 'T' : 'N';
  dnnl_status_t st;
  if (a.dtype == DType::kUInt8) {
    st = dnnl_gemm_u8s8s32(ta, tb, 'F', M, N, K, 1.f, static_cast<const uint8_t*>(a.data), a.ld,
                           static_cast<uint8_t>(azp), static_cast<const int8_t*>(b.data), b.ld,
                           static_cast<int8_t>(bzp), 0.f, acc, N, &co);
  } else {
    st = dnnl_gemm_s8s8s32(ta, tb, 'F', M, N, K, 1.f, static_cast<const int8_t*>(a.data), a.ld,
                           static_cast<int8_t>(azp), static_cast<const int8_t*>(b.data), b.ld,
                           static_cast<int8_t>(bzp), 0.f, acc, N, &co);
  }
  return st == dnnl_success;
}

bool CpuHasVnni() {
  // oneDNN's effective ISA, not just CPUID: it honours ONEDNN_MAX_CPU_ISA, and a oneDNN limited to
  // AVX2 on a VNNI CPU would add pairs in int16 again.
  static const bool has = [] {
    (void)cpu::CpuFeatures();  // WHITTLE_ISA's cap on oneDNN first
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni;
  }();
  return has;
}

QGemmBackend DefaultQGemmBackend() {
  const int forced = g_backend_override.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<QGemmBackend>(forced);
  static const QGemmBackend backend = [] {
    const char* env = std::getenv("WHITTLE_QGEMM");
    const std::string v = env ? env : "";
    if (v == "own") return QGemmBackend::kOwn;
    if (v == "onednn") return QGemmBackend::kOneDnn;
    if (v == "own16") return QGemmBackend::kOwn16;
    return QGemmBackend::kAuto;
  }();
  return backend;
}

void SetQGemmBackend(QGemmBackend backend) {
  g_backend_override.store(static_cast<int>(backend), std::memory_order_relaxed);
}

bool PreferOneDnnQGemm(const QMatrix& a, const QMatrix& b, int64_t M, int64_t N, int64_t K) {
  switch (DefaultQGemmBackend()) {
    case QGemmBackend::kOwn:
    case QGemmBackend::kOwn16:
      return false;
    case QGemmBackend::kOneDnn:
      return true;
    case QGemmBackend::kAuto:
      break;
  }
  int32_t zp = 0;
  return CpuHasVnni() && a.dtype == DType::kUInt8 && b.dtype == DType::kInt8 && K >= kOneDnnMinK &&
         M * N >= kOneDnnMinOutputs &&
         ScalarZp(a.zero_point, &zp) && ScalarZp(b.zero_point, &zp);
}

bool AllowQ8Kernel() { return DefaultQGemmBackend() != QGemmBackend::kOwn16; }

}  // namespace whittle
