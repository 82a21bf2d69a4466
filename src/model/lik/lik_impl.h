/* lik_impl.h -- private to src/model/lik: the numerics the likelihood
 * families share (lik_impl.c; the Gauss-Hermite rule in likelihood.c).
 * Each family is one file, lik_<name>.c, defining its type
 * gmm_lik_impl_<name>; the table in likelihood.c is the one list of them.
 * Calls go one way: likelihood.c -> lik_<name>.c -> lik_impl.c.
 */
#ifndef GMM_LIK_IMPL_H
#define GMM_LIK_IMPL_H

#include <math.h>

#include "gmm/likelihood.h"

/* log Gamma(x) for x > 0 through lgamma_r: lgamma writes the global signgam,
 * a data race when two threads evaluate likelihoods. */
double gmm_lik_impl_lgamma(double x);

/* check_y of the count families: NULL for a non-negative integer. */
const char *gmm_lik_impl_check_count(double y, double e, char *buf, size_t size);

/* The log-link families' (poisson, negbinomial) check_e of an exposure
 * (positive, finite), link log(m), mean_normal exp(mu + s2 / 2), working
 * response log((y + 1/2) / e) and intercept log((sum y + 1/2) / sum e). */
const char *gmm_lik_impl_check_exposure(double e);
double gmm_lik_impl_link_log(const double *par, double m);
double gmm_lik_impl_mean_normal_log(const double *par, double mu, double s2);
double gmm_lik_impl_working_log(double y, double e);
gmm_status gmm_lik_impl_intercept_log(const double *y, const double *e, size_t n, double *b);
const char *gmm_lik_impl_degenerate_log(const double *y, const double *e, size_t n,
                                        const char *yname, char *buf, size_t size);

/* The identity-link families' (gaussian, studentt) mean f, link m,
 * mean_normal mu and working response y. */
double gmm_lik_impl_mean_identity(const double *par, double e, double f);
double gmm_lik_impl_link_identity(const double *par, double m);
double gmm_lik_impl_mean_normal_identity(const double *par, double mu, double s2);
double gmm_lik_impl_working_identity(double y, double e);

/* degenerate of the real-valued families: every observed y equal, so the
 * noise parameter `param` ("variance", "scale") would go to 0. */
const char *gmm_lik_impl_degenerate_level(const double *y, size_t n, const char *yname,
                                          const char *param, char *buf, size_t size);

/* log E_{f ~ N(mu, s2)} p(y | f) of type t by adaptive quadrature (GSL's
 * QAGP) over mu -/+ 40 sd, broken at mu and at `peak` (where p(y | f) peaks
 * in f): for a predictive of a family whose p(y | f) N(f; mu, s2) may have
 * two modes or a cliff that Gauss-Hermite would miss.  GMM_EDOM, GMM_ENOMEM. */
gmm_status gmm_lik_impl_predictive_quad(const gmm_lik_type *t, const double *par, double y,
                                        double e, double mu, double s2, double peak,
                                        double *lpd);

/* The n-point Gauss-Hermite rule for N(0, 1) (1 <= n <= GMM_LIK_QUAD_MAX):
 * *t its nodes (ascending, symmetric), *w its weights (sum 1), static and
 * built on first use (thread-safe): E g(z) ~ sum_i w_i g(t_i), exact for
 * polynomials of degree < 2 n.  GMM_ENOCONV (QL not converging: never seen
 * for n <= GMM_LIK_QUAD_MAX). */
gmm_status gmm_lik_impl_gh_rule(size_t n, const double **t, const double **w);

/* log(1 + exp(x)), without overflow for large x or loss for negative x. */
static inline double lik_softplus(double x) { return fmax(x, 0.0) + log1p(exp(-fabs(x))); }

#endif
