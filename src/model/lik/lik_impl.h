/* lik_impl.h -- private to src/model: the likelihood families of the table
 * in likelihood.c (one file each, lik_<name>.c) and the numerics they share.
 */
#ifndef GMM_LIK_IMPL_H
#define GMM_LIK_IMPL_H

#include <math.h>

#include "gmm/likelihood.h"

extern const gmm_lik_type gmm_lik_impl_gaussian;
extern const gmm_lik_type gmm_lik_impl_poisson;
extern const gmm_lik_type gmm_lik_impl_bernoulli;
extern const gmm_lik_type gmm_lik_impl_negbinomial;

/* log Gamma(x) for x > 0 through lgamma_r: lgamma writes the global signgam,
 * a data race when two threads evaluate likelihoods. */
double gmm_lik_impl_lgamma(double x);

/* check_y of the count families: NULL for a non-negative integer. */
const char *gmm_lik_impl_check_count(double y);

/* log(1 + exp(x)), without overflow for large x or loss for negative x. */
static inline double lik_softplus(double x) { return fmax(x, 0.0) + log1p(exp(-fabs(x))); }

#endif
