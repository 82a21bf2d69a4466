/* band_simd.h -- internal to src/band/: running the hand loops that dominate
 * small-bandwidth work in an AVX2 build when the CPU has AVX2.
 *
 * The default build targets the x86-64 baseline (SSE2: two doubles per
 * vector), so the binary runs on any x86-64 machine.  A kernel written as a
 * BAND_INLINE body is compiled twice -- once plainly, once inside a
 * BAND_TARGET_AVX2 wrapper (four doubles per vector) -- and a dispatcher calls
 * the AVX2 copy when band_cpu_has_avx2().  Both copies perform the same IEEE
 * operations in the same order (AVX2 without FMA, and ISO C mode contracts
 * nothing), so their results are bit-identical and one set of tests covers
 * both.  The factorisation loop gains from the wider vectors at moderate
 * bandwidths (l in the tens), not below l = 11.  Other architectures get the plain copy only (BAND_AVX2 is
 * 0), as does a build with -DGMM_NO_AVX2 (to test the baseline copy on an
 * AVX2 machine: make clean && make check OPT="-O3 -DGMM_NO_AVX2").  The
 * kernels also use GNU C vector types (GCC, Clang) for two-lane sums. */
#ifndef GMM_BAND_SIMD_H
#define GMM_BAND_SIMD_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(GMM_NO_AVX2)
#define BAND_AVX2 1
#define BAND_TARGET_AVX2 __attribute__((target("avx2")))
#define BAND_INLINE static inline __attribute__((always_inline))
static inline int band_cpu_has_avx2(void) { return __builtin_cpu_supports("avx2"); }
#else
#define BAND_AVX2 0
#define BAND_INLINE static inline
#endif

#endif
