/* infer_impl.h -- what the optimisers of src/infer/ share.  Private. */
#ifndef GMM_INFER_IMPL_H
#define GMM_INFER_IMPL_H

#include <stddef.h>

/* A static description of how a liblbfgs run ended (its return code). */
const char *infer_lbfgs_message(int ret);

/* The value and gradient (g, n) returned for a line-search trial x at step
 * outside the domain: the mirror of the linear model from the anchor u0
 * (value f0, gradient g0) -- above f0, so the trial is rejected, with slope
 * -g0.s > 0, so the cubic backtracks (fit.h). */
double infer_mirror_trial(const double *x, const double *u0, const double *g0, double f0,
                          double step, size_t n, double *g);

#endif
