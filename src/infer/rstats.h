/* rstats.h -- private to src/infer/: the pieces of R's arithmetic that the
 * draws' summaries (summary.c, R's posterior) and PSIS-LOO (loo.c, R's loo)
 * both reproduce, so that their results match R to rounding. */
#ifndef GMM_INFER_RSTATS_H
#define GMM_INFER_RSTATS_H

#include <stddef.h>

#include <gsl/gsl_fft_halfcomplex.h>
#include <gsl/gsl_fft_real.h>

#include "gmm/status.h"

/* mean.default: a long double sum, then one correction pass. */
double gmm_r_mean(const double *x, size_t n);
/* var(): denominator n - 1; NAN for n < 2. */
double gmm_r_var(const double *x, size_t n);
/* The smallest k >= n (n >= 1) whose only prime factors are 2, 3 and 5
 * (R's nextn). */
size_t gmm_r_nextn(size_t n);

/* A real FFT of length n with its buffer (n doubles), wavetables and
 * workspace; all NULL until gmm_r_fft_init. */
typedef struct {
    size_t n;
    double *buf;
    gsl_fft_real_wavetable *rwt;
    gsl_fft_halfcomplex_wavetable *hwt;
    gsl_fft_real_workspace *work;
} gmm_r_fft;

/* GMM_OK or GMM_ENOMEM (then gmm_r_fft_free still frees what was made). */
gmm_status gmm_r_fft_init(gmm_r_fft *f, size_t n);
void gmm_r_fft_free(gmm_r_fft *f); /* zeroed struct: a no-op */

/* The unnormalised autocovariance sums of x (N <= f->n / 2 values about
 * their mean `mean`): f->buf[k] = n sum_t (x_t - mean)(x_{t+k} - mean) for
 * k < N, as Re(ifft(|fft(x - mean, zero-padded to n)|^2)) without the 1/n
 * of R's inverse; the caller scales as its R code does.  GMM_EDOM when
 * GSL's transform fails. */
gmm_status gmm_r_acov_sums(gmm_r_fft *f, const double *x, size_t N, double mean);

/* Geyer's initial monotone sequence estimate of the integrated
 * autocorrelation time tau of m >= 1 chains of len >= 2 draws, combined as
 * in Stan (Vehtari et al. 2021, eqs. 10-11), as posterior's .ess and loo's
 * ess_rfun compute it: acov_mean[0..len) the chains' mean autocovariances
 * (each caller averages them as its R code does), chain_mean[0..m) the
 * chains' means; rho (len doubles, the caller's) is scratch.  Returns tau
 * raised to at least 1 / log10(m len), so that the ESS m len / tau is at
 * most m len log10(m len); NAN propagates.  No errors. */
double gmm_r_geyer_tau(const double *acov_mean, const double *chain_mean, size_t m, size_t len,
                       double *rho);

#endif
