/* summary.c -- posterior summaries of MCMC draws as the R package posterior
 * (1.4) computes them; the NAN rules are summary.h's.
 *
 * The measures, over draws[c*S + s] of C chains of S iterations:
 *
 *   mean, median, sd (denominator CS - 1), mad = 1.4826 median|x - median|,
 *   q5, q95 (R's quantile type 7: x_(lo) + h (x_(lo+1) - x_(lo)) with
 *     1 + (CS - 1) p = lo + h), all over the CS draws pooled;
 *
 *   rhat = max(bulk, tail) R-hat of Vehtari, Gelman, Simpson, Carpenter and
 *     Buerkner (2021, "Rank-normalization, folding, and localization"):
 *     split each chain into halves (S odd: the middle draw is left out),
 *     rank-normalise the pooled split draws, z = Phi^-1((r - 3/8) /
 *     (n + 1/4)) with r the average rank among n, and take the classic
 *     R-hat sqrt(((N - 1)/N W + B/N) / W) of z; the tail version does the
 *     same to |x - median(x)|;
 *
 *   ess_bulk: Geyer's initial-monotone-sequence ESS of the rank-normalised
 *     split chains (autocovariances by FFT, averaged over chains and
 *     combined with the between-chain variance as in Stan; the sum stops
 *     at the first negative pair of autocorrelations; ESS is capped at
 *     n log10(n), n the number of split draws -- posterior warns there,
 *     this module does not);
 *
 *   ess_tail = min of the ESS of the indicators x <= q5 and x <= q95
 *     (split, not rank-normalised), q computed over the unsplit draws;
 *
 *   ess_mean (separate function): the same ESS of the split draws
 *     themselves, for Monte-Carlo standard errors of a mean.
 *
 *
 * Read from posterior's R sources (summarise_draws, rhat, ess_bulk,
 * ess_tail, .ess, autocovariance, z_scale, fold_draws, .split_chains,
 * quantile2) and from R itself (mean, var, median, mad, quantile type 7),
 * including the details that move results by more than rounding:
 *
 *   - splitting an odd chain leaves out its middle draw, and the chains
 *     become [first halves of chains 1..C, second halves of chains 1..C];
 *   - rank normalisation pools all split draws (the left-out draws do not
 *     count towards n), ties get the average rank;
 *   - ess_tail's quantiles are over the unsplit draws, the indicators are
 *     then split;
 *   - the "not available" test is anyNA || anyInfinite || max - min <
 *     DBL_EPSILON, applied to what each function receives (the split
 *     z-scores for rhat and ess_bulk, the raw draws for ess_tail, the split
 *     indicators or draws inside the ESS);
 *   - Geyer's sum: when the pair loop never runs (split chains of 3..5
 *     draws, or a first pair summing to <= 0), R's 1:max_t with max_t = 0
 *     indexes element 1, so tau = -1 + 2 rho_0 + rho_0 = 2, not 0.
 *
 * Sums of many terms use long double as R does, so the results agree with
 * R's to a few units in the last place, not just to 1e-8.
 */
#include "gmm/summary.h"

#include <float.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/io.h"
#include "rstats.h"

/* posterior's rank offset c in (r - c) / (n - 2c + 1) and mad's constant. */
#define RANK_OFFSET 0.375
#define MAD_CONSTANT 1.4826

typedef struct {
    double v;
    size_t i;
} ranked;

struct gmm_summary_work {
    size_t nchain, niter, n;  /* n = nchain niter */
    size_t m, len;            /* split chains and their length */
    double *sorted;           /* n: the pooled draws, sorted */
    double *tmp;              /* n: folded draws, indicators */
    double *split;            /* n: split chains, chain-major (m len used) */
    ranked *rank;             /* n */
    double *acov, *acov_mean, *rho; /* len each */
    double *chain_mean;       /* m */
    gmm_r_fft fft;            /* length 2 nextn(len); unset when len < 3 (no ESS) */
};

/* ---- R's arithmetic ------------------------------------------------------ */

static double median_sorted(const double *s, size_t n)
{
    return n % 2 ? s[n / 2] : gmm_r_mean(s + n / 2 - 1, 2);
}

double gmm_summary_quantile_sorted(const double *s, size_t n, double p)
{
    if (!s || n == 0 || !(p >= 0.0 && p <= 1.0))
        return NAN;
    double index = 1.0 + (double)(n - 1) * p; /* 1-based, as R */
    double lo = floor(index), hi = ceil(index);
    double q = s[(size_t)lo - 1], xh = s[(size_t)hi - 1];
    if (index > lo && xh != q) {
        double h = index - lo;
        q = (1.0 - h) * q + h * xh;
    }
    return q;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_ranked(const void *a, const void *b)
{
    double x = ((const ranked *)a)->v, y = ((const ranked *)b)->v;
    return (x > y) - (x < y);
}

/* posterior's should_return_NA: anyNA, anyInfinite, or constant to an
 * absolute DBL_EPSILON. */
static int not_available(const double *x, size_t n)
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return 1;
        if (x[i] < lo)
            lo = x[i];
        if (x[i] > hi)
            hi = x[i];
    }
    return fabs(hi - lo) < DBL_EPSILON;
}

/* ---- the transformations ------------------------------------------------- */

/* posterior's .split_chains: x (C chains of S, chain-major) into out as
 * [first halves, second halves]; S odd leaves out each middle draw; S = 1
 * is not split. */
static void split_chains(const double *x, size_t C, size_t S, double *out)
{
    if (S == 1) {
        memcpy(out, x, C * sizeof *x);
        return;
    }
    size_t h = S / 2, second = S - h;
    for (size_t c = 0; c < C; c++) {
        memcpy(out + c * h, x + c * S, h * sizeof *x);
        memcpy(out + (C + c) * h, x + c * S + second, h * sizeof *x);
    }
}

/* z_scale: v[i] <- Phi^-1((r_i - 3/8) / (n - 3/4 + 1)), r_i the average
 * rank of v[i] among the n values; all NAN when any is NaN (R ranks NA
 * last and then sets them NA, which makes every later test NA). */
static void z_scale(double *v, size_t n, ranked *r)
{
    for (size_t i = 0; i < n; i++)
        if (isnan(v[i])) {
            for (size_t k = 0; k < n; k++)
                v[k] = NAN;
            return;
        }
    for (size_t i = 0; i < n; i++) {
        r[i].v = v[i];
        r[i].i = i;
    }
    qsort(r, n, sizeof *r, cmp_ranked);
    double denom = (double)n - 2.0 * RANK_OFFSET + 1.0;
    for (size_t a = 0, b; a < n; a = b + 1) {
        for (b = a; b + 1 < n && r[b + 1].v == r[a].v; b++)
            ;
        double rank = (double)(a + 1 + b + 1) / 2.0;
        double z = gsl_cdf_ugaussian_Pinv((rank - RANK_OFFSET) / denom);
        for (size_t k = a; k <= b; k++)
            v[r[k].i] = z;
    }
}

/* ---- R-hat and ESS of split chains ---------------------------------------- */

/* posterior's .rhat: the classic potential scale reduction of m chains of
 * len (chain-major). */
static double rhat_basic(const double *v, size_t m, size_t len, double *chain_mean)
{
    if (not_available(v, m * len) || len < 2 || m < 2)
        return NAN;
    long double w = 0.0L;
    for (size_t j = 0; j < m; j++) {
        chain_mean[j] = gmm_r_mean(v + j * len, len);
        w += gmm_r_var(v + j * len, len);
    }
    double var_within = (double)(w / (long double)m);
    double var_between = (double)len * gmm_r_var(chain_mean, m);
    return sqrt((var_between / var_within + (double)len - 1.0) / (double)len);
}

/* posterior's autocovariance: ac[k] = sum_t (x_t - xbar)(x_{t+k} - xbar) / N
 * for k < N, by FFT with zero padding to 2 nextn(N) (no wrap-around); zeros
 * for a constant chain. */
static gmm_status autocovariance(const double *x, size_t N, gmm_summary_work *w, double *ac)
{
    int constant = 1;
    for (size_t t = 1; t < N && constant; t++)
        constant = x[t] == x[0];
    if (constant) {
        memset(ac, 0, N * sizeof *ac);
        return GMM_OK;
    }
    double var = gmm_r_var(x, N);
    gmm_status st = gmm_r_acov_sums(&w->fft, x, N, gmm_r_mean(x, N));
    if (st != GMM_OK)
        return st;
    const double *f = w->fft.buf;
    for (size_t k = 0; k < N; k++)
        ac[k] = f[k] / f[0] * var * (double)(N - 1) / (double)N;
    return GMM_OK;
}

/* posterior's .ess: Geyer's initial monotone sequence on the
 * autocorrelations of m chains of len combined as in Stan (Vehtari et al.
 * 2021, eqs. 10-11), capped at n log10(n), n = m len. */
static gmm_status ess_basic(const double *v, size_t m, size_t len, gmm_summary_work *w,
                            double *ess)
{
    *ess = NAN;
    if (len < 3 || not_available(v, m * len))
        return GMM_OK;
    double *am = w->acov_mean, *rho = w->rho;
    for (size_t k = 0; k < len; k++)
        am[k] = 0.0;
    for (size_t j = 0; j < m; j++) {
        gmm_status st = autocovariance(v + j * len, len, w, w->acov);
        if (st != GMM_OK)
            return st;
        for (size_t k = 0; k < len; k++)
            am[k] += w->acov[k];
    }
    for (size_t k = 0; k < len; k++)
        am[k] /= (double)m;
    for (size_t j = 0; j < m; j++)
        w->chain_mean[j] = gmm_r_mean(v + j * len, len);

    *ess = (double)(m * len) / gmm_r_geyer_tau(am, w->chain_mean, m, len, rho);
    return GMM_OK;
}

/* ---- the measures ---------------------------------------------------------- */

static double max_na(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : fmax(a, b);
}

static double min_na(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : fmin(a, b);
}

/* rhat given the median of the pooled draws (for folding). */
static double rhat_of(const double *x, double median, gmm_summary_work *w)
{
    size_t C = w->nchain, S = w->niter, n = w->n, nsplit = w->m * w->len;
    split_chains(x, C, S, w->split);
    z_scale(w->split, nsplit, w->rank);
    double bulk = rhat_basic(w->split, w->m, w->len, w->chain_mean);
    for (size_t i = 0; i < n; i++)
        w->tmp[i] = fabs(x[i] - median);
    split_chains(w->tmp, C, S, w->split);
    z_scale(w->split, nsplit, w->rank);
    double tail = rhat_basic(w->split, w->m, w->len, w->chain_mean);
    return max_na(bulk, tail);
}

static gmm_status ess_bulk_of(const double *x, gmm_summary_work *w, double *ess)
{
    split_chains(x, w->nchain, w->niter, w->split);
    z_scale(w->split, w->m * w->len, w->rank);
    return ess_basic(w->split, w->m, w->len, w, ess);
}

/* ess_tail given the sorted pooled draws. */
static gmm_status ess_tail_of(const double *x, const double *sorted, gmm_summary_work *w,
                              double *ess)
{
    static const double prob[2] = {0.05, 0.95};
    double e[2];
    *ess = NAN;
    if (not_available(x, w->n))
        return GMM_OK;
    for (int k = 0; k < 2; k++) {
        double q = gmm_summary_quantile_sorted(sorted, w->n, prob[k]);
        for (size_t i = 0; i < w->n; i++)
            w->tmp[i] = x[i] <= q ? 1.0 : 0.0;
        split_chains(w->tmp, w->nchain, w->niter, w->split);
        gmm_status st = ess_basic(w->split, w->m, w->len, w, &e[k]);
        if (st != GMM_OK)
            return st;
    }
    *ess = min_na(e[0], e[1]);
    return GMM_OK;
}

static int any_nan(const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (isnan(x[i]))
            return 1;
    return 0;
}

static void sort_pooled(const double *x, gmm_summary_work *w)
{
    memcpy(w->sorted, x, w->n * sizeof *x);
    qsort(w->sorted, w->n, sizeof *w->sorted, cmp_double);
}

/* ---- workspace and entry points ------------------------------------------- */

void gmm_summary_work_free(gmm_summary_work *w)
{
    if (!w)
        return;
    gmm_free(w->sorted);
    gmm_free(w->tmp);
    gmm_free(w->split);
    gmm_free(w->rank);
    gmm_free(w->acov);
    gmm_free(w->acov_mean);
    gmm_free(w->rho);
    gmm_free(w->chain_mean);
    gmm_r_fft_free(&w->fft);
    gmm_free(w);
}

gmm_status gmm_summary_work_alloc(size_t nchain, size_t niter, gmm_summary_work **out)
{
    if (!out)
        return gmm_error(GMM_EINVAL, "summary: no output pointer");
    *out = NULL;
    if (nchain == 0 || niter == 0)
        return gmm_error(GMM_EINVAL, "summary: %zu chains of %zu draws: need at least one of each",
                         nchain, niter);
    /* The FFT length 2 nextn(niter / 2) stays below 2 niter + O(niter^(2/3)):
     * the bound below keeps it and every array size from overflowing. */
    if (nchain > SIZE_MAX / 16 / niter || niter > SIZE_MAX / 64)
        return gmm_error(GMM_EINVAL, "summary: %zu chains of %zu draws is too many", nchain,
                         niter);
    gmm_summary_work *w = gmm_calloc(1, sizeof *w);
    if (!w)
        return gmm_error(GMM_ENOMEM, "summary: out of memory");
    w->nchain = nchain;
    w->niter = niter;
    w->n = nchain * niter;
    w->m = niter == 1 ? nchain : 2 * nchain;
    w->len = niter == 1 ? 1 : niter / 2;
    w->sorted = gmm_malloc(w->n, sizeof *w->sorted);
    w->tmp = gmm_malloc(w->n, sizeof *w->tmp);
    w->split = gmm_malloc(w->n, sizeof *w->split);
    w->rank = gmm_malloc(w->n, sizeof *w->rank);
    w->acov = gmm_malloc(w->len, sizeof *w->acov);
    w->acov_mean = gmm_malloc(w->len, sizeof *w->acov_mean);
    w->rho = gmm_malloc(w->len, sizeof *w->rho);
    w->chain_mean = gmm_malloc(w->m, sizeof *w->chain_mean);
    int ok = w->sorted && w->tmp && w->split && w->rank && w->acov && w->acov_mean && w->rho &&
             w->chain_mean;
    if (ok && w->len >= 3) {
        ok = gmm_r_fft_init(&w->fft, 2 * gmm_r_nextn(w->len)) == GMM_OK;
    }
    if (!ok) {
        gmm_summary_work_free(w);
        return gmm_error(GMM_ENOMEM, "summary: out of memory for %zu chains of %zu draws",
                         nchain, niter);
    }
    *out = w;
    return GMM_OK;
}

/* Validate the arguments common to every entry point and find or make the
 * workspace (*own set when it was made here). */
static gmm_status prepare(const double *draws, size_t nchain, size_t niter, const void *out,
                          gmm_summary_work **w, gmm_summary_work **own)
{
    *own = NULL;
    if (!draws || !out)
        return gmm_error(GMM_EINVAL, "summary: NULL %s", draws ? "output" : "draws");
    if (nchain == 0 || niter == 0)
        return gmm_error(GMM_EINVAL, "summary: %zu chains of %zu draws: need at least one of each",
                         nchain, niter);
    if (*w) {
        if ((*w)->nchain != nchain || (*w)->niter != niter)
            return gmm_error(GMM_EDIM,
                             "summary: workspace for %zu chains of %zu draws given %zu of %zu",
                             (*w)->nchain, (*w)->niter, nchain, niter);
        return GMM_OK;
    }
    gmm_status st = gmm_summary_work_alloc(nchain, niter, own);
    *w = *own;
    return st;
}

gmm_status gmm_summary_compute(const double *draws, size_t nchain, size_t niter,
                               gmm_summary_work *w, gmm_summary *out)
{
    gmm_summary_work *own;
    gmm_status st = prepare(draws, nchain, niter, out, &w, &own);
    if (st != GMM_OK)
        return st;
    gmm_summary s;
    size_t n = w->n;
    if (any_nan(draws, n)) {
        s.mean = s.median = s.sd = s.mad = s.q5 = s.q95 = NAN;
        s.rhat = s.ess_bulk = s.ess_tail = NAN;
        goto done;
    }
    s.mean = gmm_r_mean(draws, n);
    s.sd = sqrt(gmm_r_var(draws, n));
    sort_pooled(draws, w);
    s.median = median_sorted(w->sorted, n);
    s.q5 = gmm_summary_quantile_sorted(w->sorted, n, 0.05);
    s.q95 = gmm_summary_quantile_sorted(w->sorted, n, 0.95);
    for (size_t i = 0; i < n; i++)
        w->tmp[i] = fabs(draws[i] - s.median);
    qsort(w->tmp, n, sizeof *w->tmp, cmp_double);
    s.mad = MAD_CONSTANT * median_sorted(w->tmp, n);
    s.rhat = rhat_of(draws, s.median, w);
    if ((st = ess_bulk_of(draws, w, &s.ess_bulk)) == GMM_OK)
        st = ess_tail_of(draws, w->sorted, w, &s.ess_tail);
done:
    if (st == GMM_OK)
        *out = s;
    gmm_summary_work_free(own);
    return st;
}

typedef enum { MEASURE_RHAT, MEASURE_ESS_BULK, MEASURE_ESS_TAIL } measure;

/* One of the measures of nchain chains of niter draws (chain-major) into
 * *out, NAN when a draw is NaN; w as the entry points take it (NULL: made
 * and freed here).  Errors: prepare's, and ess_basic's GMM_EDOM. */
static gmm_status measure_one(const double *draws, size_t nchain, size_t niter,
                              gmm_summary_work *w, measure which, double *out)
{
    gmm_summary_work *own;
    gmm_status st = prepare(draws, nchain, niter, out, &w, &own);
    if (st != GMM_OK)
        return st;
    *out = NAN;
    if (!any_nan(draws, w->n)) {
        if (which != MEASURE_ESS_BULK)
            sort_pooled(draws, w);
        if (which == MEASURE_RHAT)
            *out = rhat_of(draws, median_sorted(w->sorted, w->n), w);
        else if (which == MEASURE_ESS_BULK)
            st = ess_bulk_of(draws, w, out);
        else
            st = ess_tail_of(draws, w->sorted, w, out);
    }
    gmm_summary_work_free(own);
    return st;
}

gmm_status gmm_summary_rhat(const double *draws, size_t nchain, size_t niter,
                            gmm_summary_work *w, double *rhat)
{
    return measure_one(draws, nchain, niter, w, MEASURE_RHAT, rhat);
}

gmm_status gmm_summary_ess_bulk(const double *draws, size_t nchain, size_t niter,
                                gmm_summary_work *w, double *ess)
{
    return measure_one(draws, nchain, niter, w, MEASURE_ESS_BULK, ess);
}

gmm_status gmm_summary_ess_tail(const double *draws, size_t nchain, size_t niter,
                                gmm_summary_work *w, double *ess)
{
    return measure_one(draws, nchain, niter, w, MEASURE_ESS_TAIL, ess);
}

gmm_status gmm_summary_ess_mean(const double *draws, size_t nchain, size_t niter,
                                gmm_summary_work *w, double *ess)
{
    gmm_summary_work *own;
    gmm_status st = prepare(draws, nchain, niter, ess, &w, &own);
    if (st != GMM_OK)
        return st;
    split_chains(draws, nchain, niter, w->split);
    st = ess_basic(w->split, w->m, w->len, w, ess);
    gmm_summary_work_free(own);
    return st;
}

/* ---- predictions --------------------------------------------------------- */

static int level_ok(double level) { return level > 0.0 && level < 1.0; }

gmm_status gmm_summary_pred_normal(const gmm_lik *lik, double mu, double s2, double level,
                                   gmm_summary_pred *out)
{
    if (!lik || !out)
        return gmm_error(GMM_EINVAL, "gmm_summary_pred_normal: NULL argument");
    if (!level_ok(level))
        return gmm_error(GMM_EINVAL, "interval level %g is not in (0, 1)", level);
    double z = gsl_cdf_ugaussian_Pinv(0.5 + 0.5 * level), r[3];
    gmm_status st = gmm_lik_response(lik, mu, s2, z, r);
    if (st != GMM_OK)
        return st;
    double sd = sqrt(s2);
    out->mean = mu;
    out->var = s2;
    out->lower = mu - z * sd;
    out->upper = mu + z * sd;
    out->resp = r[0];
    out->resp_lower = r[1];
    out->resp_upper = r[2];
    return GMM_OK;
}

gmm_status gmm_summary_pred_draws(const gmm_lik *lik, double *f, size_t n, double level,
                                  gmm_summary_pred *out)
{
    if (!lik || !lik->type || !f || !out || n == 0)
        return gmm_error(GMM_EINVAL, "gmm_summary_pred_draws: NULL argument or no draws");
    if (!level_ok(level))
        return gmm_error(GMM_EINVAL, "interval level %g is not in (0, 1)", level);
    if (any_nan(f, n)) {
        out->mean = out->var = out->lower = out->upper = NAN;
        out->resp = out->resp_lower = out->resp_upper = NAN;
        return GMM_OK;
    }
    const gmm_lik_type *t = lik->type;
    out->mean = gmm_r_mean(f, n);
    out->var = n > 1 ? gmm_r_var(f, n) : 0.0;
    qsort(f, n, sizeof *f, cmp_double);
    out->lower = gmm_summary_quantile_sorted(f, n, 0.5 - 0.5 * level);
    out->upper = gmm_summary_quantile_sorted(f, n, 0.5 + 0.5 * level);
    long double rs = 0.0L;
    for (size_t i = 0; i < n; i++)
        rs += t->mean(lik->par, 1.0, f[i]);
    out->resp = (double)(rs / (long double)n);
    out->resp_lower = t->mean(lik->par, 1.0, out->lower);
    out->resp_upper = t->mean(lik->par, 1.0, out->upper);
    return GMM_OK;
}

gmm_status gmm_summary_write(FILE *f, const gmm_draws *d, int (*stop)(void))
{
    gmm_summary_work *w = NULL;
    gmm_status st = gmm_summary_work_alloc(d->nchain, d->niter, &w);
    if (st != GMM_OK)
        return st;
    fputs("variable,mean,median,sd,mad,q5,q95,rhat,ess_bulk,ess_tail\n", f);
    for (size_t v = 0; v < d->nvar; v++) {
        if (stop && stop()) {
            st = gmm_error(GMM_ECANCEL, "interrupted");
            break;
        }
        gmm_summary s;
        st = gmm_summary_compute(gmm_draws_variable(d, v), d->nchain, d->niter, w, &s);
        if (st != GMM_OK)
            break;
        const double col[] = {s.mean, s.median, s.sd,   s.mad,      s.q5,
                              s.q95,  s.rhat,   s.ess_bulk, s.ess_tail};
        gmm_csv_put_field(f, d->name[v]);
        for (size_t k = 0; k < sizeof col / sizeof col[0]; k++) {
            fputc(',', f);
            gmm_csv_put_number(f, col[k]);
        }
        fputc('\n', f);
    }
    gmm_summary_work_free(w);
    return st;
}
