/* rng.c -- see rng.h. */
#include "gmm/rng.h"

#include <math.h>

void gmm_rng_seed(gmm_rng *r, uint64_t seed, uint64_t stream)
{
    r->s = seed + stream * 0xD1B54A32D192ED03ULL;
}

uint64_t gmm_rng_u64(gmm_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

double gmm_rng_uniform(gmm_rng *r) { return (double)(gmm_rng_u64(r) >> 11) * 0x1.0p-53; }

double gmm_rng_normal(gmm_rng *r)
{
    double u1 = ((double)(gmm_rng_u64(r) >> 11) + 0.5) * 0x1.0p-53;
    double u2 = (double)(gmm_rng_u64(r) >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
