/* test_ssm.c -- state-space GP regression against a dense GP of the same
 * kernel (covariance k(tau) evaluated densely, GSL Cholesky: test-only), the
 * gradient against central differences, the two hard cases (zero process
 * noise; inputs much closer than the lengthscale), prediction, errors. */
#include <check.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/kernel.h"
#include "gmm/ssm.h"
#include "support/tu_dense_gp.h"
#include "support/tu_ssm.h"
#include "gmm/spec.h"
#include "support/testutil.h"
#include "support/tu_model.h"

/* ---- dense oracle --------------------------------------------------------------- */

typedef struct {
    size_t m;          /* observed rows */
    double *xo;        /* m */
    gsl_matrix *L;     /* chol(K + noise I) */
    gsl_vector *alpha; /* (K + noise I)^-1 y */
    double loglik;
} dense_gp;

static dense_gp dense_fit(const gmm_kernel *k, const double *theta, double damp, const double *x,
                          const double *y, size_t n)
{
    gsl_set_error_handler_off();
    dense_gp g = {0};
    double noise = theta[gmm_kernel_nparam(k)];
    g.xo = malloc(n * sizeof *g.xo);
    double *yo = malloc(n * sizeof *yo);
    for (size_t i = 0; i < n; i++)
        if (!isnan(y[i])) {
            g.xo[g.m] = x[i];
            yo[g.m++] = y[i];
        }
    size_t m = g.m;
    g.L = gsl_matrix_alloc(m, m);
    g.alpha = gsl_vector_alloc(m);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j <= i; j++) {
            double v = gmm_kernel_cov(k, theta, damp, g.xo[i] - g.xo[j]) + (i == j ? noise : 0.0);
            gsl_matrix_set(g.L, i, j, v);
            gsl_matrix_set(g.L, j, i, v);
        }
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(g.L), GSL_SUCCESS);
    for (size_t i = 0; i < m; i++)
        gsl_vector_set(g.alpha, i, yo[i]);
    gsl_linalg_cholesky_svx(g.L, g.alpha);
    double ld = 0.0, q = 0.0;
    for (size_t i = 0; i < m; i++) {
        ld += 2.0 * log(gsl_matrix_get(g.L, i, i));
        q += yo[i] * gsl_vector_get(g.alpha, i);
    }
    g.loglik = -0.5 * q - 0.5 * ld - 0.5 * (double)m * log(2.0 * M_PI);
    free(yo);
    return g;
}

/* Posterior mean and variance of f at xq. */
static void dense_predict(const dense_gp *g, const gmm_kernel *k, const double *theta,
                          double damp, double xq, double *mean, double *var)
{
    gsl_vector *kq = gsl_vector_alloc(g->m), *v = gsl_vector_alloc(g->m);
    for (size_t i = 0; i < g->m; i++)
        gsl_vector_set(kq, i, gmm_kernel_cov(k, theta, damp, xq - g->xo[i]));
    double mu = 0.0;
    for (size_t i = 0; i < g->m; i++)
        mu += gsl_vector_get(kq, i) * gsl_vector_get(g->alpha, i);
    gsl_vector_memcpy(v, kq);
    gsl_blas_dtrsv(CblasLower, CblasNoTrans, CblasNonUnit, g->L, v);
    double s = 0.0;
    for (size_t i = 0; i < g->m; i++)
        s += gsl_vector_get(v, i) * gsl_vector_get(v, i);
    *mean = mu;
    *var = gmm_kernel_cov(k, theta, damp, 0.0) - s;
    gsl_vector_free(kq);
    gsl_vector_free(v);
}

static void dense_free(dense_gp *g)
{
    free(g->xo);
    gsl_matrix_free(g->L);
    gsl_vector_free(g->alpha);
}

/* ---- data and kernels ------------------------------------------------------------ */

/* theta = kernel values + noise */
static double *theta_of(const gmm_kernel *k, double noise)
{
    size_t np = gmm_kernel_nparam(k);
    double *th = malloc((np + 1) * sizeof *th);
    memcpy(th, gmm_kernel_values_const(k), np * sizeof *th);
    th[np] = noise;
    return th;
}

/* n inputs with spacings of mean h, at least h/2 (exponential + h/2) (unsorted: shuffled), a few
 * exact repeats and a few missing y; y a smooth signal plus noise. */
static void make_data(tu_rng *r, size_t n, double h, double *x, double *y)
{
    double t = 0.3;
    for (size_t i = 0; i < n; i++) {
        t += h * (0.5 - 0.5 * log(1.0 - tu_uniform(r)));
        x[i] = t;
        y[i] = sin(2.0 * t) + 0.5 * cos(7.0 * t) + 0.3 * tu_normal(r);
    }
    for (size_t i = 5; i < n; i += 17)
        x[i] = x[i - 3]; /* repeated input: two observations of one state */
    for (size_t i = 7; i < n; i += 23)
        y[i] = NAN; /* a state without observation */
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(tu_uniform(r) * (double)(i + 1));
        double a = x[i], b = y[i];
        x[i] = x[j];
        y[i] = y[j];
        x[j] = a;
        y[j] = b;
    }
}

static const char *kernels[] = {
    "matern12(variance=1.3, lengthscale=0.7)",
    "matern32(variance=1.3, lengthscale=0.7)",
    "matern52(variance=0.9, lengthscale=1.1)",
    "quasiperiodic(variance=0.8, lengthscale=2.5, period=1.3, harmonics=3)",
    "matern32(variance=1.2, lengthscale=3) + quasiperiodic(variance=0.5, lengthscale=4, "
    "period=1, harmonics=2)",
    "matern52(variance=0.9, lengthscale=1.9) + matern12(variance=0.4, lengthscale=0.3)",
    "matern32(variance=1.1, lengthscale=2.0) * matern12(variance=0.8, lengthscale=1.7)",
    "(matern12(variance=0.7, lengthscale=1.1) + matern32(variance=0.3, lengthscale=0.4)) * "
    "matern52(variance=1.4, lengthscale=2.1)",
    /* with zero-process-noise factors (compared with the damped dense GP here) */
    "constant(variance=0.8)",
    "cosine(variance=1.0, period=2.1)",
    "periodic(variance=1.1, lengthscale=0.9, period=1.7, harmonics=2)",
    "matern32(variance=1.0, lengthscale=1.5) + periodic(variance=0.6, lengthscale=1.2, "
    "period=3.1, harmonics=3)",
    "periodic(variance=1.1, lengthscale=0.9, period=1.7, harmonics=2) * matern32(variance=0.6, "
    "lengthscale=1.5) + constant(variance=0.2)",
    "cosine(variance=1.0, period=0.8) * periodic(variance=0.7, lengthscale=1.2, period=2.1, "
    "harmonics=1)",
};
#define NKERN (sizeof kernels / sizeof kernels[0])

/* ---- loglik and prediction against the dense GP ------------------------------- */

/* Both factorisations (loop index: Cholesky, square-root form). */
START_TEST(test_loglik_and_predict_vs_dense)
{
    tu_rng r;
    tu_rng_seed(&r, 3);
    size_t n = 150;
    gmm_ssm_factor factor = _i ? GMM_SSM_FACTOR_ROWS : GMM_SSM_FACTOR_CHOL;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (size_t ik = 0; ik < NKERN; ik++) {
        make_data(&r, n, 0.2, x, y);
        gmm_kernel *k = tu_kernel_of(kernels[ik]);
        double *th = theta_of(k, 0.09);
        gmm_ssm *m = NULL;
        /* the model is exact for the damped kernel: compare with its dense GP,
         * at a damping that keeps rounding far below 1e-8 (the default
         * damping is tested against the undamped kernel below) */
        gmm_ssm_params par;
        gmm_ssm_params_init(&par);
        par.damp_rel = 1e-4;
        par.factor = factor;
        ck_assert_int_eq(tu_ssm_alloc(k, x, y, n, &par, &m), GMM_OK);
        double ll;
        gmm_status st = tu_ssm_loglik(m, th, &ll, NULL);
        ck_assert_int_eq(gmm_ssm_used_rows(m), factor == GMM_SSM_FACTOR_ROWS);
        ck_assert_msg(st == GMM_OK, "%s: %s", kernels[ik], gmm_error_message());
        double damp = gmm_ssm_damp(m);
        dense_gp g = dense_fit(k, th, damp, x, y, n);
        double e = fabs(ll - g.loglik) / fabs(g.loglik);
        ck_assert_msg(e < 1e-8, "%s: ssm %.15g dense %.15g rel %g", kernels[ik], ll, g.loglik, e);
        ck_assert_uint_eq(gmm_ssm_nobs(m), g.m);

        /* posterior of f: at inputs, between them, beyond both ends */
        double xmax = x[0], xmin = x[0];
        for (size_t i = 0; i < n; i++) {
            xmax = fmax(xmax, x[i]);
            xmin = fmin(xmin, x[i]);
        }
        /* two inputs, a midpoint (>= 0.05 from inputs), before and beyond the data */
        double xq[8] = {x[0], x[11], 0.0, xmin - 0.05, xmin - 1.3, xmax + 0.05, xmax + 1.7,
                        x[11]};
        double nb = INFINITY;
        for (size_t i = 0; i < n; i++)
            if (x[i] > x[11] && x[i] - x[11] < nb)
                nb = x[i] - x[11];
        xq[2] = x[11] + 0.5 * nb;
        double mean[8], var[8], k0 = gmm_kernel_cov(k, th, damp, 0.0);
        st = tu_ssm_predict(m, th, xq, 8, mean, var);
        ck_assert_msg(st == GMM_OK, "%s predict: %s", kernels[ik], gmm_error_message());
        for (size_t q = 0; q < 8; q++) {
            double dm, dv;
            dense_predict(&g, k, th, damp, xq[q], &dm, &dv);
            ck_assert_msg(fabs(mean[q] - dm) < 1e-8 * sqrt(k0) && fabs(var[q] - dv) < 1e-8 * k0,
                          "%s predict at %g: mean %.12g vs %.12g, var %.12g vs %.12g",
                          kernels[ik], xq[q], mean[q], dm, var[q], dv);
        }
        dense_free(&g);
        gmm_ssm_free(m);
        free(th);
        gmm_kernel_free(k);
    }
    free(x);
    free(y);
}
END_TEST

START_TEST(test_layout)
{
    gmm_kernel *k = tu_kernel_of("matern32(variance=1, lengthscale=1)");
    /* decimal years on a weekly grid: float noise in the differences must not
     * multiply the cached intervals */
    size_t n = 400;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) {
        x[i] = 1958.2 + (double)i * 7.0 / 365.0;
        y[i] = (i % 9 == 0) ? NAN : sin(x[i]);
    }
    x[17] = x[16];
    gmm_ssm *m = NULL;
    ck_assert_int_eq(tu_ssm_alloc(k, x, y, n, NULL, &m), GMM_OK);
    ck_assert_uint_eq(gmm_ssm_nstates(m), n - 1);
    ck_assert_uint_eq(gmm_ssm_nintervals(m), 2); /* one week, and two (the repeat) */
    ck_assert_uint_eq(gmm_ssm_nmerged(m), 0);
    ck_assert_uint_eq(gmm_ssm_dim(m), 2);
    ck_assert_uint_eq(gmm_ssm_bandwidth(m), 3);
    ck_assert_uint_eq(gmm_ssm_row_state(m, 17), gmm_ssm_row_state(m, 16));
    ck_assert_uint_eq(tu_ssm_nparam(m), 3);
    ck_assert_str_eq(tu_ssm_param_name(m, 2), "likelihood.variance");
    gmm_ssm_free(m);
    /* independent blocks narrow the band to d - 1 + (largest block) */
    const struct {
        const char *spec;
        size_t d, bw;
    } blocks[] = {
        {"matern32 + quasiperiodic(period=1, harmonics=2)", 6, 7},
        {"matern12 + matern12 + constant", 3, 3},
        {"cosine(period=0.8) * periodic(period=2.1, harmonics=1)", 8, 11},
        {"matern52 * cosine", 6, 11},
    };
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        gmm_kernel *kb = tu_kernel_of(blocks[b].spec);
        for (size_t i = 0; i < gmm_kernel_nparam(kb); i++)
            gmm_kernel_values(kb)[i] = 1.0;
        ck_assert_int_eq(tu_ssm_alloc(kb, x, y, n, NULL, &m), GMM_OK);
        ck_assert_uint_eq(gmm_ssm_dim(m), blocks[b].d);
        ck_assert_msg(gmm_ssm_bandwidth(m) == blocks[b].bw, "%s: bandwidth %zu", blocks[b].spec,
                      gmm_ssm_bandwidth(m));
        gmm_ssm_free(m);
        gmm_kernel_free(kb);
    }
    /* a single state */
    double x1[3] = {2.0, 2.0, 2.0}, y1[3] = {1.0, NAN, 0.5};
    ck_assert_int_eq(tu_ssm_alloc(k, x1, y1, 3, NULL, &m), GMM_OK);
    ck_assert_uint_eq(gmm_ssm_nstates(m), 1);
    ck_assert_uint_eq(gmm_ssm_bandwidth(m), 1);
    double th[3] = {1.0, 1.0, 0.5}, ll, g[3];
    ck_assert_int_eq(tu_ssm_loglik(m, th, &ll, g), GMM_OK);
    /* y ~ N(0, [[1.5, 1], [1, 1.5]]) */
    double det = 1.5 * 1.5 - 1.0, q = (1.5 * 1.0 - 2.0 * 0.5 + 1.5 * 0.25) / det;
    ck_assert(fabs(ll - (-0.5 * q - 0.5 * log(det) - log(2.0 * M_PI))) < 1e-14);
    gmm_ssm_free(m);
    free(x);
    free(y);
    gmm_kernel_free(k);
}
END_TEST

/* ---- gradient ------------------------------------------------------------------ */

typedef struct {
    gmm_ssm *m;
    double *th;
} fd_ctx;

static double fd_f(fd_ctx *c)
{
    double ll;
    ck_assert_int_eq(tu_ssm_loglik(c->m, c->th, &ll, NULL), GMM_OK);
    return ll;
}

/* Every gradient entry of m at th against 4th-order central differences at
 * steps h and h/2; their gap estimates the difference's own error
 * (truncation, and the rounding noise of the loglik) and widens the
 * tolerance by it. */
static void check_grad_fd_tol(gmm_ssm *m, double *th, const char *label, double rtol)
{
    size_t np = tu_ssm_nparam(m);
    double *g = malloc(np * sizeof *g), ll;
    ck_assert_int_eq(tu_ssm_loglik(m, th, &ll, g), GMM_OK);
    fd_ctx c = {m, th};
    for (size_t j = 0; j < np; j++) {
        double fdh[2];
        for (int k2 = 0; k2 < 2; k2++) {
            double save = th[j], h = (k2 ? 1e-4 : 2e-4) * save, f[4], off[4] = {-2, -1, 1, 2};
            for (int s2 = 0; s2 < 4; s2++) {
                th[j] = save + off[s2] * h;
                f[s2] = fd_f(&c);
            }
            th[j] = save;
            fdh[k2] = (f[0] - 8.0 * f[1] + 8.0 * f[2] - f[3]) / (12.0 * h);
        }
        double fd = fdh[1], tol = rtol * fmax(fabs(fd), 1.0) + 2.0 * fabs(fdh[0] - fdh[1]);
        if (getenv("GMM_TEST_REPORT"))
            fprintf(stderr, "%s d/d%s: |analytic - fd| / max(|fd|, 1) = %.2g\n", label,
                    tu_ssm_param_name(m, j), fabs(g[j] - fd) / fmax(fabs(fd), 1.0));
        ck_assert_msg(fabs(g[j] - fd) < tol, "%s d/d%s: %.12g vs fd %.12g", label,
                      tu_ssm_param_name(m, j), g[j], fd);
    }
    free(g);
}

static void check_grad_fd(gmm_ssm *m, double *th, const char *label)
{
    check_grad_fd_tol(m, th, label, 1e-6);
}

START_TEST(test_gradient_fd)
{
    tu_rng r;
    tu_rng_seed(&r, 5 + 1000 * (uint64_t)_i);
    size_t n = 60;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (size_t ik = 0; ik < NKERN; ik++) {
        make_data(&r, n, 0.4, x, y);
        gmm_kernel *k = tu_kernel_of(kernels[ik]);
        double *th = theta_of(k, 0.11);
        gmm_ssm *m = NULL;
        gmm_ssm_params par;
        gmm_ssm_params_init(&par);
        par.damp_rel = 1e-3; /* well-conditioned damped model: clean differences */
        par.factor = _i ? GMM_SSM_FACTOR_ROWS : GMM_SSM_FACTOR_CHOL;
        ck_assert_int_eq(tu_ssm_alloc(k, x, y, n, &par, &m), GMM_OK);
        check_grad_fd(m, th, kernels[ik]);
        gmm_ssm_free(m);
        free(th);
        gmm_kernel_free(k);
    }
    free(x);
    free(y);
}
END_TEST

/* The assembly and its reverse group the states by the pair of intervals
 * around them (one long run for the interior of a regular grid): gradients
 * on grids with few distinct intervals -- regular, regular with gaps and a
 * repeat (runs of several lengths), two states, one state -- against finite
 * differences, for every kernel. */
START_TEST(test_gradient_fd_grids)
{
    tu_rng r;
    tu_rng_seed(&r, 8);
    size_t n = 50;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (size_t ik = 0; ik < NKERN; ik++) {
        gmm_kernel *k = tu_kernel_of(kernels[ik]);
        double *th = theta_of(k, 0.11);
        for (int grid = 0; grid < 4; grid++) {
            size_t nn = grid == 2 ? 3 : grid == 3 ? 2 : n;
            double t = 0.25;
            for (size_t i = 0; i < nn; i++) {
                /* grid 1: gaps of two and three steps after rows 9 and 30 */
                t += 0.35 * (grid == 1 && i == 10 ? 2.0 : grid == 1 && i == 31 ? 3.0 : 1.0);
                x[i] = t;
                y[i] = sin(2.0 * t) + 0.3 * tu_normal(&r);
            }
            if (grid == 1) {
                x[20] = x[19]; /* two observations of one state */
                y[4] = y[27] = NAN;
            }
            if (grid == 2)
                x[1] = x[2] = x[0]; /* one state */
            gmm_ssm *m = NULL;
            gmm_ssm_params par;
            gmm_ssm_params_init(&par);
            par.damp_rel = 1e-3;
            ck_assert_int_eq(tu_ssm_alloc(k, x, y, nn, &par, &m), GMM_OK);
            ck_assert_uint_eq(gmm_ssm_nintervals(m), grid == 0 ? 1 : grid == 1 ? 3
                                                                 : grid == 2 ? 0 : 1);
            char label[256];
            snprintf(label, sizeof label, "%s (grid %d)", kernels[ik], grid);
            check_grad_fd(m, th, label);
            gmm_ssm_free(m);
        }
        free(th);
        gmm_kernel_free(k);
    }
    free(x);
    free(y);
}
END_TEST

/* ---- the two hard cases ---------------------------------------------------------- */

/* y ~ N(0, K + noise I) (K: the kernel damped at rate damp, 0: undamped)
 * with the Cholesky factor computed here by plain
 * loops, not GSL's (whose BLAS calls round differently under each OpenBLAS
 * kernel): the data, and hence every measured error below, are the same
 * bits whatever OPENBLAS_CORETYPE is. */
static void draw_dense(const gmm_kernel *k, const double *th, double damp, const double *x,
                       double *y, size_t n, tu_rng *r)
{
    double noise = th[gmm_kernel_nparam(k)];
    double *L = malloc(n * n * sizeof *L), *z = malloc(n * sizeof *z); /* row-major, lower */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++) {
            double v = gmm_kernel_cov(k, th, damp, x[i] - x[j]) + (i == j ? noise : 0.0);
            for (size_t p = 0; p < j; p++)
                v -= L[i * n + p] * L[j * n + p];
            if (i == j) {
                ck_assert_msg(v > 0.0, "draw_dense: not positive definite at row %zu", i);
                L[i * n + i] = sqrt(v);
            } else {
                L[i * n + j] = v / L[j * n + j];
            }
        }
    for (size_t i = 0; i < n; i++)
        z[i] = tu_normal(r);
    for (size_t i = 0; i < n; i++) {
        double v = 0.0;
        for (size_t j = 0; j <= i; j++)
            v += L[i * n + j] * z[j];
        y[i] = v;
    }
    free(z);
    free(L);
}

/* Relative loglik error of the default model against the dense GP of the
 * UNDAMPED kernel (damp 0). */
static double err_vs_undamped(const char *spec, const double *x, size_t n, double noise_rel,
                              tu_rng *r, gmm_status *st)
{
    gmm_kernel *k = tu_kernel_of(spec);
    double *th = theta_of(k, noise_rel * gmm_kernel_cov(k, gmm_kernel_values_const(k), 0.0, 0.0));
    double *y = malloc(n * sizeof *y), ll;
    draw_dense(k, th, 0.0, x, y, n, r);
    dense_gp g = dense_fit(k, th, 0.0, x, y, n);
    gmm_ssm *m = NULL;
    ck_assert_int_eq(tu_ssm_alloc(k, x, y, n, NULL, &m), GMM_OK);
    *st = tu_ssm_loglik(m, th, &ll, NULL);
    double e = fabs(ll - g.loglik) / fabs(g.loglik);
    gmm_ssm_free(m);
    dense_free(&g);
    free(y);
    free(th);
    gmm_kernel_free(k);
    return e;
}

/* (a) Zero process noise: with the default damping the loglik agrees with
 * the dense GP of the undamped kernel to 1e-6 relative at n = 300 (noise
 * variance a hundredth and a tenth of the kernel variance; two data sets
 * each). */
START_TEST(test_zero_noise_vs_undamped_dense)
{
    const char *specs[] = {
        "constant(variance=1)",
        "cosine(variance=1, period=1.7)",
        "periodic(variance=1, lengthscale=1, period=1.7, harmonics=3)",
        "matern32(variance=1, lengthscale=3) + periodic(variance=0.6, lengthscale=1.2, "
        "period=3.1, harmonics=3)",
        "constant(variance=0.5) + matern52(variance=1, lengthscale=2)",
        "cosine(variance=1, period=1.3) * periodic(variance=1, lengthscale=1, period=2.9, "
        "harmonics=2)",
        "constant(variance=1) * cosine(variance=1, period=2.9)",
    };
    size_t n = 300;
    double *x = malloc(n * sizeof *x);
    tu_rng r;
    tu_rng_seed(&r, 21);
    for (size_t i = 0; i < n; i++)
        x[i] = 3.0 + 0.1 * (double)i + 0.03 * tu_uniform(&r);
    for (size_t is = 0; is < sizeof specs / sizeof specs[0]; is++)
        for (int rep = 0; rep < 4; rep++) {
            gmm_status st;
            double e = err_vs_undamped(specs[is], x, n, rep < 2 ? 0.01 : 0.1, &r, &st);
            ck_assert_msg(st == GMM_OK, "%s: %s", specs[is], gmm_error_message());
            ck_assert_msg(e < 1e-6, "%s: relative error %g vs the undamped dense GP", specs[is],
                          e);
        }
    /* products with a noisy factor are not damped at all (no bias) */
    gmm_kernel *k = tu_kernel_of("matern32(variance=1, lengthscale=2) * periodic(variance=1, "
                              "lengthscale=1, period=1.1, harmonics=2)");
    ck_assert(!gmm_kernel_damped(k) && !gmm_kernel_modulated(k));
    gmm_kernel_free(k);
    k = tu_kernel_of("(matern12 + cosine) * constant");
    ck_assert(gmm_kernel_damped(k) && gmm_kernel_modulated(k));
    gmm_kernel_free(k);
    free(x);
}
END_TEST

/* (b) Inputs close together: every kernel with a lengthscale agrees with the
 * dense GP to 1e-6 at dt/l = 1e-2 and far below (the automatic choice takes
 * the square-root form there), regular grids of n = 300, noise/variance 0.1
 * and 1; below the measured end (1e-10), or below the Cholesky's own limit
 * when the Cholesky is forced, the evaluation is refused with GMM_EDOM and a
 * message saying what to do.  (constant, cosine and periodic have no
 * lengthscale-driven conditioning: their floor is the damping bias of test
 * (a); see tests/bench/bench_ssm_accuracy.c, Table 2.) */
START_TEST(test_close_inputs)
{
    static const struct {
        const char *spec;
        double r;
    } cases[] = {
        {"matern12(variance=1, lengthscale=1)", 1e-2},
        {"matern12(variance=1, lengthscale=1)", 1e-7},
        {"matern32(variance=1, lengthscale=1)", 1e-2},
        {"matern32(variance=1, lengthscale=1)", 1e-5},
        {"matern52(variance=1, lengthscale=1)", 1e-2},
        {"matern52(variance=1, lengthscale=1)", 1e-4},
        {"matern52(variance=1, lengthscale=1)", 1e-8},
        {"quasiperiodic(variance=1, lengthscale=1, period=0.7, harmonics=2)", 1e-2},
        {"quasiperiodic(variance=1, lengthscale=1, period=0.7, harmonics=2)", 1e-6},
        {"matern32(variance=1, lengthscale=1) + quasiperiodic(variance=0.5, lengthscale=1, "
         "period=0.3, harmonics=2)", 1e-2},
        {"matern32(variance=1, lengthscale=1) * matern12(variance=1, lengthscale=1)", 1e-2},
        {"matern52(variance=1, lengthscale=1) * matern32(variance=1, lengthscale=1)", 1e-2},
        {"matern52(variance=1, lengthscale=1) * matern32(variance=1, lengthscale=1)", 1e-6},
        {"matern32(variance=1, lengthscale=1) * periodic(variance=1, lengthscale=1, "
         "period=0.5, harmonics=2)", 1e-2},
        {"matern32(variance=1, lengthscale=1) * periodic(variance=1, lengthscale=1, "
         "period=0.5, harmonics=2)", 1e-5},
    };
    size_t n = 300;
    double *x = malloc(n * sizeof *x);
    tu_rng r;
    tu_rng_seed(&r, 23);
    for (size_t ic = 0; ic < sizeof cases / sizeof cases[0]; ic++) {
        for (size_t i = 0; i < n; i++)
            x[i] = 10.0 + (double)i * cases[ic].r;
        for (int rep = 0; rep < 2; rep++) {
            gmm_status st;
            double e = err_vs_undamped(cases[ic].spec, x, n, rep ? 1.0 : 0.1, &r, &st);
            ck_assert_msg(st == GMM_OK, "%s at dt/l=%g: %s", cases[ic].spec, cases[ic].r,
                          gmm_error_message());
            ck_assert_msg(e < 1e-6, "%s at dt/l=%g: relative error %g", cases[ic].spec,
                          cases[ic].r, e);
        }
    }
    /* below the limits: refused, never a wrong number */
    static const struct {
        const char *spec;
        double r;
        gmm_ssm_factor factor;
    } refused[] = {
        {"matern52(variance=1, lengthscale=1)", 5e-11, GMM_SSM_FACTOR_AUTO},
        {"matern12(variance=1, lengthscale=2) + matern52(variance=1, lengthscale=1)", 5e-11,
         GMM_SSM_FACTOR_ROWS},
        {"matern52(variance=1, lengthscale=1)", 1e-2, GMM_SSM_FACTOR_CHOL},
        {"matern32(variance=1, lengthscale=1)", 2e-4, GMM_SSM_FACTOR_CHOL},
        {"matern32(variance=1, lengthscale=1) * cosine(variance=1, period=1)", 1.5e-3,
         GMM_SSM_FACTOR_CHOL},
    };
    double *y = malloc(n * sizeof *y), ll;
    for (size_t ic = 0; ic < sizeof refused / sizeof refused[0]; ic++) {
        gmm_kernel *k = tu_kernel_of(refused[ic].spec);
        double *th = theta_of(k, 0.1);
        for (size_t i = 0; i < n; i++) {
            x[i] = 10.0 + (double)i * refused[ic].r;
            y[i] = sin(x[i]);
        }
        gmm_ssm *m = NULL;
        gmm_ssm_params par;
        gmm_ssm_params_init(&par);
        par.factor = refused[ic].factor;
        ck_assert_int_eq(tu_ssm_alloc(k, x, y, n, &par, &m), GMM_OK);
        ck_assert_int_eq(tu_ssm_loglik(m, th, &ll, NULL), GMM_EDOM);
        ck_assert_msg(strstr(gmm_error_message(), "accuracy limit")
                          && strstr(gmm_error_message(), "lengthscale below")
                          && strstr(gmm_error_message(), "merge tolerance"),
                      "%s", gmm_error_message());
        /* a lengthscale short enough for this spacing is accepted */
        for (size_t i = 0; i < gmm_kernel_nparam(k); i++)
            if (strstr(gmm_kernel_param_name(k, i), "lengthscale"))
                th[i] *= refused[ic].factor == GMM_SSM_FACTOR_CHOL ? 0.25 * refused[ic].r / 2e-2
                                                                   : 0.1;
        ck_assert_msg(tu_ssm_loglik(m, th, &ll, NULL) == GMM_OK, "%s", gmm_error_message());
        gmm_ssm_free(m);
        free(th);
        gmm_kernel_free(k);
    }
    free(x);
    free(y);
}
END_TEST

/* GRADIENT (ssm.h): against the dense GP's analytic gradient on regular
 * grids of n = 200, dt from 1e-1 down to 1e-6 of the lengthscale, every
 * kind of kernel, noise a tenth of the variance, y drawn from the dense GP:
 * relative error of max(|g|, 1) at most 1e-6 (the target down to
 * dt/l = 1e-4, 1e-4 below).  Measured worst 8.8e-9 (matern52 at dt/l = 0.1
 * with the Cholesky forced), 4.8e-9 in the square-root form (matern52 at
 * dt/l = 1e-4 .. 1e-5, where the log likelihood's own rounding is ~6e-10
 * relative), below 3e-10 for the other kernels -- the same bits under
 * OPENBLAS_CORETYPE Prescott and this CPU's kernels (nothing here goes
 * through BLAS).  The automatic
 * choice takes the square-root form (ROWS GRADIENT in ssm_prior.c) for all
 * but the widest spacings; those, and the Cholesky forced at an ordinary
 * spacing, keep the old chain with its rounding bound below
 * GMM_SSM_CHOL_GRAD_TOL.  Below the square-root form's limit (1e-10) and
 * below the Cholesky's when it is forced, a gradient is refused with its
 * log likelihood. */
START_TEST(test_gradient_vs_dense_gp)
{
    static const struct {
        const char *spec;
        double r;
        gmm_ssm_factor factor;
    } cases[] = {
        {"matern12(variance=1, lengthscale=1)", 1e-1, GMM_SSM_FACTOR_AUTO},
        {"matern12(variance=1, lengthscale=1)", 1e-6, GMM_SSM_FACTOR_AUTO},
        {"matern32(variance=1, lengthscale=1)", 1e-1, GMM_SSM_FACTOR_CHOL},
        {"matern32(variance=1, lengthscale=1)", 1e-2, GMM_SSM_FACTOR_AUTO},
        {"matern32(variance=1, lengthscale=1)", 1e-3, GMM_SSM_FACTOR_AUTO},
        {"matern32(variance=1, lengthscale=1)", 1e-4, GMM_SSM_FACTOR_AUTO},
        {"matern32(variance=1, lengthscale=1)", 1e-6, GMM_SSM_FACTOR_AUTO},
        {"matern52(variance=1, lengthscale=1)", 1e-1, GMM_SSM_FACTOR_CHOL},
        {"matern52(variance=1, lengthscale=1)", 1e-2, GMM_SSM_FACTOR_AUTO},
        {"matern52(variance=1, lengthscale=1)", 1e-3, GMM_SSM_FACTOR_AUTO},
        {"matern52(variance=1, lengthscale=1)", 1e-4, GMM_SSM_FACTOR_AUTO},
        {"matern52(variance=1, lengthscale=1)", 1e-5, GMM_SSM_FACTOR_AUTO},
        {"matern52(variance=1, lengthscale=1)", 1e-6, GMM_SSM_FACTOR_AUTO},
        {"quasiperiodic(variance=1, lengthscale=1, period=0.7, harmonics=2)", 1e-5,
         GMM_SSM_FACTOR_AUTO},
        {"matern32(variance=1, lengthscale=1) + quasiperiodic(variance=0.5, lengthscale=1, "
         "period=0.3, harmonics=2)", 1e-3, GMM_SSM_FACTOR_AUTO},
        {"matern52(variance=1, lengthscale=1) * matern32(variance=1, lengthscale=1)", 1e-4,
         GMM_SSM_FACTOR_AUTO},
        {"matern32(variance=1, lengthscale=1) * periodic(variance=1, lengthscale=1, period=0.5, "
         "harmonics=2)", 1e-6, GMM_SSM_FACTOR_AUTO},
        /* damped (the rounding that grew like K^2 / damp_rel is gone) and
         * demodulated */
        {"matern32(variance=1, lengthscale=3) + periodic(variance=0.6, lengthscale=1.2, "
         "period=3.1, harmonics=3)", 3e-2, GMM_SSM_FACTOR_AUTO},
        {"(matern12(variance=1, lengthscale=1) + cosine(variance=1, period=1.1)) * "
         "constant(variance=1)", 1e-2, GMM_SSM_FACTOR_AUTO},
    };
    size_t n = 200;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), worst_all = 0.0;
    tu_rng r;
    tu_rng_seed(&r, 41);
    for (size_t ic = 0; ic < sizeof cases / sizeof cases[0]; ic++) {
        gmm_kernel *k = tu_kernel_of(cases[ic].spec);
        double *th = theta_of(k, 0.1 * gmm_kernel_cov(k, gmm_kernel_values_const(k), 0.0, 0.0));
        size_t np = gmm_kernel_nparam(k);
        double g[16], gd[16], ll;
        for (size_t i = 0; i < n; i++)
            x[i] = 10.0 + (double)i * cases[ic].r;
        gmm_ssm_params par;
        gmm_ssm_params_init(&par);
        par.factor = cases[ic].factor;
        gmm_ssm *m = NULL;
        ck_assert_int_eq(gmm_ssm_alloc(k, x, n, &par, &m), GMM_OK);
        double damp = gmm_ssm_damp(m);
        draw_dense(k, th, damp, x, y, n, &r); /* the damped kernel: the model is exact for it */
        ck_assert_int_eq(gmm_ssm_set_y(m, y), GMM_OK);
        gmm_status st = tu_ssm_loglik(m, th, &ll, g);
        ck_assert_msg(st == GMM_OK, "%s at dt/l %g: %s", cases[ic].spec, cases[ic].r,
                      gmm_error_message());
        ck_assert_int_eq(tu_dense_grad(k, th, th[np], damp, x, y, n, gd, NULL), 0);
        double worst = 0.0;
        for (size_t p = 0; p <= np; p++)
            worst = fmax(worst, fabs(g[p] - gd[p]) / fmax(fabs(gd[p]), 1.0));
        worst_all = fmax(worst_all, worst);
        if (getenv("GMM_TEST_REPORT"))
            fprintf(stderr, "gradient vs dense GP %s at dt/l = %g (%s): %.2g\n", cases[ic].spec,
                    cases[ic].r, gmm_ssm_used_rows(m) ? "square-root" : "Cholesky", worst);
        ck_assert_msg(worst <= 1e-6, "%s at dt/l = %g: gradient error %.3g of max(|g|, 1)",
                      cases[ic].spec, cases[ic].r, worst);
        gmm_ssm_free(m);
        free(th);
        gmm_kernel_free(k);
    }
    /* refused with the log likelihood: below the square-root form's limit,
     * and below the Cholesky's when it is forced */
    static const struct {
        const char *spec;
        double r;
        gmm_ssm_factor factor;
    } refused[] = {
        {"matern52(variance=1, lengthscale=1)", 5e-11, GMM_SSM_FACTOR_AUTO},
        {"matern32(variance=1, lengthscale=1)", 2e-4, GMM_SSM_FACTOR_CHOL},
    };
    for (size_t ic = 0; ic < sizeof refused / sizeof refused[0]; ic++) {
        gmm_kernel *k = tu_kernel_of(refused[ic].spec);
        double *th = theta_of(k, 0.1), ll, g[4];
        for (size_t i = 0; i < n; i++) {
            x[i] = 10.0 + (double)i * refused[ic].r;
            y[i] = sin(1e3 * x[i]);
        }
        gmm_ssm_params par;
        gmm_ssm_params_init(&par);
        par.factor = refused[ic].factor;
        gmm_ssm *m = NULL;
        ck_assert_int_eq(tu_ssm_alloc(k, x, y, n, &par, &m), GMM_OK);
        ck_assert_int_eq(tu_ssm_loglik(m, th, &ll, g), GMM_EDOM);
        ck_assert_int_eq(tu_ssm_loglik(m, th, &ll, NULL), GMM_EDOM);
        ck_assert_msg(strstr(gmm_error_message(), "accuracy limit") &&
                          strstr(gmm_error_message(), "merge tolerance"),
                      "%s", gmm_error_message());
        gmm_ssm_free(m);
        free(th);
        gmm_kernel_free(k);
    }
    if (getenv("GMM_TEST_REPORT"))
        fprintf(stderr, "gradient vs dense GP: worst %.2g\n", worst_all);
    free(x);
    free(y);
}
END_TEST

/* The automatic choice: the Cholesky for well-spaced inputs, the
 * square-root form for close ones, damped kernels and a long smooth record
 * (large rounding bound); the two agree within the Cholesky's bound
 * wherever both run, and the bound is not exceeded.  With a gradient the
 * Cholesky is taken only below GMM_SSM_CHOL_GRAD_TOL. */
START_TEST(test_factor_choice)
{
    static const struct {
        const char *spec;
        double h, noise;
        int rows; /* expected automatic choice */
    } cases[] = {
        {"matern32(variance=1, lengthscale=1)", 0.1, 0.1, 0},
        {"matern52(variance=1, lengthscale=1)", 0.1, 0.01, 0}, /* a gradient: square-root */
        {"matern52(variance=1, lengthscale=1)", 0.015, 0.1, 1}, /* below 2e-2 */
        {"matern32(variance=1, lengthscale=1)", 0.005, 0.1, 1}, /* bound */
        {"cosine(variance=1, period=1.3) + matern32(variance=1, lengthscale=1)", 0.1, 0.1, 1},
        {"matern32(variance=400, lengthscale=20) + quasiperiodic(variance=2, lengthscale=90, "
         "period=1, harmonics=2)", 7.0 / 365.25, 0.1, 1}, /* the CO2 model, weekly */
    };
    size_t n = 400, grad_rows = 0;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    tu_rng r;
    tu_rng_seed(&r, 31);
    for (size_t ic = 0; ic < sizeof cases / sizeof cases[0]; ic++) {
        for (size_t i = 0; i < n; i++) {
            x[i] = 2.0 + (double)i * cases[ic].h;
            y[i] = sin(0.7 * x[i]) + 0.3 * tu_normal(&r);
        }
        gmm_kernel *k = tu_kernel_of(cases[ic].spec);
        double *th = theta_of(k, cases[ic].noise), ll[3], bound = 0.0;
        for (int f = 0; f < 3; f++) {
            gmm_ssm_params par;
            gmm_ssm_params_init(&par);
            par.factor = (gmm_ssm_factor)f;
            gmm_ssm *m = NULL;
            ck_assert_int_eq(tu_ssm_alloc(k, x, y, n, &par, &m), GMM_OK);
            gmm_status st = tu_ssm_loglik(m, th, &ll[f], NULL);
            if (f == GMM_SSM_FACTOR_CHOL && st == GMM_EDOM) {
                ll[f] = NAN; /* below the Cholesky's spacing limit */
            } else {
                ck_assert_msg(st == GMM_OK, "%s: %s", cases[ic].spec, gmm_error_message());
                ck_assert_int_eq(gmm_ssm_used_rows(m), f == GMM_SSM_FACTOR_AUTO
                                                           ? cases[ic].rows
                                                           : f == GMM_SSM_FACTOR_ROWS);
            }
            if (f == GMM_SSM_FACTOR_CHOL)
                bound = gmm_ssm_chol_bound(m);
            gmm_ssm_free(m);
        }
        ck_assert(ll[GMM_SSM_FACTOR_AUTO] ==
                  ll[cases[ic].rows ? GMM_SSM_FACTOR_ROWS : GMM_SSM_FACTOR_CHOL]);
        { /* with a gradient the Cholesky needs a bound below GMM_SSM_CHOL_GRAD_TOL */
            gmm_ssm *m = NULL;
            double g[16], lg;
            ck_assert_int_eq(tu_ssm_alloc(k, x, y, n, NULL, &m), GMM_OK);
            ck_assert_int_eq(tu_ssm_loglik(m, th, &lg, g), GMM_OK);
            int want = cases[ic].rows || bound > GMM_SSM_CHOL_GRAD_TOL;
            if (getenv("GMM_TEST_REPORT"))
                fprintf(stderr, "factor choice %s h %g: bound %.2g, with a gradient %s\n",
                        cases[ic].spec, cases[ic].h, bound, want ? "square-root" : "Cholesky");
            ck_assert_int_eq(gmm_ssm_used_rows(m), want);
            gmm_ssm_free(m);
            grad_rows += want && !cases[ic].rows;
        }
        if (!isnan(ll[GMM_SSM_FACTOR_CHOL]) && !gmm_kernel_damped(k))
            ck_assert_msg(fabs(ll[GMM_SSM_FACTOR_CHOL] - ll[GMM_SSM_FACTOR_ROWS]) <=
                              bound + 1e-12 * fabs(ll[GMM_SSM_FACTOR_ROWS]),
                          "%s: Cholesky %.15g, square-root %.15g, bound %g", cases[ic].spec,
                          ll[GMM_SSM_FACTOR_CHOL], ll[GMM_SSM_FACTOR_ROWS], bound);
        free(th);
        gmm_kernel_free(k);
    }
    ck_assert_uint_eq(grad_rows, 1); /* one case switches form for its gradient */
    free(x);
    free(y);
}
END_TEST

/* Merging near-ties within merge_tol: the count is reported, and the
 * loglik is exactly that of the dense GP with each merged input moved to
 * the first input of its group. */
START_TEST(test_merge_near_ties)
{
    size_t n = 120;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *xm = malloc(n * sizeof *xm);
    tu_rng r;
    tu_rng_seed(&r, 29);
    for (size_t i = 0; i < n; i++) {
        x[i] = 0.05 * (double)(i / 2) + ((i % 2) ? 1e-11 * (1.0 + tu_uniform(&r)) : 0.0);
        xm[i] = 0.05 * (double)(i / 2);
        y[i] = sin(3.0 * x[i]) + 0.1 * tu_normal(&r);
    }
    gmm_kernel *k = tu_kernel_of("matern52(variance=1, lengthscale=1)");
    double *th = theta_of(k, 0.05), ll;
    gmm_ssm *m = NULL;
    ck_assert_int_eq(tu_ssm_alloc(k, x, y, n, NULL, &m), GMM_OK);
    ck_assert_uint_eq(gmm_ssm_nmerged(m), 0);
    ck_assert_int_eq(tu_ssm_loglik(m, th, &ll, NULL), GMM_EDOM); /* 1e-11 apart: refused */
    gmm_ssm_free(m);
    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    par.merge_tol = 1e-10;
    ck_assert_int_eq(tu_ssm_alloc(k, x, y, n, &par, &m), GMM_OK);
    ck_assert_uint_eq(gmm_ssm_nmerged(m), n / 2);
    ck_assert_uint_eq(gmm_ssm_nstates(m), n / 2);
    ck_assert_int_eq(tu_ssm_loglik(m, th, &ll, NULL), GMM_OK);
    dense_gp g = dense_fit(k, th, 0.0, xm, y, n);
    ck_assert_msg(fabs(ll - g.loglik) < 1e-9 * fabs(g.loglik), "%g vs %g", ll, g.loglik);
    /* a query within merge_tol of an input is predicted at that input */
    double xq[2] = {x[1], x[1] + 0.025}, mean[2], var[2], dm, dv;
    ck_assert_int_eq(tu_ssm_predict(m, th, xq, 2, mean, var), GMM_OK);
    dense_predict(&g, k, th, 0.0, xm[1], &dm, &dv);
    ck_assert(fabs(mean[0] - dm) < 1e-8 && fabs(var[0] - dv) < 1e-8);
    dense_predict(&g, k, th, 0.0, xq[1], &dm, &dv);
    ck_assert(fabs(mean[1] - dm) < 1e-8 && fabs(var[1] - dv) < 1e-8);
    dense_free(&g);
    gmm_ssm_free(m);
    free(th);
    gmm_kernel_free(k);
    free(x);
    free(y);
    free(xm);
}
END_TEST

START_TEST(test_errors_and_objective)
{
    gmm_kernel *k =
        tu_kernel_of("matern32(variance=1, lengthscale=1) + cosine(variance=1, period=2)");
    double x[4] = {0.0, 1.0, 2.0, 3.0}, y[4] = {0.1, -0.2, NAN, 0.4};
    gmm_ssm *m = (gmm_ssm *)x;
    ck_assert_int_eq(tu_ssm_alloc(k, x, y, 0, NULL, &m), GMM_EINVAL);
    ck_assert_ptr_null(m);
    double xb[2] = {0.0, NAN}, yb[2] = {1.0, INFINITY};
    ck_assert_int_eq(tu_ssm_alloc(k, xb, y, 2, NULL, &m), GMM_EINVAL);
    ck_assert_uint_eq(gmm_error_index(), 1);
    ck_assert_int_eq(tu_ssm_alloc(k, x, yb, 2, NULL, &m), GMM_EINVAL);
    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    par.merge_tol = -1.0;
    ck_assert_int_eq(tu_ssm_alloc(k, x, y, 4, &par, &m), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "merge_tol") != NULL);

    ck_assert_int_eq(tu_ssm_alloc(k, x, y, 4, NULL, &m), GMM_OK);
    ck_assert_uint_eq(gmm_ssm_nobs(m), 3);
    double th[5] = {1.0, 1.0, 1.0, 2.0, 0.1}, ll, g[5];
    th[1] = -1.0;
    ck_assert_int_eq(tu_ssm_loglik(m, th, &ll, g), GMM_EDOM);
    ck_assert(strstr(gmm_error_message(), "0.matern32.lengthscale") != NULL);
    th[1] = 1.0;
    th[4] = 0.0;
    ck_assert_int_eq(tu_ssm_loglik(m, th, &ll, g), GMM_EDOM);
    ck_assert(strstr(gmm_error_message(), "likelihood.variance") != NULL);
    th[4] = 0.1;

    ck_assert_uint_eq(gmm_ssm_nparam(m), 4);
    ck_assert_str_eq(gmm_ssm_param_name(m, 3), "1.cosine.period");
    ck_assert_ptr_null(gmm_ssm_param_name(m, 4));
    ck_assert_int_eq(tu_ssm_loglik(m, th, &ll, g), GMM_OK);
    gmm_ssm_free(m);
    gmm_kernel_free(k);
}
END_TEST

/* Out of memory anywhere from the kernel to a prediction: every failing
 * allocation gives GMM_ENOMEM and a clean return (leaks are caught by the
 * sanitizer build). */
START_TEST(test_out_of_memory_sweep)
{
    double x[6] = {0.0, 0.4, 0.4, 1.1, 1.5, 2.2}, y[6] = {0.3, -0.1, 0.2, NAN, 0.5, -0.4};
    double xq[2] = {0.7, 3.0}, mean[2], var[2];
    int done = 0;
    for (long fail = 0; fail < 10000 && !done; fail++) {
        gmm_spec_node *s = NULL;
        gmm_kernel *k = NULL;
        gmm_ssm *m = NULL;
        double th[6] = {1.0, 0.8, 0.5, 1.0, 1.3, 0.1}, ll, g[6];
        gmm_alloc_fail_after(fail);
        gmm_status st = gmm_spec_parse("matern32(variance=1, lengthscale=0.8) + constant * "
                                       "cosine(period=1.3)",
                                       &s);
        if (!st)
            st = gmm_kernel_from_spec(s, &k);
        if (!st)
            st = tu_ssm_alloc(k, x, y, 6, NULL, &m);
        if (!st)
            st = tu_ssm_loglik(m, th, &ll, g);
        if (!st)
            st = tu_ssm_predict(m, th, xq, 2, mean, var);
        gmm_alloc_fail_after(-1);
        ck_assert_msg(st == GMM_OK || st == GMM_ENOMEM, "fail after %ld: %s", fail,
                      gmm_error_message());
        done = st == GMM_OK;
        gmm_ssm_free(m);
        gmm_kernel_free(k);
        gmm_spec_free(s);
    }
    ck_assert(done);
}
END_TEST

extern Suite *model_ssm_suite(void);
Suite *model_ssm_suite(void)
{
    Suite *s = suite_create("model_ssm");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_layout);
    tcase_add_loop_test(tc, test_loglik_and_predict_vs_dense, 0, 2);
    tcase_add_loop_test(tc, test_gradient_fd, 0, 2);
    tcase_add_test(tc, test_gradient_fd_grids);
    tcase_add_test(tc, test_zero_noise_vs_undamped_dense);
    tcase_add_test(tc, test_close_inputs);
    tcase_add_test(tc, test_factor_choice);
    tcase_add_test(tc, test_gradient_vs_dense_gp);
    tcase_add_test(tc, test_merge_near_ties);
    tcase_add_test(tc, test_errors_and_objective);
    tcase_add_test(tc, test_out_of_memory_sweep);
    suite_add_tcase(s, tc);
    return s;
}
