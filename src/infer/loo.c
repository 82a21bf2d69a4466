/* loo.c -- PSIS-LOO and WAIC as the R package loo 2.5.1 computes them: see
 * loo.h for the layout of the draws.
 *
 * Per observation (Vehtari, Gelman and Gabry 2017; Vehtari et al. 2015/2022):
 *
 *   r_eff     loo's relative_eff: the ESS of exp(ll) over S, with loo's own
 *             ess_rfun -- Geyer's initial monotone sequence over unsplit,
 *             not rank-normalised chains, autocovariances by FFT scaled as
 *             loo scales them (a factor nextn(niter) / niter on the
 *             within-chain part that posterior's ESS does not have);
 *   pareto_k  the shape of a generalised Pareto fitted (Zhang and Stephens
 *             2009, loo's gpdfit: M = 30 + floor(sqrt(N)) grid points, prior
 *             3, weakly informative adjustment k N/(N+10) + 5/(N+10)) to the
 *             largest M_tail = ceiling(min(0.2 S, 3 sqrt(S / r_eff))) ratios
 *             1/p(y_i | draw), whose logs are then replaced by the fitted
 *             quantiles at (j - 1/2) / M_tail; weights above the largest raw
 *             weight are truncated to it; INFINITY when M_tail < 5 or the
 *             tail is constant (then the raw weights are used);
 *   elpd_loo  log sum_s w_s p(y_i | draw s) with the weights normalised;
 *   p_loo     lpd - elpd_loo, lpd = log mean_s p(y_i | draw s);
 *   looic     -2 elpd_loo;
 *   mcse_elpd_loo  the Monte Carlo SE of elpd_loo as loo's mcse_elpd gives
 *             it: with w the normalised weights, p_s = exp(ll_s) and
 *             E = exp(elpd_loo), the points z_r = E + sd q_r, sd^2 =
 *             sum_s w_s^2 (p_s - E)^2, q_r = qnorm((r - 3/8) / (1000 + 1/4))
 *             for r = 1..1000 (deterministic in loo 2.5.1), and the SE
 *             sqrt(var(log z_r, z_r > 0) / r_eff);
 *   elpd_waic = lpd - p_waic with p_waic the variance (denominator S - 1)
 *             of ll over the draws; waic = -2 elpd_waic.
 *
 * Totals over N observations: each estimate is the sum of the pointwise
 * values, its SE sqrt(N var(pointwise)) (var with denominator N - 1);
 * mcse_elpd_loo is sqrt(sum of the pointwise squares) (loo's mcse_loo), NAN
 * when some k > 0.7.
 * Pareto k counts with loo 2.5.1's cut points: good k <= 0.5, ok
 * 0.5 < k <= 0.7, bad 0.7 < k <= 1, very bad k > 1.
 *
 *
 * Read from loo's R sources (relative_eff.array, ess_rfun, autocovariance,
 * fft_next_good_size, do_psis_i, psis_smooth_tail, gpdfit, lx,
 * adjust_k_wip, qgpd, n_pareto, pointwise_loo_calcs, waic.matrix,
 * table_of_estimates, k_cut, mcse_elpd, mcse_loo), keeping the details that
 * move results by more than rounding:
 *
 *   - ess_rfun's autocovariance divides the unnormalised inverse FFT by
 *     2 N^2 and pads to 2 fft_next_good_size(N), so the within-chain
 *     variance carries a factor nextn(N) / N; the chains are not split;
 *   - the tail is found by a stable sort as R's radix sort.int (the order
 *     of tied ratios cannot change a result: tied ratios are tied
 *     log-likelihoods), the cutoff being the largest ratio below it;
 *   - gpdfit's first quartile is x[floor(N/4 + 1/2)] (1-based), its profile
 *     likelihood uses the k before the prior adjustment, sigma too;
 *   - Geyer's sum with max_t = 0 takes rho_0 once (R's 1:0), as summary.c.
 */
#include "gmm/loo.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "rstats.h"

#define MIN_TAIL 5        /* enough_tail_samples */
#define GRID_MIN 30       /* gpdfit's min_grid_pts */
#define GPD_PRIOR 3.0
#define WIP_A 10.0        /* adjust_k_wip */
#define MCSE_N 1000       /* mcse_elpd's n_samples */

typedef struct {
    double v;
    size_t i;
} ranked;

struct gmm_loo_work {
    size_t nchain, niter, S;
    double *lw;        /* S: log weights */
    double *tmp;       /* S: exp(ll), then ll + lw */
    double *x;         /* S: the tail's exceedances */
    ranked *ord;       /* S */
    double *acov;      /* nchain niter */
    double *acov_mean; /* niter */
    double *rho;       /* niter */
    double *chain_mean; /* nchain */
    double *zn;         /* MCSE_N: mcse_elpd's normal quantiles */
    double *lz;         /* MCSE_N: the logs of its points */
    gmm_r_fft fft;      /* length 2 fft_next_good_size(niter) */
};

/* ---- R's arithmetic ------------------------------------------------------ */

/* matrixStats::logSumExp. */
static double log_sum_exp(const double *x, size_t n)
{
    double mx = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (x[i] > mx)
            mx = x[i];
    if (!isfinite(mx))
        return mx;
    long double s = 0.0L;
    for (size_t i = 0; i < n; i++)
        s += exp(x[i] - mx);
    return mx + log((double)s);
}

static int cmp_ranked(const void *a, const void *b)
{
    const ranked *p = a, *q = b;
    if (p->v != q->v)
        return p->v < q->v ? -1 : 1;
    return (p->i > q->i) - (p->i < q->i);
}

/* ---- relative efficiency ------------------------------------------------- */

/* loo's autocovariance: Re(ifft(|fft(y - mean, padded)|^2))[0..N) / 2N^2. */
static gmm_status autocovariance(const double *y, size_t N, gmm_loo_work *w, double *ac)
{
    gmm_status st = gmm_r_acov_sums(&w->fft, y, N, gmm_r_mean(y, N));
    if (st != GMM_OK)
        return st;
    const double *f = w->fft.buf;
    double scale = 2.0 * (double)N * (double)N;
    for (size_t k = 0; k < N; k++)
        ac[k] = f[k] / scale;
    return GMM_OK;
}

/* loo's ess_rfun of the C chains of n draws in v (chain-major), over C n. */
static gmm_status relative_eff(const double *v, gmm_loo_work *w, double *r_eff)
{
    size_t C = w->nchain, n = w->niter;
    for (size_t c = 0; c < C; c++) {
        gmm_status st = autocovariance(v + c * n, n, w, w->acov + c * n);
        if (st != GMM_OK)
            return st;
        w->chain_mean[c] = gmm_r_mean(v + c * n, n);
    }
    /* R's mean() over the chains of acov[t] */
    for (size_t t = 0; t < n; t++) {
        long double s = 0.0L;
        for (size_t c = 0; c < C; c++)
            s += w->acov[c * n + t];
        s /= (long double)C;
        long double u = 0.0L;
        for (size_t c = 0; c < C; c++)
            u += w->acov[c * n + t] - s;
        w->acov_mean[t] = (double)(s + u / (long double)C);
    }
    double total = (double)(C * n);
    double tau = gmm_r_geyer_tau(w->acov_mean, w->chain_mean, C, n, w->rho);
    *r_eff = total / tau / total;
    return GMM_OK;
}

/* ---- the generalised Pareto tail ----------------------------------------- */

/* loo's gpdfit of the N >= 1 sorted exceedances x: *k (adjusted, INFINITY
 * for NaN) and *sigma. */
static void gpdfit(const double *x, size_t N, double *tmp, double *k, double *sigma)
{
    size_t M = GRID_MIN + (size_t)floor(sqrt((double)N));
    size_t q = (size_t)floor((double)N / 4.0 + 0.5);
    double xstar = x[q > 0 ? q - 1 : 0];
    /* theta_j and the profile log-likelihood N lx(theta_j): tmp[0..M) and
     * tmp[M..2M) (tmp holds S >= 2M doubles: M <= 30 + sqrt(0.2 S)). */
    double *theta = tmp, *l = tmp + M;
    for (size_t j = 1; j <= M; j++) {
        double th = 1.0 / x[N - 1] + (1.0 - sqrt((double)M / ((double)j - 0.5))) / GPD_PRIOR / xstar;
        double a = -th;
        long double s = 0.0L;
        for (size_t i = 0; i < N; i++)
            s += log1p(a * x[i]);
        s /= (long double)N;
        if (isfinite((double)s)) {
            long double u = 0.0L;
            for (size_t i = 0; i < N; i++)
                u += log1p(a * x[i]) - s;
            s += u / (long double)N;
        }
        double kk = (double)s;
        theta[j - 1] = th;
        l[j - 1] = (double)N * (log(a / kk) - kk - 1.0);
    }
    double lse = log_sum_exp(l, M);
    long double th_hat = 0.0L;
    for (size_t j = 0; j < M; j++)
        th_hat += theta[j] * exp(l[j] - lse);
    double theta_hat = (double)th_hat;
    long double s = 0.0L;
    for (size_t i = 0; i < N; i++)
        s += log1p(-theta_hat * x[i]);
    s /= (long double)N;
    if (isfinite((double)s)) {
        long double u = 0.0L;
        for (size_t i = 0; i < N; i++)
            u += log1p(-theta_hat * x[i]) - s;
        s += u / (long double)N;
    }
    double kk = (double)s;
    *sigma = -kk / theta_hat;
    double n_a = (double)N + WIP_A;
    kk = kk * (double)N / n_a + WIP_A * 0.5 / n_a;
    *k = isnan(kk) ? INFINITY : kk;
}

/* PSIS log weights of log ratios -ll into w->lw (unnormalised) and k. */
static void psis(const double *ll, size_t tail_len, gmm_loo_work *w, double *khat)
{
    size_t S = w->S;
    double *lw = w->lw;
    double mx = -INFINITY;
    for (size_t s = 0; s < S; s++)
        if (-ll[s] > mx)
            mx = -ll[s];
    for (size_t s = 0; s < S; s++)
        lw[s] = -ll[s] - mx;
    *khat = INFINITY;
    if (tail_len >= MIN_TAIL) {
        ranked *ord = w->ord;
        for (size_t s = 0; s < S; s++) {
            ord[s].v = lw[s];
            ord[s].i = s;
        }
        qsort(ord, S, sizeof *ord, cmp_ranked);
        size_t first = S - tail_len;
        double lo = ord[first].v, hi = ord[S - 1].v;
        if (fabs(hi - lo) >= 2.220446049250313e-16 / 100.0) {
            double cutoff = ord[first - 1].v, exp_cutoff = exp(cutoff);
            double *x = w->x;
            for (size_t j = 0; j < tail_len; j++)
                x[j] = exp(ord[first + j].v) - exp_cutoff;
            double k, sigma;
            gpdfit(x, tail_len, w->tmp, &k, &sigma);
            *khat = k;
            if (isfinite(k)) {
                for (size_t j = 0; j < tail_len; j++) {
                    double p = ((double)j + 0.5) / (double)tail_len;
                    double qq = (isnan(sigma) || sigma <= 0.0)
                                    ? NAN
                                    : sigma * expm1(-k * log1p(-p)) / k;
                    lw[ord[first + j].i] = log(qq + exp_cutoff);
                }
            }
        }
    }
    for (size_t s = 0; s < S; s++) {
        if (lw[s] > 0.0)
            lw[s] = 0.0;
        lw[s] += mx;
    }
}

/* loo's mcse_elpd: the variance of exp(elpd) under the normalised weights
 * w (sum_s w_s^2 (p_s - E)^2), the log of MCSE_N points of the normal with
 * that mean and variance at the quantiles zn (those > 0), their variance
 * over r_eff, its root. */
static double mcse_elpd(const double *ll, const double *lw, double norm, double elpd,
                        double r_eff, gmm_loo_work *w)
{
    double E = exp(elpd);
    long double v = 0.0L;
    for (size_t s = 0; s < w->S; s++) {
        double ws = exp(lw[s] - norm), d = exp(ll[s]) - E;
        v += (ws * ws) * (d * d);
    }
    double sd = sqrt((double)v);
    size_t m = 0;
    for (size_t r = 0; r < MCSE_N; r++) {
        double z = E + sd * w->zn[r];
        if (z > 0.0)
            w->lz[m++] = log(z);
    }
    return sqrt(gmm_r_var(w->lz, m) / r_eff);
}

/* ---- entry points --------------------------------------------------------- */

void gmm_loo_work_free(gmm_loo_work *w)
{
    if (!w)
        return;
    gmm_free(w->lw);
    gmm_free(w->tmp);
    gmm_free(w->x);
    gmm_free(w->ord);
    gmm_free(w->acov);
    gmm_free(w->acov_mean);
    gmm_free(w->rho);
    gmm_free(w->chain_mean);
    gmm_free(w->zn);
    gmm_free(w->lz);
    gmm_r_fft_free(&w->fft);
    gmm_free(w);
}

gmm_status gmm_loo_work_alloc(size_t nchain, size_t niter, gmm_loo_work **out)
{
    if (!out)
        return gmm_error(GMM_EINVAL, "loo: no output pointer");
    *out = NULL;
    if (nchain == 0 || niter < 2)
        return gmm_error(GMM_EINVAL, "loo: %zu chains of %zu draws: need a chain of at least 2",
                         nchain, niter);
    if (nchain > SIZE_MAX / 16 / niter || niter > SIZE_MAX / 64)
        return gmm_error(GMM_EINVAL, "loo: %zu chains of %zu draws is too many", nchain, niter);
    gmm_loo_work *w = gmm_calloc(1, sizeof *w);
    if (!w)
        return gmm_error(GMM_ENOMEM, "loo: out of memory");
    w->nchain = nchain;
    w->niter = niter;
    w->S = nchain * niter;
    /* gpdfit's grid needs 2 (30 + sqrt(S)) doubles of tmp. */
    size_t ntmp = w->S > 2 * (GRID_MIN + 1 + (size_t)sqrt((double)w->S))
                      ? w->S
                      : 2 * (GRID_MIN + 1 + (size_t)sqrt((double)w->S));
    w->lw = gmm_malloc(w->S, sizeof *w->lw);
    w->tmp = gmm_malloc(ntmp, sizeof *w->tmp);
    w->x = gmm_malloc(w->S, sizeof *w->x);
    w->ord = gmm_malloc(w->S, sizeof *w->ord);
    w->acov = gmm_malloc(w->S, sizeof *w->acov);
    w->acov_mean = gmm_malloc(niter, sizeof *w->acov_mean);
    w->rho = gmm_malloc(niter, sizeof *w->rho);
    w->chain_mean = gmm_malloc(nchain, sizeof *w->chain_mean);
    w->zn = gmm_malloc(MCSE_N, sizeof *w->zn);
    w->lz = gmm_malloc(MCSE_N, sizeof *w->lz);
    int ok = w->lw && w->tmp && w->x && w->ord && w->acov && w->acov_mean && w->rho && w->chain_mean && w->zn &&
             w->lz;
    /* qnorm(ppoints(n)) with ppoints' a = 3/8 (n > 10); GSL's inverse is
     * Wichura's AS 241, R's algorithm */
    for (size_t r = 0; ok && r < MCSE_N; r++)
        w->zn[r] = gsl_cdf_ugaussian_Pinv(((double)r + 1.0 - 0.375) / (MCSE_N - 0.75 + 1.0));
    /* loo's fft_next_good_size: 2 for N <= 2, else R's nextn */
    if (ok)
        ok = gmm_r_fft_init(&w->fft, 2 * (niter <= 2 ? 2 : gmm_r_nextn(niter))) == GMM_OK;
    if (!ok) {
        gmm_loo_work_free(w);
        return gmm_error(GMM_ENOMEM, "loo: out of memory for %zu chains of %zu draws", nchain,
                         niter);
    }
    *out = w;
    return GMM_OK;
}

gmm_status gmm_loo_point_compute(const double *ll, size_t nchain, size_t niter, gmm_loo_work *w,
                                 gmm_loo_point *out)
{
    if (!ll || !w || !out)
        return gmm_error(GMM_EINVAL, "loo: NULL argument");
    if (w->nchain != nchain || w->niter != niter)
        return gmm_error(GMM_EDIM, "loo: workspace for %zu x %zu draws, given %zu x %zu",
                         w->nchain, w->niter, nchain, niter);
    size_t S = w->S;
    for (size_t s = 0; s < S; s++)
        if (!isfinite(ll[s]))
            return gmm_error(GMM_EDOM, "loo: draw %zu of the log-likelihood is %g", s + 1, ll[s]);

    for (size_t s = 0; s < S; s++)
        w->tmp[s] = exp(ll[s]);
    double r_eff;
    gmm_status st = relative_eff(w->tmp, w, &r_eff);
    if (st != GMM_OK)
        return st;
    double tl = ceil(fmin(0.2 * (double)S, 3.0 * sqrt((double)S / r_eff)));
    double k;
    psis(ll, (size_t)tl, w, &k);

    double norm = log_sum_exp(w->lw, S);
    for (size_t s = 0; s < S; s++)
        w->tmp[s] = ll[s] + (w->lw[s] - norm);
    double elpd = log_sum_exp(w->tmp, S);
    double lpd = log_sum_exp(ll, S) - log((double)S);
    double pw = gmm_r_var(ll, S);
    out->mcse_elpd_loo = mcse_elpd(ll, w->lw, norm, elpd, r_eff, w);
    out->elpd_loo = elpd;
    out->p_loo = lpd - elpd;
    out->looic = -2.0 * elpd;
    out->pareto_k = k;
    out->r_eff = r_eff;
    out->elpd_waic = lpd - pw;
    out->p_waic = pw;
    out->waic = -2.0 * (lpd - pw);
    return GMM_OK;
}

/* table_of_estimates for one column: sum and sqrt(N var). */
static void estimate(const gmm_loo_point *p, size_t n, size_t off, double *tmp, double *est,
                     double *se)
{
    long double s = 0.0L;
    for (size_t i = 0; i < n; i++) {
        tmp[i] = *(const double *)((const char *)(p + i) + off);
        s += tmp[i];
    }
    *est = (double)s;
    *se = sqrt((double)n * gmm_r_var(tmp, n));
}

gmm_status gmm_loo_totals(const gmm_loo_point *point, size_t nobs, size_t ndraw, gmm_loo *out)
{
    if (!point || !out || nobs == 0)
        return gmm_error(GMM_EINVAL, "loo: no observations");
    double *tmp = gmm_malloc(nobs, sizeof *tmp);
    if (!tmp)
        return gmm_error(GMM_ENOMEM, "loo: out of memory for %zu observations", nobs);
    memset(out, 0, sizeof *out);
    out->nobs = nobs;
    out->ndraw = ndraw;
#define EST(field, se)                                                                     \
    estimate(point, nobs, offsetof(gmm_loo_point, field), tmp, &out->field, &out->se)
    EST(elpd_loo, se_elpd_loo);
    EST(p_loo, se_p_loo);
    EST(looic, se_looic);
    EST(elpd_waic, se_elpd_waic);
    EST(p_waic, se_p_waic);
    EST(waic, se_waic);
#undef EST
    /* loo's mcse_loo: none once some k > 0.7 */
    long double mc = 0.0L;
    for (size_t i = 0; i < nobs; i++)
        mc += point[i].mcse_elpd_loo * point[i].mcse_elpd_loo;
    out->mcse_elpd_loo = sqrt((double)mc);
    for (size_t i = 0; i < nobs; i++) {
        double k = point[i].pareto_k;
        if (k > 0.7)
            out->mcse_elpd_loo = NAN;
        if (k <= 0.5)
            out->k_good++;
        else if (k <= 0.7)
            out->k_ok++;
        else if (k <= 1.0)
            out->k_bad++;
        else
            out->k_very_bad++;
    }
    gmm_free(tmp);
    return GMM_OK;
}

gmm_status gmm_loo_draws(const gmm_draws *d, const size_t *var, size_t nobs, int (*stop)(void),
                         gmm_loo_point *point, gmm_loo *out)
{
    gmm_loo_work *w = NULL;
    gmm_status st = gmm_loo_work_alloc(d->nchain, d->niter, &w);
    for (size_t i = 0; st == GMM_OK && i < nobs; i++) {
        if (stop && stop()) {
            st = gmm_error(GMM_ECANCEL, "interrupted");
            break;
        }
        st = gmm_loo_point_compute(gmm_draws_variable(d, var[i]), d->nchain, d->niter, w,
                                   point + i);
        if (st != GMM_OK)
            st = gmm_error(st, "%s: %s", d->name[var[i]], gmm_error_message());
    }
    gmm_loo_work_free(w);
    if (st == GMM_OK)
        st = gmm_loo_totals(point, nobs, d->nchain * d->niter, out);
    return st;
}
