/* LD_PRELOAD shim for benchmarks: the process (and its threads) sees a CPU without AVX-512,
 * AMX or AVX-VNNI, so every library that picks kernels from CPUID (ONNX Runtime's MLAS, oneDNN,
 * Whittle's own dispatch) takes its AVX2 + FMA path. The only way to hold ONNX Runtime to AVX2 on
 * an AVX-512 machine: MLAS has no switch.
 *
 * How: arch_prctl(ARCH_SET_CPUID, 0) makes the CPUID instruction fault (needs the CPU's and the
 * kernel's CPUID faulting: /proc/cpuinfo's flag `cpuid_fault`); the SIGSEGV handler runs the real
 * CPUID with faulting switched off for a moment, clears the feature bits above, writes the
 * registers back and steps over the 2-byte instruction. The setting is per thread, copied to the
 * threads a thread creates, and reset by execve, so each process re-arms it from its constructor.
 * What ran before the constructor (glibc's own ifunc choices of memcpy and friends) keeps what it
 * chose; code built with -march beyond Haswell still runs it (the instructions are there).
 *
 *   cc -O2 -shared -fPIC -o build/avx2_cpuid.so tests/bench/avx2_cpuid.c
 *   LD_PRELOAD=$PWD/build/avx2_cpuid.so python3 tests/bench/compare_ort.py ...
 *
 * Set AVX2_CPUID_QUIET=1 to drop the one line it prints on stderr when armed.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef ARCH_SET_CPUID
#define ARCH_SET_CPUID 0x1012
#endif

static int set_cpuid(int enabled) { return (int)syscall(SYS_arch_prctl, ARCH_SET_CPUID, enabled); }

static void real_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
  __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

static void mask(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
  if (leaf == 7 && sub == 0) {
    /* EBX: avx512f dq ifma pf er cd bw vl */
    r[1] &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) |
              (1u << 30) | (1u << 31));
    /* ECX: avx512vbmi, vbmi2, vaes/vpclmulqdq (their 512-bit forms), vnni, bitalg, vpopcntdq */
    r[2] &= ~((1u << 1) | (1u << 6) | (1u << 9) | (1u << 10) | (1u << 11) | (1u << 12) | (1u << 14));
    /* EDX: 4vnniw, 4fmaps, vp2intersect, amx_bf16, avx512_fp16, amx_tile, amx_int8 */
    r[3] &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25));
  } else if (leaf == 7 && sub == 1) {
    /* EAX: avx_vnni, avx512_bf16, amx_fp16, avx_ifma */
    r[0] &= ~((1u << 4) | (1u << 5) | (1u << 21) | (1u << 23));
    /* EDX: avx_vnni_int8, avx_ne_convert, amx_complex, avx_vnni_int16, avx10 */
    r[3] &= ~((1u << 4) | (1u << 5) | (1u << 8) | (1u << 10) | (1u << 19));
  } else if (leaf == 0x1d || leaf == 0x1e || leaf == 0x24) {
    r[0] = r[1] = r[2] = r[3] = 0; /* AMX tile / TMUL / AVX10 leaves */
  }
}

static void on_segv(int sig, siginfo_t* info, void* ctx_v) {
  ucontext_t* ctx = (ucontext_t*)ctx_v;
  greg_t* g = ctx->uc_mcontext.gregs;
  const unsigned char* ip = (const unsigned char*)g[REG_RIP];
  if (ip[0] != 0x0f || ip[1] != 0xa2) {
    /* A real fault: let the default action happen. */
    signal(sig, SIG_DFL);
    (void)info;
    return;
  }
  uint32_t leaf = (uint32_t)g[REG_RAX], sub = (uint32_t)g[REG_RCX], r[4];
  set_cpuid(1);
  real_cpuid(leaf, sub, r);
  set_cpuid(0);
  mask(leaf, sub, r);
  g[REG_RAX] = r[0];
  g[REG_RBX] = r[1];
  g[REG_RCX] = r[2];
  g[REG_RDX] = r[3];
  g[REG_RIP] += 2;
}

__attribute__((constructor)) static void arm(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, NULL) != 0 || set_cpuid(0) != 0) {
    fprintf(stderr, "avx2_cpuid: CPUID faulting is not available here (no cpuid_fault?): "
                    "refusing to run with the real CPUID\n");
    _exit(97);
  }
  const char* quiet = getenv("AVX2_CPUID_QUIET");
  if (!quiet || !*quiet || *quiet == '0')
    fprintf(stderr, "avx2_cpuid: CPUID now reports no AVX-512, AMX or AVX-VNNI\n");
}
