/* rng.h -- the library's one pseudo-random generator: splitmix64 (Steele,
 * Lea & Flood 2014; passes BigCrush, period 2^64), reproducible from a seed
 * and a stream number, for fit's restarts and the samplers.  Streams are
 * the seed advanced by stream * an odd constant: distinct sequences that
 * start 2^64 / (golden ratio) apart, so parallel chains or jobs with one
 * seed and different stream numbers never share draws in practice.  A
 * generator is a plain value: copy it to fork, one per thread. */
#ifndef GMM_RNG_H
#define GMM_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s;
} gmm_rng;

/* Stream `stream` of seed `seed` (stream 0: the seed itself). */
void gmm_rng_seed(gmm_rng *r, uint64_t seed, uint64_t stream);
uint64_t gmm_rng_u64(gmm_rng *r);
/* Uniform on [0, 1) with 53 random bits. */
double gmm_rng_uniform(gmm_rng *r);
/* Standard normal (Box-Muller, one draw per two uniforms; no state kept
 * between calls, so a copied generator repeats exactly). */
double gmm_rng_normal(gmm_rng *r);

#endif
