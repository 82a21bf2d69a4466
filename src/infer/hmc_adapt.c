/* hmc_adapt.c -- the warm-up of a gmm_hmc: step size and metric; see hmc.h.
 *
 * Written from Stan's base_hmc.hpp (init_stepsize), stepsize_adaptation.hpp,
 * windowed_adaptation.hpp and var_adaptation.hpp; differences are listed
 * where they occur.
 *
 * WARM-UP (the first `warmup` iterations; as Stan's adapt_diag_e_nuts):
 *   - step size: before the first iteration, Stan's heuristic (double or halve
 *     eps from params.stepsize until the one-step acceptance crosses 0.8);
 *     then Nesterov dual averaging of log eps towards accept_stat =
 *     target_accept (Hoffman & Gelman 2014, section 3.2), mu = log(10 eps0),
 *     gamma, t0, kappa as in params; at the end of warm-up eps = exp(x_bar);
 *   - metric (adapt_metric): the variance of each coordinate over windows --
 *     an initial buffer of init_buffer iterations, then windows of
 *     base_window, doubling, the last stretched to end term_buffer iterations
 *     before the end of warm-up; when init_buffer + base_window + term_buffer
 *     exceed warmup, 15% / 75% / 10% of warmup; with warmup < 20 no metric
 *     adaptation.  At the end of a window inv_metric = (n / (n + 5)) var +
 *     1e-3 (5 / (n + 5)) (Welford variance of the window's n draws), the step
 *     size heuristic runs again from the current point, mu = log(10 eps), and
 *     dual averaging restarts.  With metric_pooling the window's estimates
 *     var_i are pooled instead: inv_metric_i = m + w (var_i - m), m their
 *     mean, w = tau^2 / (tau^2 + e^2) with e^2 the estimates' noise (from
 *     the differences between the window's two halves, mean_i (var_a,i -
 *     var_b,i)^2 n_a n_b / n^2) and tau^2 = max(0, sample variance of the
 *     var_i - e^2) the true variances' spread: Stan's rule with the
 *     pseudo-sample size n e^2 / tau^2 estimated from the window, toward the
 *     common value (w = n / (n + 5) when a half has fewer than 2 draws).  So a
 *     metric that should be unit is not made noisy by its estimate (the
 *     noise of ~ 1/sqrt(n) per coordinate over thousands of coordinates
 *     shortens the step size), and one that should not be keeps its
 *     estimates (w -> 1 as the spread exceeds the noise).
 */
#include <math.h>
#include <string.h>

#include "gmm/hmc.h"
#include "hmc_impl.h"

#define STEPSIZE_MAX 1e7 /* Stan's "posterior is improper" bound */

/* Stan's initial step-size heuristic (base_hmc::init_stepsize): from the
 * current state, one leapfrog step with fresh momentum; double eps while the
 * acceptance exp(H0 - H) stays above 0.8, or halve it while it stays below. */
gmm_status hmc_init_stepsize(gmm_hmc *h)
{
    const double log08 = log(0.8);
    point *z = &h->zf, *z0 = h->cur;
    int direction = 0;
    if (!(h->eps > 0.0) || h->eps > STEPSIZE_MAX)
        return GMM_OK;
    for (;;) {
        copy_vec(z->q, z0->q, h->dim);
        copy_vec(z->g, z0->g, h->dim);
        z->lp = z0->lp;
        hmc_sample_momentum(h, z);
        double H0 = hamiltonian(z);
        gmm_status st = hmc_leapfrog(h, z, h->eps);
        if (st != GMM_OK)
            return st;
        double dH = H0 - hamiltonian(z);
        if (direction == 0) { /* the first probe only sets the direction */
            direction = dH > log08 ? 1 : -1;
            continue;
        }
        if (direction == 1 && !(dH > log08))
            break;
        if (direction == -1 && !(dH < log08))
            break;
        h->eps = direction == 1 ? 2.0 * h->eps : 0.5 * h->eps;
        if (h->eps > STEPSIZE_MAX)
            return gmm_error(GMM_EDOM, "hmc: step size search passed %g: the target looks "
                             "improper (a density that does not decay)", STEPSIZE_MAX);
        if (h->eps == 0.0)
            return gmm_error(GMM_EDOM, "hmc: step size search reached 0: no step is accepted "
                             "(a discontinuous target, or one refused near the current point)");
    }
    return GMM_OK;
}

void hmc_da_restart(gmm_hmc *h)
{
    h->da_counter = 0.0;
    h->da_sbar = 0.0;
    h->da_xbar = 0.0;
}

/* Dual averaging of log eps (stepsize_adaptation::learn_stepsize). */
void hmc_da_learn(gmm_hmc *h, double accept_stat)
{
    const gmm_hmc_params *p = &h->par;
    double a = accept_stat > 1.0 ? 1.0 : accept_stat;
    h->da_counter += 1.0;
    double eta = 1.0 / (h->da_counter + p->t0);
    h->da_sbar = (1.0 - eta) * h->da_sbar + eta * (p->target_accept - a);
    double x = h->da_mu - h->da_sbar * sqrt(h->da_counter) / p->gamma;
    double x_eta = pow(h->da_counter, -p->kappa);
    h->da_xbar = (1.0 - x_eta) * h->da_xbar + x_eta * x;
    h->eps = exp(x);
}

/* windowed_adaptation::set_window_params and restart. */
void hmc_windows_setup(gmm_hmc *h)
{
    const gmm_hmc_params *p = &h->par;
    size_t w = p->warmup;
    h->windows = p->adapt_metric && w >= 20;
    h->w_warmup = w;
    h->w_init = p->init_buffer;
    h->w_term = p->term_buffer;
    h->w_base = p->base_window;
    /* the three stages do not fit (compare without overflow) */
    if (h->windows && (p->init_buffer > w || p->term_buffer > w - p->init_buffer ||
                       p->base_window > w - p->init_buffer - p->term_buffer)) {
        h->w_init = (size_t)(0.15 * (double)w);
        h->w_term = (size_t)(0.10 * (double)w);
        h->w_base = w - (h->w_init + h->w_term);
    }
    h->w_counter = 0;
    h->w_size = h->w_base;
    h->w_next = h->w_init + h->w_size - 1;
    h->w_begin = h->w_init;
    h->welford_n = h->half_n = 0;
    memset(h->welford_mean, 0, h->dim * sizeof(double));
    memset(h->welford_m2, 0, h->dim * sizeof(double));
}

/* windowed_adaptation::compute_next_window. */
static void windows_next(gmm_hmc *h)
{
    size_t last = h->w_warmup - h->w_term - 1;
    if (h->w_next == last)
        return;
    h->w_size *= 2;
    h->w_next = h->w_counter + h->w_size;
    if (h->w_next == last)
        return;
    /* if the window after this one would pass the end of the slow phase,
     * stretch this one to the end */
    if (h->w_next + 2 * h->w_size >= h->w_warmup - h->w_term)
        h->w_next = last;
}

/* The window's variance estimates pooled toward their mean (metric_pooling),
 * into est (dim values; est may be h->welford_mean, read before written).
 * Empirical Bayes over the coordinates: the estimates s_i scatter about
 * their mean m by the spread tau^2 of the true variances plus the
 * estimation noise e^2, so with the prior var_i ~ (m, tau^2) the posterior
 * mean is m + w (s_i - m), w = tau^2 / (tau^2 + e^2) -- Stan's
 * regularisation with a pseudo-sample size k = n e^2 / tau^2 taken from the
 * window instead of 5.  e^2 from the window's two halves: with Var(s) = K /
 * n_eff for n_eff proportional to the draws, Var(s_a - s_b) = K n / (n_a
 * n_b), so e^2 = mean_i (s_a,i - s_b,i)^2 n_a n_b / n^2 -- whatever the
 * draws' autocorrelation and tails; tau^2 = max(0, var_i(s_i) - e^2).
 * When the map leaves every variance near one, tau^2 is small and w falls
 * with it; when the variances really differ, w -> 1 and the estimates stand
 * as Stan's do.  The mean's scale is the step size's business: only the
 * ratios between coordinates reach the sampler.  Without two halves of two
 * draws each, w = n / (n + 5), Stan's weight.  A window where the chain
 * never moved (every variance 0) keeps the old metric.  0, or -1 when the
 * window's statistics overflow. */
static int pooled_variance(gmm_hmc *h, double *est)
{
    size_t n = h->dim;
    double k = (double)h->welford_n, ka = (double)h->half_n, kb = k - ka;
    int halves = h->half_n >= 2 && h->welford_n >= h->half_n + 2;
    double sum = 0.0, dd = 0.0, tot = 0.0;
    for (size_t i = 0; i < n; i++) {
        double var = h->welford_m2[i] / (k - 1.0);
        if (halves) {
            /* the second half's m2 from the whole's and the first's (Chan
             * et al.'s pairwise update, solved for one part) */
            double ma = h->half_mean[i], mb = (k * h->welford_mean[i] - ka * ma) / kb;
            double m2b = h->welford_m2[i] - h->half_m2[i] - (mb - ma) * (mb - ma) * ka * kb / k;
            double d = h->half_m2[i] / (ka - 1.0) - (m2b > 0.0 ? m2b : 0.0) / (kb - 1.0);
            dd += d * d;
        }
        sum += var;
        est[i] = var;
    }
    double mean = sum / (double)n;
    if (!isfinite(mean) || !isfinite(dd))
        return -1;
    if (!(mean > 0.0)) { /* no transition moved the chain in the window */
        copy_vec(est, h->inv_metric, n);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        tot += (est[i] - mean) * (est[i] - mean);
    tot /= n > 1 ? (double)(n - 1) : 1.0;
    double noise = dd / (double)n * ka * kb / (k * k);
    double spread = tot > noise ? tot - noise : 0.0;
    double w = halves && noise > 0.0 ? spread / (spread + noise) : k / (k + 5.0);
    for (size_t i = 0; i < n; i++)
        est[i] = mean + w * (est[i] - mean);
    return 0;
}

/* var_adaptation::learn_variance after a warm-up transition to q: 1 when a
 * window ended and inv_metric was re-estimated, 0 if not, -1 on overflow. */
int hmc_learn_variance(gmm_hmc *h, const double *q)
{
    size_t n = h->dim, c = h->w_counter;
    int updated = 0;
    if (c >= h->w_init && c < h->w_warmup - h->w_term && c != h->w_warmup) {
        double k = (double)++h->welford_n;
        for (size_t i = 0; i < n; i++) {
            double dl = q[i] - h->welford_mean[i];
            h->welford_mean[i] += dl / k;
            h->welford_m2[i] += dl * (q[i] - h->welford_mean[i]);
        }
        /* the first half of the window, kept for pooled_variance */
        if (h->par.metric_pooling && h->welford_n == (h->w_next + 1 - h->w_begin) / 2) {
            copy_vec(h->half_mean, h->welford_mean, n);
            copy_vec(h->half_m2, h->welford_m2, n);
            h->half_n = h->welford_n;
        }
    }
    if (c == h->w_next && c != h->w_warmup) {
        windows_next(h);
        h->w_begin = c + 1;
        double k = (double)h->welford_n, *est = h->welford_mean; /* mean no longer needed */
        if (h->par.metric_pooling && h->welford_n > 1) {
            if (pooled_variance(h, est) < 0)
                updated = -1;
        } else if (h->par.metric_pooling) {
            copy_vec(est, h->inv_metric, n);
        } else {
            for (size_t i = 0; i < n; i++) {
                /* one draw: Stan's estimator leaves the old value */
                double var = h->welford_n > 1 ? h->welford_m2[i] / (k - 1.0) : h->inv_metric[i];
                est[i] = (k / (k + 5.0)) * var + 1e-3 * (5.0 / (k + 5.0));
            }
        }
        for (size_t i = 0; i < n && updated == 0; i++)
            if (!isfinite(est[i]))
                updated = -1;
        if (updated == 0) { /* an overflow keeps the old metric */
            copy_vec(h->inv_metric, est, n);
            metric_changed(h);
            updated = 1;
        }
        h->welford_n = h->half_n = 0;
        memset(h->welford_mean, 0, n * sizeof(double));
        memset(h->welford_m2, 0, n * sizeof(double));
    }
    h->w_counter++;
    return updated;
}
