/* lik_studentt.c -- y = f + scale eps, eps ~ t with df degrees of freedom
 * (identity link; robust to outliers).  With nu = df, s = scale, r = y - f,
 * a = nu s^2, D = a + r^2:
 *
 *   log p = log Gamma((nu + 1)/2) - log Gamma(nu/2) - log(nu pi)/2 - log s
 *           - (nu + 1)/2 log1p(r^2 / a),
 *   d1 = (nu + 1) r / D,   d2 = (nu + 1)(r^2 - a) / D^2,
 *   d3 = 2 (nu + 1) r (r^2 - 3a) / D^3,
 *   d/dnu log p = [psi((nu + 1)/2) - psi(nu/2)] / 2 - 1 / (2 nu)
 *                 - log1p(r^2 / a) / 2 + (nu + 1) r^2 / (2 nu D),
 *   d/dnu d1 = r (r^2 - s^2) / D^2,
 *   d/dnu d2 = [(r^2 - a) - (nu + 1) s^2] / D^2 - 2 (nu + 1)(r^2 - a) s^2 / D^3,
 *   d/ds log p = nu (r^2 - s^2) / (s D),
 *   d/ds d1 = -2 nu s (nu + 1) r / D^2,
 *   d/ds d2 = -2 nu s (nu + 1)(3 r^2 - a) / D^3.
 *
 * d2 > 0 where r^2 > a (|r| > s sqrt(nu)): log p is not concave in f, and
 * the Laplace approximation must allow W = -d2 < 0 (laplace.c).  The
 * log-gamma difference is GSL's lnpoch(nu/2, 1/2), accurate for large nu
 * where the two log-gammas cancel.  Powers of D are formed as products of
 * ratios (r/D, a/D), so nothing overflows for |r| up to 1e150.  The
 * expectation is a composite Gauss-Legendre rule graded towards y (below);
 * the predictive density an adaptive quadrature in f, since p(y | f) N(f;
 * mu, s2) can have two modes.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include <gsl/gsl_integration.h>
#include <gsl/gsl_sf_gamma.h>
#include <gsl/gsl_sf_psi.h>

#include "gmm/alloc.h"
#include "gmm/kernel.h"
#include "lik_impl.h"

#define LOG_PI 1.1447298858494001741434273513530587
/* The default degrees of freedom: heavy tails with a finite variance. */
#define DF_DEFAULT 4.0

static const char *const studentt_param[] = {"df", "scale"};

/* The terms of log p and of its nu-derivative that do not depend on f. */
typedef struct {
    double c0, cnu;
} st_const;

static st_const st_consts(const double *par, int dpar)
{
    double nu = par[0];
    st_const c = {gsl_sf_lnpoch(0.5 * nu, 0.5) - 0.5 * (log(nu) + LOG_PI) - log(par[1]), 0.0};
    if (dpar)
        c.cnu = 0.5 * (gsl_sf_psi(0.5 * (nu + 1.0)) - gsl_sf_psi(0.5 * nu)) - 0.5 / nu;
    return c;
}

static void st_eval(const double *par, st_const c, double y, double f, double out[4],
                    double *dpar)
{
    double nu = par[0], s = par[1], s2 = s * s, a = nu * s2, r = y - f, r2 = r * r;
    double D = a + r2, rd = r / D, ad = a / D, r2d = r2 / D; /* ad + r2d = 1 */
    double u = r2 / a, nu1 = nu + 1.0;
    out[0] = c.c0 - 0.5 * nu1 * log1p(u);
    out[1] = nu1 * rd;
    out[2] = nu1 * (r2d - ad) / D;
    out[3] = 2.0 * nu1 * rd * (r2d - 3.0 * ad) / D;
    if (dpar) {
        dpar[0] = c.cnu - 0.5 * log1p(u) + 0.5 * nu1 * r2d / nu;
        dpar[1] = rd * (r2 - s2) / D;
        dpar[2] = ((r2d - ad) - nu1 * s2 / D) / D - 2.0 * nu1 * (r2d - ad) * s2 / (D * D);
        dpar[3] = nu * (r2 - s2) / (s * D);
        dpar[4] = -2.0 * nu * s * nu1 * rd / D;
        dpar[5] = -2.0 * nu * s * nu1 * (3.0 * r2d - ad) / (D * D);
    }
}

static void studentt_eval(const double *par, double y, double e, double f, double out[4],
                          double *dpar)
{
    (void)e;
    st_eval(par, st_consts(par, dpar != NULL), y, f, out, dpar);
}

/* ---- the expectation under N(mu, s2) ------------------------------------------- */

#define GL_N 16
static double gl_x[GL_N], gl_w[GL_N]; /* on [-1, 1] */
static int gl_ok;
static pthread_once_t gl_once = PTHREAD_ONCE_INIT;

static void gl_init(void)
{
    gsl_integration_glfixed_table *t = gsl_integration_glfixed_table_alloc(GL_N);
    if (!t)
        return;
    for (size_t i = 0; i < GL_N; i++)
        gsl_integration_glfixed_point(-1.0, 1.0, i, &gl_x[i], &gl_w[i], t);
    gsl_integration_glfixed_table_free(t);
    gl_ok = 1;
}

/* Accumulate w phi(t) (log p, d1, d2, dpar) at f = mu + sd t over [a, b]
 * in panels of width <= 1 (16 Gauss-Legendre points each). */
static void st_panel(const double *par, st_const c, double y, double mu, double sd, double a,
                     double b, double acc[3], double *dacc, size_t np)
{
    double out[4], dp[3 * GMM_LIK_MAXPARAM];
    size_t m = (size_t)ceil(b - a);
    double h = (b - a) / (double)(m ? m : 1);
    for (size_t j = 0; j < (m ? m : 1); j++) {
        double lo = a + h * (double)j, mid = lo + 0.5 * h;
        for (size_t i = 0; i < GL_N; i++) {
            double t = mid + 0.5 * h * gl_x[i];
            double w = 0.5 * h * gl_w[i] * exp(-0.5 * t * t) * 0.39894228040143267794;
            st_eval(par, c, y, mu + sd * t, out, dacc ? dp : NULL);
            acc[0] += w * out[0];
            acc[1] += w * out[1];
            acc[2] += w * out[2];
            for (size_t k = 0; dacc && k < np; k++)
                dacc[k] += w * dp[3 * k];
        }
    }
}

/* f = mu + sd t, t ~ N(0, 1) over |t| <= 9 (the normal's mass beyond is
 * 2e-19).  log p and its derivatives have poles at f = y -/+ i s sqrt(nu),
 * at t_y -/+ i del, t_y = (y - mu) / sd, del = s sqrt(nu) / sd: far nearer
 * the real axis than the normal's scale when the scale is small, where a
 * Gauss-Hermite rule in t would need thousands of points.  So the interval
 * is cut at t_y -/+ del 2^k (k = 0, 1, ..): each panel is no wider than
 * its distance to the poles, which bounds the Gauss-Legendre error by
 * about (1 + sqrt 2)^-32 = 6e-13 relative to the panel's part (measured
 * against adaptive quadrature in test_likelihood.c), whatever nquad. */
static void studentt_expect(const double *par, double y, double e, double mu, double s2,
                            double out[3], double *dpar)
{
    (void)e;
    size_t np = 2;
    st_const c = st_consts(par, dpar != NULL);
    if (s2 == 0.0) { /* a point mass */
        double o[4], dp[3 * GMM_LIK_MAXPARAM];
        st_eval(par, c, y, mu, o, dpar ? dp : NULL);
        out[0] = o[0];
        out[1] = o[1];
        out[2] = 0.5 * o[2];
        for (size_t k = 0; dpar && k < np; k++)
            dpar[k] = dp[3 * k];
        return;
    }
    pthread_once(&gl_once, gl_init);
    if (!gl_ok) { /* GSL's 16-point table is static: not seen */
        out[0] = out[1] = out[2] = NAN;
        return;
    }
    const double L = 9.0;
    double sd = sqrt(s2), ty = (y - mu) / sd, del = fmax(par[1] * sqrt(par[0]) / sd, 1e-15);
    double bp[2 * 64 + 3];
    size_t nb = 0;
    bp[nb++] = -L;
    /* left of t_y, outwards-in */
    double left[64];
    size_t nl = 0;
    for (double d = del; nl < 64 && ty - d > -L; d *= 2.0)
        left[nl++] = ty - d;
    while (nl > 0) {
        double v = left[--nl];
        if (v < L)
            bp[nb++] = v;
    }
    if (ty > -L && ty < L)
        bp[nb++] = ty;
    for (double d = del; nb < 2 * 64 + 2 && ty + d < L; d *= 2.0)
        if (ty + d > -L)
            bp[nb++] = ty + d;
    bp[nb++] = L;
    double acc[3] = {0.0, 0.0, 0.0}, dacc[GMM_LIK_MAXPARAM] = {0.0};
    for (size_t i = 0; i + 1 < nb; i++)
        st_panel(par, c, y, mu, sd, bp[i], bp[i + 1], acc, dpar ? dacc : NULL, np);
    out[0] = acc[0];
    out[1] = acc[1];
    out[2] = 0.5 * acc[2];
    for (size_t k = 0; dpar && k < np; k++)
        dpar[k] = dacc[k];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The observed y sorted into a new array (*m of them; NULL when none). */
static gmm_status sorted_obs(const double *y, size_t n, double **out, size_t *m)
{
    *out = NULL;
    *m = 0;
    double *v = gmm_malloc(n ? n : 1, sizeof *v);
    if (!v)
        return gmm_error(GMM_ENOMEM, "studentt defaults: out of memory");
    for (size_t r = 0; r < n; r++)
        if (!isnan(y[r]))
            v[(*m)++] = y[r];
    qsort(v, *m, sizeof *v, cmp_double);
    *out = v;
    return GMM_OK;
}

static double median_sorted(const double *v, size_t m)
{
    return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

/* The median: an outlier does not move it. */
static gmm_status studentt_intercept(const double *y, const double *e, size_t n, double *b)
{
    (void)e;
    double *v;
    size_t m;
    gmm_status st = sorted_obs(y, n, &v, &m);
    if (st)
        return st;
    *b = m ? median_sorted(v, m) : 0.0;
    gmm_free(v);
    return GMM_OK;
}

/* df 4; scale^2 a tenth of the robust variance (1.4826 MAD)^2, as gaussian's
 * variance is a tenth of the sample variance, which gross outliers would
 * inflate. */
static gmm_status studentt_defaults(const double *y, size_t n, double *dflt)
{
    double *v;
    size_t m;
    gmm_status st = sorted_obs(y, n, &v, &m);
    if (st)
        return st;
    double mad = 0.0;
    if (m >= 2) {
        double med = median_sorted(v, m);
        for (size_t i = 0; i < m; i++)
            v[i] = fabs(v[i] - med);
        qsort(v, m, sizeof *v, cmp_double);
        mad = median_sorted(v, m);
    }
    gmm_free(v);
    dflt[0] = DF_DEFAULT;
    dflt[1] = mad > 0.0 ? 1.4826 * mad * sqrt(0.1) : sqrt(gmm_kernel_default_noise(y, n));
    return GMM_OK;
}

static const char *studentt_degenerate(const double *y, const double *e, size_t n,
                                       const char *yname, char *buf, size_t size)
{
    (void)e;
    return gmm_lik_impl_degenerate_level(y, n, yname, "scale", buf, size);
}

extern const gmm_lik_type gmm_lik_impl_studentt; /* below */

/* The t factor's peak is at f = y. */
static gmm_status studentt_predictive(const double *par, double y, double e, double mu,
                                      double s2, double *lpd)
{
    return gmm_lik_impl_predictive_quad(&gmm_lik_impl_studentt, par, y, e, mu, s2, y, lpd);
}

const gmm_lik_type gmm_lik_impl_studentt = {
    .name = "studentt",
    .nparam = 2,
    .param = studentt_param,
    .rowq = NULL,
    .conjugate = 0,
    .not_log_concave = 1,
    .resp = NULL,
    .check_y = NULL,
    .check_e = NULL,
    .eval = studentt_eval,
    .expect = studentt_expect,
    .mean = gmm_lik_impl_mean_identity,
    .link = gmm_lik_impl_link_identity,
    .mean_normal = gmm_lik_impl_mean_normal_identity,
    .working = gmm_lik_impl_working_identity,
    .intercept = studentt_intercept,
    .defaults = studentt_defaults,
    .degenerate = studentt_degenerate,
    .predictive = studentt_predictive,
};
