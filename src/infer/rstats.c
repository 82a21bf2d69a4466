/* rstats.c -- R's mean, var, nextn and the FFT autocovariance shared by the
 * draws' summaries and PSIS-LOO (rstats.h). */
#include "rstats.h"

#include <math.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "gmm/alloc.h"

double gmm_r_mean(const double *x, size_t n)
{
    long double s = 0.0L;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    s /= (long double)n;
    if (isfinite((double)s)) {
        long double t = 0.0L;
        for (size_t i = 0; i < n; i++)
            t += x[i] - s;
        s += t / (long double)n;
    }
    return (double)s;
}

double gmm_r_var(const double *x, size_t n)
{
    if (n < 2)
        return NAN;
    double m = gmm_r_mean(x, n);
    long double s = 0.0L;
    for (size_t i = 0; i < n; i++) {
        long double d = x[i] - (long double)m;
        s += d * d;
    }
    return (double)(s / (long double)(n - 1));
}

size_t gmm_r_nextn(size_t n)
{
    for (size_t k = n;; k++) {
        size_t r = k;
        while (r % 2 == 0)
            r /= 2;
        while (r % 3 == 0)
            r /= 3;
        while (r % 5 == 0)
            r /= 5;
        if (r == 1)
            return k;
    }
}

gmm_status gmm_r_fft_init(gmm_r_fft *f, size_t n)
{
    f->n = n;
    f->buf = gmm_malloc(n, sizeof *f->buf);
    f->rwt = gsl_fft_real_wavetable_alloc(n);
    f->hwt = gsl_fft_halfcomplex_wavetable_alloc(n);
    f->work = gsl_fft_real_workspace_alloc(n);
    if (!f->buf || !f->rwt || !f->hwt || !f->work)
        return gmm_error(GMM_ENOMEM, "out of memory for an FFT of length %zu", n);
    return GMM_OK;
}

void gmm_r_fft_free(gmm_r_fft *f)
{
    gmm_free(f->buf);
    if (f->rwt)
        gsl_fft_real_wavetable_free(f->rwt);
    if (f->hwt)
        gsl_fft_halfcomplex_wavetable_free(f->hwt);
    if (f->work)
        gsl_fft_real_workspace_free(f->work);
    memset(f, 0, sizeof *f);
}

gmm_status gmm_r_acov_sums(gmm_r_fft *fft, const double *x, size_t N, double mean)
{
    size_t L = fft->n;
    double *f = fft->buf;
    for (size_t t = 0; t < N; t++)
        f[t] = x[t] - mean;
    memset(f + N, 0, (L - N) * sizeof *f);
    if (gsl_fft_real_transform(f, 1, L, fft->rwt, fft->work) != GSL_SUCCESS)
        return gmm_error(GMM_EDOM, "FFT of length %zu failed", L);
    /* Halfcomplex layout: f[0] = X_0, (f[2k-1], f[2k]) = X_k, f[L-1] =
     * X_{L/2} (L even).  Replace X by |X|^2. */
    f[0] *= f[0];
    for (size_t k = 1; 2 * k < L; k++) {
        double re = f[2 * k - 1], im = f[2 * k];
        f[2 * k - 1] = re * re + im * im;
        f[2 * k] = 0.0;
    }
    f[L - 1] *= f[L - 1];
    if (gsl_fft_halfcomplex_backward(f, 1, L, fft->hwt, fft->work) != GSL_SUCCESS)
        return gmm_error(GMM_EDOM, "inverse FFT of length %zu failed", L);
    return GMM_OK;
}

double gmm_r_geyer_tau(const double *acov_mean, const double *chain_mean, size_t m, size_t len,
                       double *rho)
{
    const double *am = acov_mean;
    double N = (double)len;
    double mean_var = am[0] * N / (N - 1.0);
    double var_plus = mean_var * (N - 1.0) / N;
    if (m > 1)
        var_plus += gmm_r_var(chain_mean, m);

    /* rho[t] = 1 - (mean_var - acov_mean[t]) / var_plus; pairs (even, odd)
     * are kept while their sum is positive. */
    for (size_t k = 0; k < len; k++)
        rho[k] = 0.0;
    long n = (long)len, t = 0;
    double even = 1.0, odd = 1.0 - (mean_var - am[1]) / var_plus;
    rho[0] = even;
    rho[1] = odd;
    while (t < n - 5 && !isnan(even + odd) && even + odd > 0.0) {
        t += 2;
        even = 1.0 - (mean_var - am[t]) / var_plus;
        odd = 1.0 - (mean_var - am[t + 1]) / var_plus;
        if (even + odd >= 0.0) {
            rho[t] = even;
            rho[t + 1] = odd;
        }
    }
    long max_t = t;
    if (even > 0.0)
        rho[max_t] = even;
    /* Monotone: a pair sum may not exceed the previous one. */
    for (t = 0; t <= max_t - 4;) {
        t += 2;
        if (rho[t] + rho[t + 1] > rho[t - 2] + rho[t - 1]) {
            rho[t] = (rho[t - 2] + rho[t - 1]) / 2.0;
            rho[t + 1] = rho[t];
        }
    }
    long double sum = 0.0L;
    if (max_t == 0)
        sum = rho[0]; /* R: sum(rho[1:0]) is rho[1] */
    for (t = 0; t < max_t; t++)
        sum += rho[t];
    double tau = -1.0 + 2.0 * (double)sum + rho[max_t];
    double tau_bound = 1.0 / log10((double)(m * len));
    return tau < tau_bound ? tau_bound : tau;
}
