/* test_latent.c -- the latent layer (latent.h) of both families: whitening
 * (W W' against a dense GSL inverse of the assembled Q and, for state-space
 * models, against the kernel's covariance; whiten_t as the transpose of
 * whiten; whiten_rev against finite differences), the prior and its reverse
 * mode, the demodulated observation rows and their reverse mode against
 * finite differences, prediction at data rows against a dense computation,
 * the prior's square root (G'G against the assembled Q, G against the
 * whitening's inverse, its reverse mode against finite differences, close
 * inputs, graphs without one).
 * GMM_TEST_REPORT=1 prints the measured errors. */
#include <check.h>
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/gmrf.h"
#include "gmm/graph.h"
#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/spec.h"
#include "gmm/ssm.h"
#include "support/testutil.h"
#include "support/tu_model.h"

#define EPS 2.220446049250313e-16

static int report(void) { return getenv("GMM_TEST_REPORT") != NULL; }

/* ---- the models -------------------------------------------------------------- */

/* Kernels for the state-space cases: blocks (sum with quasiperiodic), d = 3,
 * a product, damped demodulated oscillators (periodic alone), a damped
 * constant beside an undamped product. */
static const char *kernels[] = {
    "matern32(variance=1.2, lengthscale=1.5) + quasiperiodic(variance=0.5, lengthscale=3, "
    "period=1, harmonics=2)",
    "matern52(variance=0.9, lengthscale=1.1)",
    "matern12(variance=0.8, lengthscale=0.9) * cosine(variance=1.1, period=2.3)",
    "periodic(variance=1.1, lengthscale=0.9, period=1.3, harmonics=2)",
    "periodic(variance=0.7, lengthscale=1.2, period=1.7, harmonics=1) * matern32(variance=0.6, "
    "lengthscale=1.5) + constant(variance=0.2)",
};
#define NKERN (sizeof kernels / sizeof kernels[0])

/* n irregular inputs (spacings 0.15 .. 0.6, shuffled) with x[5] a repeat of
 * x[2]: n - 1 states. */
static void make_inputs(tu_rng *r, size_t n, double *x)
{
    double t = 0.4;
    for (size_t i = 0; i < n; i++) {
        t += 0.15 + 0.45 * tu_uniform(r);
        x[i] = t;
    }
    x[5] = x[2];
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(tu_uniform(r) * (double)(i + 1));
        double a = x[i];
        x[i] = x[j];
        x[j] = a;
    }
}

typedef struct {
    gmm_kernel *k;
    gmm_latent *l;
    size_t nx, N, np;
    double x[16];
    double *theta; /* the start values (nparam) */
    double damp;   /* of the model (gmm_kernel_cov of the regularised kernel) */
} ssm_case;

/* The case on inputs c->x (c->nx, one of them a repeat) already set;
 * damp_rel: 0 for the default damping of zero-noise factors. */
static void ssm_case_setup(ssm_case *c, const char *spec, double damp_rel)
{
    c->k = tu_kernel_of(spec);
    double y[16];
    for (size_t i = 0; i < c->nx; i++)
        y[i] = sin(3.0 * c->x[i]);
    ck_assert_int_eq(gmm_kernel_fill_defaults(c->k, c->x, y, c->nx, NULL), GMM_OK);
    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    if (damp_rel > 0.0)
        par.damp_rel = damp_rel;
    gmm_status st = gmm_latent_ssm_alloc(c->k, c->x, c->nx, &par, &c->l);
    ck_assert_msg(st == GMM_OK, "%s: %s", spec, gmm_error_message());
    gmm_ssm *m = NULL;
    ck_assert_int_eq(gmm_ssm_alloc(c->k, c->x, c->nx, &par, &m), GMM_OK);
    c->damp = gmm_ssm_damp(m);
    gmm_ssm_free(m);
    c->N = gmm_latent_dim(c->l);
    c->np = gmm_latent_nparam(c->l);
    c->theta = malloc(c->np * sizeof *c->theta);
    memcpy(c->theta, gmm_latent_param_start(c->l), c->np * sizeof *c->theta);
    ck_assert_uint_eq(c->N, (c->nx - 1) * gmm_kernel_dim(c->k));
}

/* On make_inputs' irregular inputs: every interval its own group. */
static void ssm_case_init(ssm_case *c, const char *spec, uint64_t seed, double damp_rel)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    memset(c, 0, sizeof *c);
    c->nx = 13;
    make_inputs(&r, c->nx, c->x);
    ssm_case_setup(c, spec, damp_rel);
}

/* A regular grid of spacing 0.35 (ten intervals in one group), a repeated
 * input, then two longer irregular intervals: groups with counts 10, 1, 1. */
static void ssm_case_grid(ssm_case *c, const char *spec, double damp_rel)
{
    memset(c, 0, sizeof *c);
    c->nx = 14;
    for (size_t i = 0; i < 11; i++)
        c->x[i] = 0.2 + 0.35 * (double)i;
    c->x[11] = c->x[4];
    c->x[12] = c->x[10] + 0.61;
    c->x[13] = c->x[12] + 0.83;
    ssm_case_setup(c, spec, damp_rel);
}

static void ssm_case_free(ssm_case *c)
{
    gmm_latent_free(c->l);
    gmm_kernel_free(c->k);
    free(c->theta);
}

/* A random graph on n nodes (a scrambled path plus chords, lengths in
 * [0.2, 3)) and one isolated node: n + 1 nodes. */
static gmm_graph *make_graph(tu_rng *r, size_t n, size_t chords)
{
    size_t m = (n - 1) + chords, ei[64], ej[64], p[64];
    double len[64];
    ck_assert(m <= 64 && n + 1 <= 64);
    for (size_t v = 0; v < n; v++)
        p[v] = v;
    for (size_t v = n; v-- > 1;) {
        size_t w = (size_t)(tu_uniform(r) * (double)(v + 1)), t = p[v];
        p[v] = p[w];
        p[w] = t;
    }
    size_t k = 0;
    for (size_t v = 0; v + 1 < n; v++, k++) {
        ei[k] = p[v];
        ej[k] = p[v + 1];
    }
    while (k < m) {
        size_t a = (size_t)(tu_uniform(r) * (double)n), b = (size_t)(tu_uniform(r) * (double)n);
        if (a == b)
            continue;
        ei[k] = p[a];
        ej[k++] = p[b];
    }
    for (k = 0; k < m; k++) {
        /* a repeated pair needs the same length: a function of the pair */
        size_t lo = ei[k] < ej[k] ? ei[k] : ej[k], hi = ei[k] ^ ej[k] ^ lo;
        len[k] = 0.2 + fmod(0.37 * (double)lo + 0.91 * (double)hi, 2.8);
    }
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(n + 1, m, ei, ej, len, NULL, NULL, &g), GMM_OK);
    return g;
}

static const char *graph_spec =
    "edge-ou(variance=0.8, lengthscale=1.3) + laplacian(precision=0.4, ridge=0.3)";

typedef struct {
    gmm_graph *g;
    gmm_spec_node *s;
    gmm_gmrf *m;
    gmm_latent *l;
    size_t N, np, nrows, row_node[32];
    double *theta;
} graph_case;

static void graph_case_init(graph_case *c, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    memset(c, 0, sizeof *c);
    c->g = make_graph(&r, 14, 9);
    ck_assert_int_eq(gmm_spec_parse(graph_spec, &c->s), GMM_OK);
    ck_assert_int_eq(gmm_gmrf_alloc(c->g, c->s, graph_spec, &c->m), GMM_OK);
    c->nrows = 20;
    for (size_t i = 0; i < c->nrows; i++)
        c->row_node[i] = (i * 7) % c->m->n;
    ck_assert_int_eq(gmm_latent_gmrf_alloc(c->m, c->nrows, c->row_node, &c->l), GMM_OK);
    c->N = gmm_latent_dim(c->l);
    c->np = gmm_latent_nparam(c->l);
    c->theta = malloc(c->np * sizeof *c->theta);
    memcpy(c->theta, gmm_latent_param_start(c->l), c->np * sizeof *c->theta);
    ck_assert_uint_eq(c->N, 15);
    ck_assert_uint_eq(c->np, 4);
}

static void graph_case_free(graph_case *c)
{
    gmm_latent_free(c->l);
    gmm_gmrf_free(c->m);
    gmm_spec_free(c->s);
    gmm_graph_free(c->g);
    free(c->theta);
}

/* ---- dense oracles ------------------------------------------------------------- */

/* Q(theta) of l as a dense N x N (column-major, symmetric) and log|Q| of the
 * family (NAN for graphs). */
static double *dense_prior(gmm_latent *l, const double *theta, double *logdet)
{
    size_t N = gmm_latent_dim(l);
    gmm_band *Q = gmm_band_alloc(N, gmm_latent_bandwidth(l), 0, GMM_BAND_SYMMETRIC);
    gmm_status st = gmm_latent_prior(l, theta, Q, logdet);
    ck_assert_msg(st == GMM_OK, "prior: %s", gmm_error_message());
    double *D = tu_band_to_dense(Q);
    gmm_band_free(Q);
    return D;
}

/* Qinv (N x N) by GSL's dense Cholesky; *cond = the 2-norm condition
 * number of Q (eigenvalues), *logdet = log|Q|. */
static double *dense_inverse(const double *D, size_t N, double *cond, double *logdet)
{
    gsl_set_error_handler_off();
    gsl_matrix *M = gsl_matrix_alloc(N, N), *E = gsl_matrix_alloc(N, N);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            gsl_matrix_set(M, i, j, D[j * N + i]);
            gsl_matrix_set(E, i, j, D[j * N + i]);
        }
    gsl_vector *ev = gsl_vector_alloc(N);
    gsl_eigen_symm_workspace *w = gsl_eigen_symm_alloc(N);
    ck_assert_int_eq(gsl_eigen_symm(E, ev, w), GSL_SUCCESS);
    *cond = gsl_vector_max(ev) / gsl_vector_min(ev);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(M), GSL_SUCCESS);
    double ld = 0.0;
    for (size_t i = 0; i < N; i++)
        ld += 2.0 * log(gsl_matrix_get(M, i, i));
    *logdet = ld;
    ck_assert_int_eq(gsl_linalg_cholesky_invert(M), GSL_SUCCESS);
    double *Inv = malloc(N * N * sizeof *Inv);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++)
            Inv[j * N + i] = gsl_matrix_get(M, i, j);
    gsl_eigen_symm_free(w);
    gsl_vector_free(ev);
    gsl_matrix_free(M);
    gsl_matrix_free(E);
    return Inv;
}

/* S = W W' (N x N) with W's columns whitened unit vectors (after the setup). */
static double *dense_WWt(gmm_latent *l, size_t N)
{
    double *W = calloc(N * N, sizeof *W), *S = calloc(N * N, sizeof *S);
    for (size_t j = 0; j < N; j++) {
        double *col = W + j * N;
        col[j] = 1.0;
        ck_assert_int_eq(gmm_latent_whiten(l, col, col), GMM_OK); /* in place */
    }
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            double s = 0.0;
            for (size_t k = 0; k < N; k++)
                s += W[k * N + i] * W[k * N + j];
            S[j * N + i] = s;
        }
    free(W);
    return S;
}

/* ---- (1) W W' = Q^-1 ------------------------------------------------------------ */

/* max |W W' - Qinv| / max |Qinv| against GSL's inverse; the inverse itself
 * is accurate to about cond(Q) eps, so the bound is max(1e-10, 20 cond eps). */
static void check_wwt(gmm_latent *l, const double *theta, const char *what, double *err_out,
                      double *cond_out, double **S_out)
{
    size_t N = gmm_latent_dim(l);
    double ld_family, ld_dense, cond;
    double *D = dense_prior(l, theta, &ld_family);
    double *Inv = dense_inverse(D, N, &cond, &ld_dense);
    gmm_status st = gmm_latent_whiten_setup(l, theta);
    ck_assert_msg(st == GMM_OK, "%s: setup: %s", what, gmm_error_message());
    double *S = dense_WWt(l, N);
    double err = tu_max_rel_diff(S, Inv, N * N);
    double tol = fmax(1e-10, 20.0 * cond * EPS);
    if (report())
        fprintf(stderr, "latent W W' %-60.60s N %3zu cond %8.2e  err %8.2e (tol %8.2e)\n",
                what, N, cond, err, tol);
    ck_assert_msg(err < tol, "%s: W W' vs Q^-1: %g (cond %g)", what, err, cond);
    if (!isnan(ld_family))
        ck_assert_msg(fabs(ld_family - ld_dense) < 1e-9 * fmax(1.0, fabs(ld_dense)),
                      "%s: log|Q| %.15g vs dense %.15g", what, ld_family, ld_dense);
    *err_out = err;
    *cond_out = cond;
    if (S_out)
        *S_out = S;
    else
        free(S);
    free(D);
    free(Inv);
}

START_TEST(test_ssm_whiten_covariance)
{
    for (size_t ik = 0; ik < NKERN; ik++) {
        ssm_case c;
        ssm_case_init(&c, kernels[ik], 11 + ik, 0.0);
        double err, cond, *S;
        check_wwt(c.l, c.theta, kernels[ik], &err, &cond, &S);
        /* independent of cond(Q): cov(f_r, f_s) = h_r' (W W')_{rs} h_s against
         * the (regularised) kernel k(x_r - x_s) */
        size_t d = gmm_latent_obs_width(c.l), N = c.N;
        const size_t *off = gmm_latent_obs_offset(c.l);
        double *h = malloc(c.nx * d * sizeof *h), k0 = gmm_kernel_cov(c.k, c.theta, c.damp, 0.0);
        ck_assert_int_eq(gmm_latent_obs_coef(c.l, c.theta, h), GMM_OK);
        double kerr = 0.0;
        for (size_t r = 0; r < c.nx; r++)
            for (size_t s = 0; s < c.nx; s++) {
                double v = 0.0;
                for (size_t a = 0; a < d; a++)
                    for (size_t b = 0; b < d; b++)
                        v += h[r * d + a] * S[(off[s] + b) * N + off[r] + a] * h[s * d + b];
                double kv = gmm_kernel_cov(c.k, c.theta, c.damp, c.x[r] - c.x[s]);
                kerr = fmax(kerr, fabs(v - kv) / k0);
            }
        if (report())
            fprintf(stderr, "latent h' W W' h vs k(tau)  %-45.45s err %8.2e\n", kernels[ik],
                    kerr);
        ck_assert_msg(kerr < 1e-12, "%s: h' W W' h vs kernel: %g", kernels[ik], kerr);
        free(h);
        free(S);
        ssm_case_free(&c);
    }
}
END_TEST

START_TEST(test_graph_whiten_covariance)
{
    graph_case c;
    graph_case_init(&c, 5);
    double err, cond;
    check_wwt(c.l, c.theta, graph_spec, &err, &cond, NULL);
    graph_case_free(&c);
}
END_TEST

/* ---- (2) whiten_t is the transpose ------------------------------------------------ */

static void check_transpose(gmm_latent *l, const double *theta, const char *what, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    size_t N = gmm_latent_dim(l);
    double *v = malloc(N * sizeof *v), *g = malloc(N * sizeof *g), *x = malloc(N * sizeof *x);
    double *u = malloc(N * sizeof *u), *y = malloc(N * sizeof *y);
    ck_assert_int_eq(gmm_latent_whiten_setup(l, theta), GMM_OK);
    for (int rep = 0; rep < 5; rep++) {
        for (size_t i = 0; i < N; i++) {
            v[i] = tu_normal(&r);
            g[i] = tu_normal(&r);
        }
        ck_assert_int_eq(gmm_latent_whiten(l, v, x), GMM_OK);
        ck_assert_int_eq(gmm_latent_whiten_t(l, g, u), GMM_OK);
        double a = 0.0, b = 0.0, sa = 0.0, sb = 0.0;
        for (size_t i = 0; i < N; i++) {
            a += g[i] * x[i];
            b += u[i] * v[i];
            sa += fabs(g[i] * x[i]);
            sb += fabs(u[i] * v[i]);
        }
        double err = fabs(a - b) / fmax(fabs(a), 1e-3 * fmax(sa, sb));
        if (report() && rep == 0)
            fprintf(stderr, "latent g'(W v) - (W' g)'v   %-45.45s rel %8.2e\n", what, err);
        ck_assert_msg(err < 1e-12, "%s: g'Wv %.17g vs (W'g)'v %.17g (rel %g)", what, a, b, err);
        /* in place gives the same numbers */
        memcpy(y, v, N * sizeof *y);
        ck_assert_int_eq(gmm_latent_whiten(l, y, y), GMM_OK);
        ck_assert(memcmp(x, y, N * sizeof *y) == 0);
        memcpy(y, g, N * sizeof *y);
        ck_assert_int_eq(gmm_latent_whiten_t(l, y, y), GMM_OK);
        ck_assert(memcmp(u, y, N * sizeof *y) == 0);
        /* unwhiten inverts whiten: W^-1 (W v) = v to rounding */
        ck_assert_int_eq(gmm_latent_unwhiten(l, x, y), GMM_OK);
        double ue = 0.0, un = 0.0;
        for (size_t i = 0; i < N; i++) {
            ue = fmax(ue, fabs(y[i] - v[i]));
            un = fmax(un, fabs(v[i]));
        }
        ck_assert_msg(ue <= 1e-9 * un, "%s: W^-1 W v off by %g", what, ue);
    }
    free(v);
    free(g);
    free(x);
    free(u);
    free(y);
}

START_TEST(test_whiten_transpose)
{
    for (size_t ik = 0; ik < NKERN; ik++) {
        ssm_case c;
        ssm_case_init(&c, kernels[ik], 11 + ik, 0.0);
        check_transpose(c.l, c.theta, kernels[ik], 100 + ik);
        ssm_case_free(&c);
    }
    graph_case c;
    graph_case_init(&c, 5);
    check_transpose(c.l, c.theta, graph_spec, 99);
    graph_case_free(&c);
}
END_TEST

/* ---- (3) whiten_rev against finite differences ------------------------------------ */

typedef struct {
    gmm_latent *l;
    double *theta; /* perturbed by the FD helper */
    size_t N;
    const double *v, *xbar;
    double *x;
    gmm_band *Q;
    const gmm_band *Qbar;
    double ldbar;
    double *coef;
    const double *coefbar;
    const double *Gbar; /* N (kl + 1), for prior_rows_rev */
    const double *M;    /* N x N second moments E[x x'], for prior_rows_rev_moments */
    double *row;        /* kl + 1 */
    double mag; /* sum of |terms| of the last evaluation */
} fd_ctx;

static double whiten_fn(void *p)
{
    fd_ctx *c = p;
    ck_assert_int_eq(gmm_latent_whiten_setup(c->l, c->theta), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten(c->l, c->v, c->x), GMM_OK);
    double s = 0.0;
    c->mag = 0.0;
    for (size_t i = 0; i < c->N; i++) {
        s += c->xbar[i] * c->x[i];
        c->mag += fabs(c->xbar[i] * c->x[i]);
    }
    return s;
}

/* Fourth-order central differences (tu_fd_check4) per parameter at two
 * steps, 1e-3 and 2.5e-4 relative: the truncation error (O(h^4)) falls 256x
 * from the first to the second and the rounding error grows 4x, so a right
 * gradient agrees with one of them and a wrong one with neither (an
 * oscillating parameter -- a period, with phases 2 pi j t / period up to ~40
 * per unit of period here -- needs the smaller step).  The tolerance: 1e-7
 * relative, or the rounding estimate 4 eps mag / h of the differences when
 * larger (mag = sum of |terms| of the functional, which each evaluation of f
 * leaves in c->mag: a damped zero-noise factor puts ~1e10 into the prior's
 * entries), i.e. the absolute floor of tu_fd_check4 is that estimate / 1e-7
 * (and at least 1e-9 of the gradient's scale).  Returns the worst
 * parameter's better error. */
static double fd_tol_check(fd_ctx *c, size_t np, const double *grad, double (*f)(void *),
                           const char *what, const char *kind)
{
    double scale = 0.0, err = 0.0, steps[2] = {1e-3, 2.5e-4};
    size_t worst = 0;
    for (size_t i = 0; i < np; i++)
        scale = fmax(scale, fabs(grad[i]));
    f(c);
    double mag = c->mag;
    for (size_t i = 0; i < np; i++) {
        double e = INFINITY;
        for (int k = 0; k < 2; k++) {
            double h = steps[k] * fmax(1.0, fabs(c->theta[i]));
            double floor = fmax(1e-9 * scale, 4.0 * EPS * mag / h / 1e-7);
            e = fmin(e, tu_fd_check4(c->theta + i, 1, grad + i, f, c, steps[k], floor, NULL));
        }
        if (!(e <= err)) {
            err = e;
            worst = i;
        }
    }
    if (report())
        fprintf(stderr, "latent %-12s FD %-50.50s rel %8.2e (%s)\n", kind, what, err,
                gmm_latent_param_name(c->l, worst));
    ck_assert_msg(err < 1e-7, "%s: %s vs FD: %g at %s", what, kind, err,
                  gmm_latent_param_name(c->l, worst));
    return err;
}

static void check_whiten_rev(gmm_latent *l, double *theta, const char *what, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    size_t N = gmm_latent_dim(l), np = gmm_latent_nparam(l);
    double *v = malloc(N * sizeof *v), *xbar = malloc(N * sizeof *xbar);
    double *x = malloc(N * sizeof *x), *grad = malloc(np * sizeof *grad);
    for (size_t i = 0; i < N; i++) {
        v[i] = tu_normal(&r);
        xbar[i] = tu_normal(&r);
    }
    for (size_t i = 0; i < np; i++)
        grad[i] = 0.5; /* accumulated into */
    ck_assert_int_eq(gmm_latent_whiten_setup(l, theta), GMM_OK);
    gmm_status st = gmm_latent_whiten_rev(l, v, xbar, grad);
    ck_assert_msg(st == GMM_OK, "%s: whiten_rev: %s", what, gmm_error_message());
    for (size_t i = 0; i < np; i++)
        grad[i] -= 0.5;
    fd_ctx c = {.l = l, .theta = theta, .N = N, .v = v, .xbar = xbar, .x = x};
    fd_tol_check(&c, np, grad, whiten_fn, what, "whiten_rev");
    free(v);
    free(xbar);
    free(x);
    free(grad);
}

/* Damped kernels at the default damping (cond(Q) ~ 1e10) and at damp_rel =
 * 1e-3, where the prior's entries are small enough for a tight check. */
static const double dampings[2] = {0.0, 1e-3};

START_TEST(test_whiten_rev_fd)
{
    for (size_t ik = 0; ik < NKERN; ik++)
        for (int id = 0; id < 2; id++) {
            ssm_case c;
            ssm_case_init(&c, kernels[ik], 11 + ik, dampings[id]);
            if (id == 0 || gmm_kernel_damped(c.k))
                check_whiten_rev(c.l, c.theta, kernels[ik], 200 + ik);
            ssm_case_free(&c);
        }
    graph_case c;
    graph_case_init(&c, 5);
    check_whiten_rev(c.l, c.theta, graph_spec, 199);
    graph_case_free(&c);
}
END_TEST

/* whiten_rev of the last whiten's v and whiten_t's g (v, xbar NULL) against
 * whiten_rev given them: NULL without those calls since the setup is refused;
 * the calls' own arrays may change afterwards (whiten in place, then v
 * overwritten) and a whiten_rev given other vectors in between changes
 * nothing.  State-space models reuse the same recursions: equal to the bit;
 * graphs reuse whiten_t's solve for the reverse's, whose sums run in another
 * order: equal to rounding (n kl eps of the terms' size), and against finite
 * differences. */
static void check_whiten_rev_saved(gmm_latent *l, double *theta, const char *what,
                                   uint64_t seed, int exact)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    size_t N = gmm_latent_dim(l), np = gmm_latent_nparam(l);
    double *v = malloc(N * sizeof *v), *xbar = malloc(N * sizeof *xbar);
    double *x = malloc(N * sizeof *x), *u = malloc(N * sizeof *u);
    double *g0 = calloc(np, sizeof *g0), *g1 = calloc(np, sizeof *g1);
    double *g2 = calloc(np, sizeof *g2);
    for (size_t i = 0; i < N; i++) {
        v[i] = tu_normal(&r);
        xbar[i] = tu_normal(&r);
    }
    ck_assert_int_eq(gmm_latent_whiten_setup(l, theta), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_rev(l, v, xbar, g0), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_rev(l, NULL, xbar, g1), GMM_EINVAL);
    ck_assert_int_eq(gmm_latent_whiten_rev(l, v, NULL, g1), GMM_EINVAL);
    ck_assert_int_eq(gmm_latent_whiten(l, v, x), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_rev(l, v, NULL, g1), GMM_EINVAL);
    ck_assert_int_eq(gmm_latent_whiten_t(l, xbar, u), GMM_OK);
    /* a new setup forgets both */
    ck_assert_int_eq(gmm_latent_whiten_setup(l, theta), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_rev(l, NULL, xbar, g1), GMM_EINVAL);
    ck_assert_int_eq(gmm_latent_whiten_rev(l, v, NULL, g1), GMM_EINVAL);
    memcpy(x, v, N * sizeof *x);
    ck_assert_int_eq(gmm_latent_whiten(l, x, x), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_t(l, xbar, u), GMM_OK);
    for (size_t i = 0; i < N; i++)
        x[i] = u[i] = NAN;
    ck_assert_int_eq(gmm_latent_whiten_rev(l, NULL, NULL, g1), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_rev(l, xbar, v, g2), GMM_OK); /* other vectors */
    memset(g2, 0, np * sizeof *g2);
    ck_assert_int_eq(gmm_latent_whiten_rev(l, NULL, NULL, g2), GMM_OK);
    ck_assert(memcmp(g1, g2, np * sizeof *g1) == 0);
    /* one reused, the other given */
    memset(g2, 0, np * sizeof *g2);
    ck_assert_int_eq(gmm_latent_whiten_rev(l, NULL, xbar, g2), GMM_OK);
    ck_assert(memcmp(g0, g2, np * sizeof *g0) == 0);
    memset(g2, 0, np * sizeof *g2);
    ck_assert_int_eq(gmm_latent_whiten_rev(l, v, NULL, g2), GMM_OK);
    ck_assert(memcmp(g1, g2, np * sizeof *g1) == 0);
    double err = 0.0, scale = 0.0;
    for (size_t i = 0; i < np; i++) {
        err = fmax(err, fabs(g1[i] - g0[i]));
        scale = fmax(scale, fabs(g0[i]));
    }
    if (report())
        fprintf(stderr, "latent whiten_rev of the last whiten, whiten_t %-30.30s %8.2e\n", what,
                err / scale);
    if (exact)
        ck_assert_msg(memcmp(g0, g1, np * sizeof *g0) == 0, "%s: saved differs by %g", what,
                      err);
    else
        ck_assert_msg(err <= 1e-12 * scale, "%s: saved differs by %g of %g", what, err, scale);
    fd_ctx c = {.l = l, .theta = theta, .N = N, .v = v, .xbar = xbar, .x = x};
    fd_tol_check(&c, np, g1, whiten_fn, what, "whiten_rev saved");
    free(v);
    free(xbar);
    free(x);
    free(u);
    free(g0);
    free(g1);
    free(g2);
}

START_TEST(test_whiten_rev_saved)
{
    for (size_t ik = 0; ik < NKERN; ik++) {
        ssm_case c;
        ssm_case_init(&c, kernels[ik], 11 + ik, 0.0);
        check_whiten_rev_saved(c.l, c.theta, kernels[ik], 300 + ik, 1);
        ssm_case_free(&c);
    }
    graph_case c;
    graph_case_init(&c, 5);
    check_whiten_rev_saved(c.l, c.theta, graph_spec, 299, 0);
    graph_case_free(&c);
}
END_TEST

/* ---- (4) prior, observation rows, prediction ---------------------------------------- */

static double prior_fn(void *p)
{
    fd_ctx *c = p;
    double ld;
    ck_assert_int_eq(gmm_latent_prior(c->l, c->theta, c->Q, &ld), GMM_OK);
    double s = c->ldbar != 0.0 ? c->ldbar * ld : 0.0;
    c->mag = fabs(s);
    for (size_t j = 0; j < c->N; j++)
        for (size_t i = j; i <= j + c->Q->kl && i < c->N; i++) {
            double t = gmm_band_get(c->Qbar, i, j) * gmm_band_get(c->Q, i, j);
            s += t;
            c->mag += fabs(t);
        }
    return s;
}

/* sum over stored Qbar . Q(theta) + ldbar log|Q| (ldbar = 0 for graphs). */
static void check_prior_rev(gmm_latent *l, double *theta, int has_logdet, const char *what,
                            uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    size_t N = gmm_latent_dim(l), np = gmm_latent_nparam(l), kl = gmm_latent_bandwidth(l);
    gmm_band *Q = gmm_band_alloc(N, kl, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Qbar = gmm_band_alloc(N, kl, 0, GMM_BAND_SYMMETRIC);
    tu_band_fill_random(Qbar, &r);
    double ld, ldbar = has_logdet ? tu_normal(&r) : 0.0, *grad = malloc(np * sizeof *grad);
    for (size_t i = 0; i < np; i++)
        grad[i] = 0.25;
    ck_assert_int_eq(gmm_latent_prior(l, theta, Q, &ld), GMM_OK);
    ck_assert_int_eq(!isnan(ld), has_logdet);
    gmm_status st = gmm_latent_prior_rev(l, Qbar, ldbar, grad);
    ck_assert_msg(st == GMM_OK, "%s: prior_rev: %s", what, gmm_error_message());
    for (size_t i = 0; i < np; i++)
        grad[i] -= 0.25;
    if (!has_logdet) /* no log|Q| from this family: a logdetbar is refused */
        ck_assert_int_eq(gmm_latent_prior_rev(l, Qbar, 1.0, grad), GMM_EINVAL);
    fd_ctx c = {.l = l, .theta = theta, .N = N, .Q = Q, .Qbar = Qbar, .ldbar = ldbar};
    fd_tol_check(&c, np, grad, prior_fn, what, "prior_rev");
    free(grad);
    gmm_band_free(Q);
    gmm_band_free(Qbar);
}

START_TEST(test_prior_rev_fd)
{
    for (size_t ik = 0; ik < NKERN; ik++)
        for (int id = 0; id < 2; id++) {
            ssm_case c;
            ssm_case_init(&c, kernels[ik], 11 + ik, dampings[id]);
            if (id == 0 || gmm_kernel_damped(c.k))
                check_prior_rev(c.l, c.theta, 1, kernels[ik], 300 + ik);
            ssm_case_free(&c);
        }
    graph_case c;
    graph_case_init(&c, 5);
    check_prior_rev(c.l, c.theta, 0, graph_spec, 299);
    graph_case_free(&c);
}
END_TEST

static double coef_fn(void *p)
{
    fd_ctx *c = p;
    ck_assert_int_eq(gmm_latent_obs_coef(c->l, c->theta, c->coef), GMM_OK);
    size_t m = gmm_latent_nrows(c->l) * gmm_latent_obs_width(c->l);
    double s = 0.0;
    c->mag = 0.0;
    for (size_t i = 0; i < m; i++) {
        s += c->coefbar[i] * c->coef[i];
        c->mag += fabs(c->coefbar[i] * c->coef[i]);
    }
    return s;
}

START_TEST(test_obs_coef_rev_fd)
{
    const char *specs[] = {"periodic(period=1.3, harmonics=2)",
                           "matern32(variance=1.2, lengthscale=1.5) + periodic(variance=0.6, "
                           "lengthscale=1.2, period=3.1, harmonics=1)",
                           "matern12(variance=0.8, lengthscale=0.9) * cosine(variance=1.1, "
                           "period=2.3)"};
    const int varies[] = {1, 1, 0};
    for (size_t ik = 0; ik < 3; ik++) {
        ssm_case c;
        ssm_case_init(&c, specs[ik], 40 + ik, 0.0);
        ck_assert_int_eq(gmm_latent_obs_varies(c.l), varies[ik]);
        tu_rng r;
        tu_rng_seed(&r, 400 + ik);
        size_t m = c.nx * gmm_latent_obs_width(c.l);
        double *coef = malloc(m * sizeof *coef), *coefbar = malloc(m * sizeof *coefbar);
        double *grad = calloc(c.np, sizeof *grad);
        for (size_t i = 0; i < m; i++)
            coefbar[i] = tu_normal(&r);
        ck_assert_int_eq(gmm_latent_obs_coef(c.l, c.theta, coef), GMM_OK);
        ck_assert_int_eq(gmm_latent_obs_coef_rev(c.l, c.theta, coefbar, grad), GMM_OK);
        if (!varies[ik]) {
            for (size_t i = 0; i < c.np; i++)
                ck_assert(grad[i] == 0.0);
        } else {
            fd_ctx f = {.l = c.l, .theta = c.theta, .coef = coef, .coefbar = coefbar};
            fd_tol_check(&f, c.np, grad, coef_fn, specs[ik], "obs_coef_rev");
            /* the period moves the rows */
            size_t ip;
            ck_assert_int_eq(gmm_kernel_param_find(c.k, ik ? "1.periodic.period"
                                                           : "0.periodic.period", &ip),
                             GMM_OK);
            ck_assert(grad[ip] != 0.0);
        }
        free(coef);
        free(coefbar);
        free(grad);
        ssm_case_free(&c);
    }
}
END_TEST

/* f_r's mean and variance from a random mean and SPD covariance band,
 * against the dense e_r' mu and e_r' Sigma e_r, e_r the row's coefficients
 * scattered into a length-N vector. */
static void check_predict_rows(gmm_latent *l, const double *theta, const char *what,
                               uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    size_t N = gmm_latent_dim(l), nr = gmm_latent_nrows(l), w = gmm_latent_obs_width(l);
    gmm_band *cov = gmm_band_alloc(N, gmm_latent_cov_bandwidth(l), 0, GMM_BAND_SYMMETRIC);
    tu_band_fill_spd(cov, &r);
    double *mu = malloc(N * sizeof *mu), *fm = malloc(nr * sizeof *fm);
    double *fv = malloc(nr * sizeof *fv), *coef = malloc(nr * w * sizeof *coef);
    double *e = malloc(N * sizeof *e);
    for (size_t i = 0; i < N; i++)
        mu[i] = tu_normal(&r);
    ck_assert_int_eq(gmm_latent_predict_rows(l, theta, mu, cov, fm, fv), GMM_OK);
    ck_assert_int_eq(gmm_latent_obs_coef(l, theta, coef), GMM_OK);
    double *D = tu_band_to_dense(cov), err = 0.0;
    const size_t *off = gmm_latent_obs_offset(l);
    for (size_t row = 0; row < nr; row++) {
        memset(e, 0, N * sizeof *e);
        for (size_t a = 0; a < w; a++)
            e[off[row] + a] = coef[row * w + a];
        double m = 0.0, v = 0.0, sm = 0.0, sv = 0.0;
        for (size_t i = 0; i < N; i++) {
            m += e[i] * mu[i];
            sm += fabs(e[i] * mu[i]);
            for (size_t j = 0; j < N; j++) {
                v += e[i] * D[j * N + i] * e[j];
                sv += fabs(e[i] * D[j * N + i] * e[j]);
            }
        }
        err = fmax(err, fabs(fm[row] - m) / fmax(sm, 1e-300));
        err = fmax(err, fabs(fv[row] - v) / fmax(sv, 1e-300));
    }
    if (report())
        fprintf(stderr, "latent predict_rows %-50.50s rel %8.2e\n", what, err);
    ck_assert_msg(err < 1e-14, "%s: predict_rows vs dense: %g", what, err);
    free(D);
    free(e);
    free(mu);
    free(fm);
    free(fv);
    free(coef);
    gmm_band_free(cov);
}

START_TEST(test_predict_rows_dense)
{
    const char *specs[] = {"periodic(period=1.3, harmonics=2)", kernels[0], kernels[2]};
    for (size_t ik = 0; ik < 3; ik++) {
        ssm_case c;
        ssm_case_init(&c, specs[ik], 50 + ik, 0.0);
        /* away from the start values, where the constant rows were taken */
        for (size_t i = 0; i < c.np; i++)
            c.theta[i] *= 1.1;
        check_predict_rows(c.l, c.theta, specs[ik], 500 + ik);
        ssm_case_free(&c);
    }
    graph_case c;
    graph_case_init(&c, 5);
    check_predict_rows(c.l, c.theta, graph_spec, 499);
    graph_case_free(&c);
}
END_TEST

/* ---- (5) the prior's square root ------------------------------------------------- */

/* The rows of G as a dense N x N (row-major), checking the callback's
 * contract on the way (marglik.h: 1 <= width <= kl + 1, inside the matrix,
 * first columns nondecreasing); read twice, backwards then forwards, to
 * check that any order gives the same rows. */
static double *dense_rows(const gmm_prior_rows *G, size_t N, size_t kl, const char *what)
{
    double *D = calloc(N * N, sizeof *D), *v = malloc((kl + 1) * sizeof *v);
    double *D2 = calloc(N * N, sizeof *D2);
    ck_assert_uint_eq(G->nrows, N);
    for (int pass = 0; pass < 2; pass++) {
        double *M = pass ? D : D2;
        size_t last = 0;
        for (size_t t = 0; t < N; t++) {
            size_t i = pass ? t : N - 1 - t, first = SIZE_MAX;
            size_t w = G->row(G->ctx, i, &first, v);
            ck_assert_msg(w >= 1 && w <= kl + 1 && first + w <= N,
                          "%s: row %zu: width %zu from column %zu (kl %zu)", what, i, w, first,
                          kl);
            if (pass)
                ck_assert_msg(first >= last, "%s: row %zu starts before row %zu", what, i, i - 1);
            last = first;
            for (size_t j = 0; j < w; j++)
                M[i * N + first + j] = v[j];
        }
    }
    ck_assert_msg(memcmp(D, D2, N * N * sizeof *D) == 0, "%s: rows depend on the order read",
                  what);
    free(D2);
    free(v);
    return D;
}

/* G'G against the assembled Q (band -> dense), log|Q| against GSL's dense
 * Cholesky of Q (1e-9, as check_wwt), and G = W^-1 (G applied to x = W v
 * gives v back).  Tolerances: entry (i, j) of G'G sums at most 2d products,
 * so it rounds by ~2d eps (|G|'|G|)_ij, and the assembled Q (W + A'W A, the
 * same sum in exact arithmetic) by the same order: |G'G - Q|_ij /
 * (|G|'|G|)_ij must stay below 8 (kl + 1) eps, entries where |G|'|G| = 0
 * being exact zeros in both; G W v - v is measured per row against sum_j
 * |G_ij| |x_j| (the rounding of x = W v, ~eps |x|, meets |G|), below the
 * same bound.  The error over max |Q| is reported too. */
static void check_rows_gtg(gmm_latent *l, const double *theta, const char *what,
                           uint64_t seed, double *err_q, double *err_w)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    size_t N = gmm_latent_dim(l), kl = gmm_latent_bandwidth(l);
    double ld_family, ld_dense, ld_rows, cond;
    double *Qd = dense_prior(l, theta, &ld_family);
    double *Inv = dense_inverse(Qd, N, &cond, &ld_dense);
    gmm_prior_rows G;
    ck_assert_uint_eq(gmm_latent_prior_nrows(l), N);
    gmm_status st = gmm_latent_prior_rows(l, theta, &G, &ld_rows);
    ck_assert_msg(st == GMM_OK, "%s: prior_rows: %s", what, gmm_error_message());
    double *Gd = dense_rows(&G, N, kl, what);
    double e = 0.0, eq = 0.0, qmax = 0.0;
    for (size_t k = 0; k < N * N; k++)
        qmax = fmax(qmax, fabs(Qd[k]));
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            double s = 0.0, a = 0.0, q = Qd[j * N + i]; /* Qd column-major (symmetric) */
            for (size_t k = 0; k < N; k++) {
                s += Gd[k * N + i] * Gd[k * N + j];
                a += fabs(Gd[k * N + i] * Gd[k * N + j]);
            }
            if (a == 0.0) /* structural zeros are exact in both */
                ck_assert_msg(s == 0.0 && q == 0.0, "%s: Q(%zu, %zu) = %g, G'G %g", what, i, j,
                              q, s);
            else
                e = fmax(e, fabs(s - q) / a);
            eq = fmax(eq, fabs(s - q) / qmax);
        }
    /* G (W v) = v */
    double *v = malloc(N * sizeof *v), *x = malloc(N * sizeof *x), ew = 0.0;
    for (size_t i = 0; i < N; i++)
        v[i] = tu_normal(&r);
    ck_assert_int_eq(gmm_latent_whiten_setup(l, theta), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten(l, v, x), GMM_OK);
    for (size_t i = 0; i < N; i++) {
        double y = 0.0, a = 0.0;
        for (size_t j = 0; j < N; j++) {
            y += Gd[i * N + j] * x[j];
            a += fabs(Gd[i * N + j] * x[j]);
        }
        ew = fmax(ew, fabs(y - v[i]) / a);
    }
    double tol = 8.0 * (double)(kl + 1) * EPS;
    if (report())
        fprintf(stderr, "latent G'G vs Q %-42.42s cond %8.2e  G'G %8.2e (/max|Q| %8.2e)  "
                        "GWv %8.2e (tol %8.2e) logdet %8.2e\n",
                what, cond, e, eq, ew, tol, fabs(ld_rows - ld_dense) / fmax(1.0, fabs(ld_dense)));
    ck_assert_msg(e < tol, "%s: G'G vs Q: %g", what, e);
    ck_assert_msg(ew < tol, "%s: G W v vs v: %g", what, ew);
    ck_assert_msg(ld_rows == ld_family, "%s: log|Q| rows %.17g vs prior %.17g", what, ld_rows,
                  ld_family);
    ck_assert_msg(fabs(ld_rows - ld_dense) < 1e-9 * fmax(1.0, fabs(ld_dense)),
                  "%s: log|Q| %.15g vs dense %.15g", what, ld_rows, ld_dense);
    *err_q = e;
    *err_w = ew;
    free(v);
    free(x);
    free(Gd);
    free(Qd);
    free(Inv);
}

START_TEST(test_prior_rows_gtg)
{
    for (size_t ik = 0; ik < NKERN; ik++)
        for (int id = 0; id < 2; id++) {
            ssm_case c;
            ssm_case_init(&c, kernels[ik], 11 + ik, dampings[id]);
            if (id == 0 || gmm_kernel_damped(c.k)) {
                double eq, ew;
                check_rows_gtg(c.l, c.theta, kernels[ik], 600 + ik, &eq, &ew);
                /* and away from the start values */
                for (size_t i = 0; i < c.np; i++)
                    c.theta[i] *= 0.8 + 0.05 * (double)i;
                check_rows_gtg(c.l, c.theta, kernels[ik], 610 + ik, &eq, &ew);
            }
            ssm_case_free(&c);
            ssm_case_grid(&c, kernels[ik], dampings[id]);
            if (id == 0 || gmm_kernel_damped(c.k)) {
                double eq, ew;
                check_rows_gtg(c.l, c.theta, kernels[ik], 620 + ik, &eq, &ew);
            }
            ssm_case_free(&c);
        }
}
END_TEST

static double rows_fn(void *p)
{
    fd_ctx *c = p;
    gmm_prior_rows G;
    double ld;
    size_t ldg = gmm_latent_bandwidth(c->l) + 1, first;
    ck_assert_int_eq(gmm_latent_prior_rows(c->l, c->theta, &G, &ld), GMM_OK);
    double s = c->ldbar * ld;
    c->mag = fabs(s);
    for (size_t i = 0; i < G.nrows; i++) {
        size_t w = G.row(G.ctx, i, &first, c->row);
        for (size_t j = 0; j < w; j++) {
            double t = c->Gbar[i * ldg + j] * c->row[j];
            s += t;
            c->mag += fabs(t);
        }
    }
    return s;
}

/* sum over rows of Gbar . G_i(theta) + ldbar log|Q| against fd_tol_check's
 * fourth-order differences; Gbar random in every slot, those past a row's
 * width included (they must not be read). */
static double check_rows_rev(gmm_latent *l, double *theta, const char *what, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    size_t N = gmm_latent_dim(l), np = gmm_latent_nparam(l), ld = gmm_latent_bandwidth(l) + 1;
    double *Gbar = malloc(N * ld * sizeof *Gbar), *row = malloc(ld * sizeof *row);
    double *grad = malloc(np * sizeof *grad), ldbar = tu_normal(&r);
    for (size_t i = 0; i < N * ld; i++)
        Gbar[i] = tu_normal(&r);
    for (size_t i = 0; i < np; i++)
        grad[i] = 0.25; /* accumulated into */
    gmm_prior_rows G;
    ck_assert_int_eq(gmm_latent_prior_rows(l, theta, &G, NULL), GMM_OK);
    gmm_status st = gmm_latent_prior_rows_rev(l, Gbar, ldbar, grad);
    ck_assert_msg(st == GMM_OK, "%s: prior_rows_rev: %s", what, gmm_error_message());
    for (size_t i = 0; i < np; i++)
        grad[i] -= 0.25;
    fd_ctx c = {.l = l, .theta = theta, .N = N, .Gbar = Gbar, .row = row, .ldbar = ldbar};
    double err = fd_tol_check(&c, np, grad, rows_fn, what, "rows_rev");
    free(Gbar);
    free(row);
    free(grad);
    return err;
}

/* E[log N(x | 0, Q^-1)] + N log(2 pi) / 2 = log|Q| / 2 - sum_i g_i' M g_i / 2
 * for E[x x'] = M held fixed. */
static double rows_moments_fn(void *p)
{
    fd_ctx *c = p;
    gmm_prior_rows G;
    double ld;
    size_t first, N = c->N;
    ck_assert_int_eq(gmm_latent_prior_rows(c->l, c->theta, &G, &ld), GMM_OK);
    double s = 0.5 * ld;
    c->mag = fabs(s);
    for (size_t i = 0; i < G.nrows; i++) {
        size_t w = G.row(G.ctx, i, &first, c->row);
        double q = 0.0, a = 0.0;
        for (size_t j = 0; j < w; j++)
            for (size_t k = 0; k < w; k++) {
                double t = c->row[j] * c->M[(first + j) * N + first + k] * c->row[k];
                q += t;
                a += fabs(t);
            }
        s -= 0.5 * q;
        c->mag += 0.5 * a;
    }
    return s;
}

/* gmm_latent_prior_rows_rev_moments against fourth-order differences of
 * rows_moments_fn, M = W (B B' / N + m m') W' (B, m standard normal, W the
 * whitening map at theta): the
 * segments' moments Svv_t = G_t M G_t', Svx_t = G_t M(:, x_{t-1}) formed
 * densely from the rows (d x d entries off a kernel block included: they
 * must not count). */
static void check_rows_rev_moments(gmm_latent *l, double *theta, const char *what,
                                   uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    size_t N = gmm_latent_dim(l), np = gmm_latent_nparam(l), ld = gmm_latent_bandwidth(l) + 1;
    size_t s = gmm_latent_prior_segment(l), nseg = N / s, first;
    ck_assert_uint_eq(nseg * s, N);
    double *B = malloc(N * N * sizeof *B), *M = malloc(N * N * sizeof *M);
    double *mv = malloc(N * sizeof *mv), *Gd = calloc(N * N, sizeof *Gd);
    double *Svv = malloc(N * s * sizeof *Svv), *Svx = malloc(N * s * sizeof *Svx);
    double *row = malloc(ld * sizeof *row), *grad = malloc(np * sizeof *grad);
    for (size_t i = 0; i < N * N; i++)
        B[i] = tu_normal(&r);
    for (size_t i = 0; i < N; i++)
        mv[i] = tu_normal(&r);
    /* B <- W B and mv <- W mv, W the whitening map (x = W v): the rows'
     * terms g_i' M g_i are then of order 1 even where G's entries are large
     * (a damped constant), so the differences stay accurate */
    double *col = malloc(N * sizeof *col);
    ck_assert_int_eq(gmm_latent_whiten_setup(l, theta), GMM_OK);
    for (size_t k = 0; k < N; k++) {
        for (size_t i = 0; i < N; i++)
            col[i] = B[i * N + k];
        ck_assert_int_eq(gmm_latent_whiten(l, col, col), GMM_OK);
        for (size_t i = 0; i < N; i++)
            B[i * N + k] = col[i];
    }
    ck_assert_int_eq(gmm_latent_whiten(l, mv, mv), GMM_OK);
    free(col);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            double t = mv[i] * mv[j];
            for (size_t k = 0; k < N; k++)
                t += B[i * N + k] * B[j * N + k] / (double)N;
            M[i * N + j] = t;
        }
    gmm_prior_rows G;
    ck_assert_int_eq(gmm_latent_prior_rows(l, theta, &G, NULL), GMM_OK);
    for (size_t i = 0; i < N; i++) {
        size_t w = G.row(G.ctx, i, &first, row);
        for (size_t j = 0; j < w; j++)
            Gd[i * N + first + j] = row[j];
    }
    for (size_t t = 0; t < nseg; t++)
        for (size_t a = 0; a < s; a++) {
            const double *ga = Gd + (t * s + a) * N;
            for (size_t c = 0; c < s; c++) {
                const double *gc = Gd + (t * s + c) * N;
                double vv = 0.0, vx = 0.0;
                for (size_t i = 0; i < N; i++) {
                    for (size_t j = 0; j < N; j++)
                        vv += ga[i] * M[i * N + j] * gc[j];
                    if (t)
                        vx += ga[i] * M[i * N + (t - 1) * s + c];
                }
                Svv[(t * s + a) * s + c] = vv;
                Svx[(t * s + a) * s + c] = t ? vx : NAN; /* segment 0: not read */
            }
        }
    for (size_t i = 0; i < np; i++)
        grad[i] = 0.25; /* accumulated into */
    gmm_status st = gmm_latent_prior_rows_rev_moments(l, Svv, Svx, grad);
    ck_assert_msg(st == GMM_OK, "%s: prior_rows_rev_moments: %s", what, gmm_error_message());
    for (size_t i = 0; i < np; i++)
        grad[i] -= 0.25;
    fd_ctx c = {.l = l, .theta = theta, .N = N, .M = M, .row = row};
    fd_tol_check(&c, np, grad, rows_moments_fn, what, "rows_rev_moments");
    free(B);
    free(M);
    free(mv);
    free(Gd);
    free(Svv);
    free(Svx);
    free(row);
    free(grad);
}

START_TEST(test_prior_rows_rev_moments_fd)
{
    for (size_t ik = 0; ik < NKERN; ik++)
        for (int id = 0; id < 2; id++) {
            ssm_case c;
            ssm_case_init(&c, kernels[ik], 11 + ik, dampings[id]);
            if (id == 0 || gmm_kernel_damped(c.k))
                check_rows_rev_moments(c.l, c.theta, kernels[ik], 720 + ik);
            ssm_case_free(&c);
            ssm_case_grid(&c, kernels[ik], dampings[id]);
            if (id == 0 || gmm_kernel_damped(c.k))
                check_rows_rev_moments(c.l, c.theta, kernels[ik], 730 + ik);
            ssm_case_free(&c);
        }
}
END_TEST

START_TEST(test_prior_rows_rev_fd)
{
    for (size_t ik = 0; ik < NKERN; ik++)
        for (int id = 0; id < 2; id++) {
            ssm_case c;
            ssm_case_init(&c, kernels[ik], 11 + ik, dampings[id]);
            if (id == 0 || gmm_kernel_damped(c.k))
                check_rows_rev(c.l, c.theta, kernels[ik], 700 + ik);
            ssm_case_free(&c);
            /* interval groups of several intervals (the logdet term counts them) */
            ssm_case_grid(&c, kernels[ik], dampings[id]);
            if (id == 0 || gmm_kernel_damped(c.k))
                check_rows_rev(c.l, c.theta, kernels[ik], 710 + ik);
            ssm_case_free(&c);
        }
}
END_TEST

/* Inputs far closer than the likelihood's accuracy limit (dt / lengthscale
 * = 1.5e-7, where gmm_latent_prior refuses): the rows are computed, G W v =
 * v holds to the same tolerance as above, and the reverse mode still
 * agrees with finite differences. */
START_TEST(test_prior_rows_close_inputs)
{
    gmm_kernel *k = tu_kernel_of("matern52(variance=1.3, lengthscale=2.0)");
    double x[6] = {0.0, 1e-6, 2e-6, 0.5, 0.5 + 3e-7, 1.5};
    gmm_latent *l = NULL;
    ck_assert_int_eq(gmm_latent_ssm_alloc(k, x, 6, NULL, &l), GMM_OK);
    size_t N = gmm_latent_dim(l), kl = gmm_latent_bandwidth(l), np = gmm_latent_nparam(l);
    double th[2];
    memcpy(th, gmm_latent_param_start(l), sizeof th);
    gmm_band *Q = gmm_band_alloc(N, kl, 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_latent_prior(l, th, Q, NULL), GMM_EDOM);
    gmm_prior_rows G;
    double ld;
    ck_assert_int_eq(gmm_latent_prior_rows(l, th, &G, &ld), GMM_OK);
    ck_assert(isfinite(ld));
    double *Gd = dense_rows(&G, N, kl, "close inputs");
    double v[18], xx[18], ew = 0.0;
    tu_rng r;
    tu_rng_seed(&r, 78);
    for (size_t i = 0; i < N; i++)
        v[i] = tu_normal(&r);
    ck_assert_int_eq(gmm_latent_whiten_setup(l, th), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten(l, v, xx), GMM_OK);
    for (size_t i = 0; i < N; i++) {
        double y = 0.0, a = 0.0;
        for (size_t j = 0; j < N; j++) {
            y += Gd[i * N + j] * xx[j];
            a += fabs(Gd[i * N + j] * xx[j]);
        }
        ew = fmax(ew, fabs(y - v[i]) / a);
    }
    if (report())
        fprintf(stderr, "latent close inputs (dt/l = 1.5e-7) G W v vs v: %8.2e\n", ew);
    ck_assert_msg(ew < 8.0 * (double)(kl + 1) * EPS, "close inputs: G W v: %g", ew);
    check_rows_rev(l, th, "matern52, dt/l = 1.5e-7", 79);
    ck_assert_uint_eq(np, 2);
    free(Gd);
    gmm_band_free(Q);
    gmm_latent_free(l);
    gmm_kernel_free(k);
}
END_TEST

/* rows_rev before any rows or after a failed call is refused; it keeps the
 * theta of the last prior_rows whatever runs in between; prior_rows ends a
 * prior/prior_rev pair; graphs have no square root. */
START_TEST(test_prior_rows_errors_and_call_order)
{
    ssm_case c;
    ssm_case_init(&c, kernels[0], 11, 0.0);
    size_t N = c.N, ld = gmm_latent_bandwidth(c.l) + 1;
    double *Gbar = malloc(N * ld * sizeof *Gbar), g1[16] = {0}, g2[16] = {0}, bad[16];
    for (size_t i = 0; i < N * ld; i++)
        Gbar[i] = cos((double)i);
    gmm_prior_rows G;
    ck_assert_int_eq(gmm_latent_prior_rows_rev(c.l, Gbar, 0.5, g1), GMM_EINVAL);
    ck_assert_int_eq(gmm_latent_prior_rows_rev_moments(c.l, Gbar, Gbar, g1), GMM_EINVAL);
    memcpy(bad, c.theta, c.np * sizeof *bad);
    bad[1] = -1.0;
    ck_assert_int_eq(gmm_latent_prior_rows(c.l, bad, &G, NULL), GMM_EDOM);
    ck_assert_int_eq(gmm_latent_prior_rows(c.l, NULL, &G, NULL), GMM_EINVAL);
    ck_assert_int_eq(gmm_latent_prior_rows(c.l, c.theta, &G, NULL), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rows_rev(c.l, Gbar, 0.5, g1), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rows_rev(c.l, NULL, 0.5, g1), GMM_EINVAL);
    /* the moments' reverse mode leaves G readable as it was */
    double *r1 = malloc(ld * sizeof *r1), *r2 = malloc(ld * sizeof *r2), m1[16] = {0};
    double m2[16] = {0};
    size_t f1, f2, w1 = G.row(G.ctx, N - 1, &f1, r1);
    ck_assert_int_eq(gmm_latent_prior_rows_rev_moments(c.l, Gbar, Gbar, m1), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rows_rev_moments(c.l, NULL, Gbar, m1), GMM_EINVAL);
    ck_assert_uint_eq(G.row(G.ctx, N - 1, &f2, r2), w1);
    ck_assert_uint_eq(f1, f2);
    for (size_t j = 0; j < w1; j++)
        ck_assert(r1[j] == r2[j]);
    free(r1);
    free(r2);
    /* other calls in between (the prior at another theta, whitening, the
     * likelihood) leave the reverse mode at the rows' theta */
    gmm_band *Q = gmm_band_alloc(N, ld - 1, 0, GMM_BAND_SYMMETRIC);
    for (size_t i = 0; i < c.np; i++)
        bad[i] = 1.3 * c.theta[i];
    ck_assert_int_eq(gmm_latent_prior(c.l, bad, Q, NULL), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_setup(c.l, bad), GMM_OK);
    double y[16], ll;
    for (size_t i = 0; i < c.nx; i++)
        y[i] = sin(2.0 * c.x[i]);
    ck_assert_int_eq(gmm_latent_gaussian(c.l, bad, y, 0.3, &ll, NULL, NULL), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rows_rev(c.l, Gbar, 0.5, g2), GMM_OK);
    for (size_t i = 0; i < c.np; i++)
        ck_assert_msg(g1[i] == g2[i], "rows_rev moved: %.17g vs %.17g", g1[i], g2[i]);
    ck_assert_int_eq(gmm_latent_whiten_setup(c.l, bad), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rows_rev_moments(c.l, Gbar, Gbar, m2), GMM_OK);
    for (size_t i = 0; i < c.np; i++)
        ck_assert_msg(m1[i] == m2[i], "rows_rev_moments moved: %.17g vs %.17g", m1[i], m2[i]);
    /* ... and prior_rows ends a prior/prior_rev pair */
    ck_assert_int_eq(gmm_latent_prior(c.l, bad, Q, NULL), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rows(c.l, c.theta, &G, NULL), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rev(c.l, Q, 0.0, g2), GMM_EINVAL);
    /* a failed prior_rows leaves no reverse mode behind */
    bad[0] = NAN;
    ck_assert_int_eq(gmm_latent_prior_rows(c.l, bad, &G, NULL), GMM_EDOM);
    ck_assert_int_eq(gmm_latent_prior_rows_rev(c.l, Gbar, 0.5, g2), GMM_EINVAL);
    gmm_band_free(Q);
    free(Gbar);
    ssm_case_free(&c);

    graph_case gc;
    graph_case_init(&gc, 5);
    double gb[64] = {0}, th[4] = {0};
    ck_assert_uint_eq(gmm_latent_prior_nrows(gc.l), 0);
    ck_assert_int_eq(gmm_latent_prior_rows(gc.l, gc.theta, &G, NULL), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "no natural square root") != NULL);
    ck_assert_int_eq(gmm_latent_prior_rows_rev(gc.l, gb, 0.0, th), GMM_EINVAL);
    ck_assert_int_eq(gmm_latent_prior_rows_rev_moments(gc.l, gb, gb, th), GMM_EINVAL);
    ck_assert_uint_eq(gmm_latent_prior_segment(gc.l), 0);
    graph_case_free(&gc);
}
END_TEST

/* ---- spacing, order of calls, errors --------------------------------------------- */

/* Inputs far closer than the likelihood's accuracy limit: the prior is
 * refused there, the whitening is not, and its covariance still matches the
 * kernel (h' W W' h = k(tau) needs no inverse). */
START_TEST(test_ssm_whiten_close_inputs)
{
    gmm_kernel *k = tu_kernel_of("matern52(variance=1.3, lengthscale=2.0)");
    double x[6] = {0.0, 1e-6, 2e-6, 0.5, 0.5 + 3e-7, 1.5};
    gmm_latent *l = NULL;
    ck_assert_int_eq(gmm_latent_ssm_alloc(k, x, 6, NULL, &l), GMM_OK);
    const double *th = gmm_latent_param_start(l);
    size_t N = gmm_latent_dim(l), d = 3;
    gmm_band *Q = gmm_band_alloc(N, gmm_latent_bandwidth(l), 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_latent_prior(l, th, Q, NULL), GMM_EDOM);
    ck_assert_int_eq(gmm_latent_whiten_setup(l, th), GMM_OK);
    double *S = dense_WWt(l, N), err = 0.0, k0 = 1.3;
    const size_t *off = gmm_latent_obs_offset(l);
    for (size_t r = 0; r < 6; r++)
        for (size_t s = 0; s < 6; s++) {
            /* H = e_0: the f-entries of the states */
            double v = S[off[s] * N + off[r]];
            err = fmax(err, fabs(v - gmm_kernel_cov(k, th, 0.0, x[r] - x[s])) / k0);
        }
    if (report())
        fprintf(stderr, "latent close inputs (dt/l = 1.5e-7) h' W W' h vs k(tau): %8.2e\n", err);
    ck_assert_msg(err < 1e-13, "close inputs: %g", err);
    /* and the transpose, and a finite reverse mode */
    double v[18], g[18], xx[18], u[18], grad[2] = {0.0, 0.0};
    ck_assert_uint_eq(N, 6 * d);
    tu_rng r;
    tu_rng_seed(&r, 77);
    for (size_t i = 0; i < N; i++) {
        v[i] = tu_normal(&r);
        g[i] = tu_normal(&r);
    }
    ck_assert_int_eq(gmm_latent_whiten(l, v, xx), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_t(l, g, u), GMM_OK);
    double a = 0.0, b = 0.0, sa = 0.0;
    for (size_t i = 0; i < N; i++) {
        a += g[i] * xx[i];
        b += u[i] * v[i];
        sa += fabs(g[i] * xx[i]);
    }
    ck_assert_msg(fabs(a - b) < 1e-12 * sa, "close inputs transpose: %g", fabs(a - b) / sa);
    ck_assert_int_eq(gmm_latent_whiten_rev(l, v, g, grad), GMM_OK);
    ck_assert(isfinite(grad[0]) && isfinite(grad[1]));
    free(S);
    gmm_band_free(Q);
    gmm_latent_free(l);
    gmm_kernel_free(k);
}
END_TEST

START_TEST(test_whiten_errors_and_call_order)
{
    ssm_case c;
    ssm_case_init(&c, kernels[0], 11, 0.0);
    size_t N = c.N;
    double *v = calloc(N, sizeof *v), *x = calloc(N, sizeof *x), *x2 = calloc(N, sizeof *x2);
    double grad[16] = {0};
    /* nothing before the setup */
    ck_assert_int_eq(gmm_latent_whiten(c.l, v, x), GMM_EINVAL);
    ck_assert_int_eq(gmm_latent_whiten_t(c.l, v, x), GMM_EINVAL);
    ck_assert_int_eq(gmm_latent_whiten_rev(c.l, v, x, grad), GMM_EINVAL);
    double bad[16];
    memcpy(bad, c.theta, c.np * sizeof *bad);
    bad[1] = -1.0;
    ck_assert_int_eq(gmm_latent_whiten_setup(c.l, bad), GMM_EDOM);
    ck_assert_int_eq(gmm_latent_whiten(c.l, v, x), GMM_EINVAL);
    /* the setup's theta holds whatever runs on the object in between */
    ck_assert_int_eq(gmm_latent_whiten_setup(c.l, c.theta), GMM_OK);
    for (size_t i = 0; i < N; i++)
        v[i] = sin((double)i);
    ck_assert_int_eq(gmm_latent_whiten(c.l, v, x), GMM_OK);
    for (size_t i = 0; i < c.np; i++)
        bad[i] = 1.3 * c.theta[i];
    gmm_band *Q = gmm_band_alloc(N, gmm_latent_bandwidth(c.l), 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_latent_prior(c.l, bad, Q, NULL), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten(c.l, v, x2), GMM_OK);
    ck_assert(memcmp(x, x2, N * sizeof *x) == 0);
    /* ... and the setup ends a prior/prior_rev pair */
    ck_assert_int_eq(gmm_latent_whiten_rev(c.l, v, x, grad), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rev(c.l, Q, 0.0, grad), GMM_EINVAL);
    gmm_band_free(Q);
    free(v);
    free(x);
    free(x2);
    ssm_case_free(&c);

    /* graphs: nothing before the setup, no prior_rev before a prior */
    graph_case gc;
    graph_case_init(&gc, 5);
    double gv[15] = {0}, gx[15], th[4];
    memcpy(th, gc.theta, sizeof th);
    ck_assert_int_eq(gmm_latent_whiten(gc.l, gv, gx), GMM_EINVAL);
    ck_assert_int_eq(gmm_latent_whiten_t(gc.l, gv, gx), GMM_EINVAL);
    gmm_band *Qg = gmm_band_alloc(gc.N, gmm_latent_bandwidth(gc.l), 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_latent_prior_rev(gc.l, Qg, 0.0, th), GMM_EINVAL);
    gmm_band_free(Qg);
    /* a singular Q (a Laplacian without ridge): the setup refuses it (the
     * graph layer's check, before any Cholesky), and leaves no whitening
     * behind */
    const char *lap = "laplacian(precision=1, ridge=1)";
    gmm_spec_node *sp = NULL;
    gmm_gmrf *gm = NULL;
    gmm_latent *gl = NULL;
    ck_assert_int_eq(gmm_spec_parse(lap, &sp), GMM_OK);
    ck_assert_int_eq(gmm_gmrf_alloc(gc.g, sp, lap, &gm), GMM_OK);
    ck_assert_int_eq(gmm_latent_gmrf_alloc(gm, gc.nrows, gc.row_node, &gl), GMM_OK);
    double lth[2] = {1.0, 1.0};
    ck_assert_int_eq(gmm_latent_whiten_setup(gl, lth), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten(gl, gv, gx), GMM_OK);
    lth[1] = 0.0;
    ck_assert_int_eq(gmm_latent_whiten_setup(gl, lth), GMM_EDOM); /* gmrf.h: singular */
    ck_assert_int_eq(gmm_latent_whiten(gl, gv, gx), GMM_EINVAL);
    gmm_latent_free(gl);
    gmm_gmrf_free(gm);
    gmm_spec_free(sp);
    graph_case_free(&gc);
}
END_TEST

extern Suite *model_latent_suite(void);
Suite *model_latent_suite(void)
{
    Suite *s = suite_create("model_latent");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ssm_whiten_covariance);
    tcase_add_test(tc, test_graph_whiten_covariance);
    tcase_add_test(tc, test_whiten_transpose);
    tcase_add_test(tc, test_whiten_rev_fd);
    tcase_add_test(tc, test_whiten_rev_saved);
    tcase_add_test(tc, test_prior_rev_fd);
    tcase_add_test(tc, test_obs_coef_rev_fd);
    tcase_add_test(tc, test_predict_rows_dense);
    tcase_add_test(tc, test_ssm_whiten_close_inputs);
    tcase_add_test(tc, test_whiten_errors_and_call_order);
    tcase_add_test(tc, test_prior_rows_gtg);
    tcase_add_test(tc, test_prior_rows_rev_fd);
    tcase_add_test(tc, test_prior_rows_rev_moments_fd);
    tcase_add_test(tc, test_prior_rows_close_inputs);
    tcase_add_test(tc, test_prior_rows_errors_and_call_order);
    suite_add_tcase(s, tc);
    return s;
}
