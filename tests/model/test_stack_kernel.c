/* test_stack_kernel.c -- a kernel spec as a component of a stacked latent
 * (latent_stack.c, KERNEL) against a dense Gaussian process written here from the
 * kernels' closed forms (no code of the tool's kernels or SSM):
 *
 *   y = X beta + f(t) + u[g] + noise,   Cov f = K(t, t), u ~ N(0, sg I),
 *
 * its exact log marginal likelihood and gradient in every parameter (the
 * gradient against differences of the dense value); a Poisson stack's
 * Laplace approximation against Rasmussen & Williams' Algorithm 3.1 with the
 * dense covariance; the reverse mode of the stacked prior and of the
 * whitening (hmc) against finite differences; and a new row's form (gmm_latent_stack_row) against the
 * dense kernel's covariances with the data's values.  The same with near-ties
 * merged by the term's merge_tol: the dense process then at each value's
 * group's first value (the groups formed here by ssm.h's rule). */
#include <check.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/band.h"
#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/spec.h"
#include "gmm/stack.h"
#include "support/testutil.h"

#define KR 40 /* rows */
#define KG 4  /* iid levels */

static int report(void) { return getenv("GMM_TEST_REPORT") != NULL; }

/* The kernels of the cases: matern32, the sum matern32 + matern52, and a
 * sum with a quasi-periodic product, whose dense covariance is
 * gmm_kernel_cov's closed form (the periodic's truncated series; no
 * damping: the product has process noise). */
static const char *kspec[] = {"matern32(variance=0.8, lengthscale=2.5)",
                              "matern32(variance=0.6, lengthscale=3) + "
                              "matern52(variance=0.3, lengthscale=0.9)",
                              "matern32(variance=0.6, lengthscale=3) + "
                              "matern12(variance=0.5, lengthscale=6)*"
                              "periodic(variance=1, lengthscale=1.1, period=3.7, harmonics=4)",
                              "matern32(variance=0.6, lengthscale=3) + "
                              "periodic(variance=0.7, lengthscale=1.1, period=3.7, harmonics=2)"};
/* case 3's periodic summand is a damped zero-noise factor: the stack's
 * square-root form (stack.h); cases 0 .. KCASES_ASM - 1 take the assembled
 * one */
#define KCASES 4
#define KCASES_ASM 3
/* cases KCASES, KCASES + 1: kernels 0 and 1 with near-ties KTOL / 2 apart
 * merged by merge_tol KTOL (the other values at least 0.05 apart) */
#define KMERGED 2
#define KTOL 0.04

static double k32(double s, double l, double tau)
{
    double a = sqrt(3.0) * fabs(tau) / l;
    return s * (1.0 + a) * exp(-a);
}

static double k52(double s, double l, double tau)
{
    double a = sqrt(5.0) * fabs(tau) / l;
    return s * (1.0 + a + a * a / 3.0) * exp(-a);
}

typedef struct {
    int which;
    double tol;
    gmm_spec_node *spec;
    gmm_kernel *k;
    gmm_latent *l;
    double t[KR], x1[KR], y[KR];
    double ts[KR]; /* each t at its merged group's first value (t itself: tol 0) */
    size_t nmerged; /* distinct values merged into an earlier one */
    size_t g[KR];
    gmm_stack_term term[2];
    /* the problem's parameters by role: kernel (s1, l1[, s2, l2]), sg,
     * noise, intercept, coef.x1 -- in the objective's order (pos) */
    gmm_problem *p;
    gmm_objective *o;
    size_t np;
} kcase;

/* The damping of the last case's periodic factor, by ssm.h's rule (damp =
 * max(GMM_SSM_DAMP_REL, GMM_SSM_DAMP_K2 eps K^2) / span, K distinct
 * values). */
static double kdamp(const kcase *c)
{
    double lo = INFINITY, hi = -INFINITY, u[KR];
    size_t K = 0;
    for (size_t i = 0; i < KR; i++) {
        int seen = 0;
        for (size_t j = 0; j < K; j++)
            seen |= u[j] == c->t[i];
        if (!seen)
            u[K++] = c->t[i];
        lo = fmin(lo, c->t[i]);
        hi = fmax(hi, c->t[i]);
    }
    double rel = fmax(GMM_SSM_DAMP_REL, GMM_SSM_DAMP_K2 * DBL_EPSILON * (double)K * (double)K);
    return rel / (hi - lo);
}

/* The dense kernel covariance at tau from the kernel's parameters th. */
static double kcov(const kcase *c, const double *th, double tau)
{
    if (c->which >= 2)
        return gmm_kernel_cov(c->k, th, c->which == 3 ? kdamp(c) : 0.0, tau);
    double v = k32(th[0], th[1], tau);
    if (c->which == 1)
        v += k52(th[2], th[3], tau);
    return v;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The group's first value for t: sorted values start a group when more
 * than tol above the current group's first (ssm.h, MODEL).  A query within
 * tol of a first (the lower one first) is that first (its state). */
static double snap_value(const kcase *c, double t)
{
    double lo = -INFINITY, hi = INFINITY;
    for (size_t i = 0; i < KR; i++) { /* the firsts are the ts values */
        if (c->ts[i] <= t)
            lo = fmax(lo, c->ts[i]);
        else
            hi = fmin(hi, c->ts[i]);
    }
    if (t - lo <= c->tol)
        return lo;
    if (hi - t <= c->tol)
        return hi;
    return t;
}

static void kcase_make(kcase *c, int i_case, int poisson)
{
    int which = i_case < KCASES ? i_case : i_case - KCASES;
    memset(c, 0, sizeof *c);
    c->which = which;
    c->tol = i_case < KCASES ? 0.0 : KTOL;
    tu_rng r;
    tu_rng_seed(&r, 17 + (uint64_t)which);
    /* irregular values with repeats: every fifth row repeats the one before
     * (merged cases: lies tol / 2 above it) */
    double t = 0.0;
    for (size_t i = 0; i < KR; i++) {
        if (i % 5 != 4)
            t += 0.05 + 1.2 * tu_uniform(&r);
        c->t[i] = i % 5 == 4 ? t + 0.5 * c->tol : t;
        c->g[i] = (i * 7 + 3) % KG;
        c->x1[i] = tu_normal(&r);
    }
    /* shuffle the rows: the stack must not rely on sorted input */
    for (size_t i = KR - 1; i > 0; i--) {
        size_t j = (size_t)(tu_uniform(&r) * (double)(i + 1));
        double tt = c->t[i];
        c->t[i] = c->t[j];
        c->t[j] = tt;
    }
    for (size_t i = 0; i < KR; i++) {
        double f = sin(c->t[i] / 2.0) + 0.4 * c->x1[i] + 0.3 * (double)c->g[i] - 0.4;
        c->y[i] = poisson ? floor(exp(0.3 + 0.5 * f) + 0.5 * tu_uniform(&r))
                          : f + 0.3 * tu_normal(&r);
    }
    /* the merged groups, from the sorted values */
    double srt[KR], fst[KR];
    memcpy(srt, c->t, sizeof srt);
    qsort(srt, KR, sizeof *srt, cmp_dbl);
    fst[0] = srt[0];
    for (size_t j = 1; j < KR; j++) {
        fst[j] = srt[j] > fst[j - 1] + c->tol ? srt[j] : fst[j - 1];
        c->nmerged += fst[j] != srt[j] && srt[j] != srt[j - 1];
    }
    for (size_t i = 0; i < KR; i++) {
        size_t j = 0;
        while (srt[j] != c->t[i])
            j++;
        c->ts[i] = fst[j];
    }
    ck_assert_int_eq(gmm_spec_parse(kspec[which], &c->spec), GMM_OK);
    ck_assert_int_eq(gmm_kernel_from_spec(c->spec, &c->k), GMM_OK);
    c->term[0] = (gmm_stack_term){.model = GMM_STACK_KERNEL, .name = "f.t", .value = c->t,
                                  .kernel = c->k, .merge_tol = c->tol};
    c->term[1] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.g", .nlevel = KG,
                                  .level = c->g, .variance = 0.5};
    ck_assert_int_eq(gmm_latent_stack_alloc(KR, 2, c->term, 0, &c->l), GMM_OK);
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse(poisson ? "poisson" : "gaussian(variance=0.2)", &lik),
                     GMM_OK);
    static gmm_lik keep[2];
    keep[poisson] = lik;
    double X[2 * KR], start[2] = {0.1, 0.3};
    for (size_t i = 0; i < KR; i++) {
        X[2 * i] = 1.0;
        X[2 * i + 1] = c->x1[i];
    }
    const char *names[2] = {"intercept", "coef.x1"};
    gmm_problem_design d = {2, X, names, start, 0};
    ck_assert_int_eq(gmm_problem_alloc_design(c->l, &keep[poisson], c->y, NULL, &d, &c->p),
                     GMM_OK);
    c->o = gmm_problem_objective(c->p);
    c->np = c->o->nparam;
}

static void kcase_free(kcase *c)
{
    gmm_problem_free(c->p);
    gmm_latent_free(c->l);
    gmm_kernel_free(c->k);
    gmm_spec_free(c->spec);
}

/* The objective's parameter named `suffix` (exact match of the tail). */
static size_t par_index(const kcase *c, const char *suffix)
{
    for (size_t i = 0; i < c->np; i++) {
        const char *nm = c->o->name[i];
        size_t a = strlen(nm), b = strlen(suffix);
        if (a >= b && !strcmp(nm + a - b, suffix))
            return i;
    }
    ck_abort_msg("no parameter '%s'", suffix);
    return 0;
}

/* The dense parameters: kernel ones, sg, noise (Gaussian), b0, b1 from the
 * objective's vector th by name. */
static void dense_params(const kcase *c, const double *th, double *kp, double *sg,
                         double *noise, double *b0, double *b1)
{
    if (c->which >= 2) { /* the kernel's own order: its parameters come first */
        ck_assert(gmm_kernel_damped(c->k) == (c->which == 3));
        for (size_t i = 0; i < gmm_kernel_nparam(c->k); i++)
            kp[i] = th[i];
    } else {
        kp[0] = th[par_index(c, "matern32.variance")];
        kp[1] = th[par_index(c, "matern32.lengthscale")];
    }
    if (c->which == 1) {
        kp[2] = th[par_index(c, "matern52.variance")];
        kp[3] = th[par_index(c, "matern52.lengthscale")];
    }
    *sg = th[par_index(c, "f.g.variance")];
    if (noise)
        *noise = th[par_index(c, "likelihood.variance")];
    *b0 = th[par_index(c, "intercept")];
    *b1 = th[par_index(c, "coef.x1")];
}

/* The dense covariance of the latent part at the rows (KR x KR). */
static gsl_matrix *dense_cov(const kcase *c, const double *kp, double sg)
{
    gsl_matrix *K = gsl_matrix_alloc(KR, KR);
    for (size_t i = 0; i < KR; i++)
        for (size_t j = 0; j < KR; j++)
            gsl_matrix_set(K, i, j,
                           kcov(c, kp, c->ts[i] - c->ts[j]) + (c->g[i] == c->g[j] ? sg : 0.0));
    return K;
}

typedef struct {
    kcase *c;
    double th[32];
} dctx;

/* log N(y; X beta, K + noise I). */
static double dense_gauss(void *p)
{
    dctx *d = p;
    double kp[16], sg, noise, b0, b1;
    dense_params(d->c, d->th, kp, &sg, &noise, &b0, &b1);
    gsl_matrix *C = dense_cov(d->c, kp, sg);
    gsl_vector *rv = gsl_vector_alloc(KR), *al = gsl_vector_alloc(KR);
    for (size_t i = 0; i < KR; i++) {
        gsl_matrix_set(C, i, i, gsl_matrix_get(C, i, i) + noise);
        gsl_vector_set(rv, i, d->c->y[i] - b0 - b1 * d->c->x1[i]);
    }
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(C), GSL_SUCCESS);
    gsl_linalg_cholesky_solve(C, rv, al);
    double q = 0.0, ld = 0.0;
    for (size_t i = 0; i < KR; i++) {
        q += gsl_vector_get(rv, i) * gsl_vector_get(al, i);
        ld += 2.0 * log(gsl_matrix_get(C, i, i));
    }
    gsl_matrix_free(C);
    gsl_vector_free(rv);
    gsl_vector_free(al);
    return -0.5 * (double)KR * log(2.0 * M_PI) - 0.5 * ld - 0.5 * q;
}

/* Rasmussen & Williams (2006) Algorithm 3.1 for the Poisson likelihood with
 * log rate eta = X beta + f, f ~ N(0, K): Newton on f, then log q(y) =
 * -a'f/2 + log p(y | f) - sum log diag L, B = I + W^1/2 K W^1/2 = L L'. */
static double dense_laplace(void *p)
{
    dctx *d = p;
    double kp[16], sg, b0, b1;
    dense_params(d->c, d->th, kp, &sg, NULL, &b0, &b1);
    gsl_matrix *K = dense_cov(d->c, kp, sg), *B = gsl_matrix_alloc(KR, KR);
    gsl_vector *f = gsl_vector_calloc(KR), *bv = gsl_vector_alloc(KR);
    gsl_vector *a = gsl_vector_alloc(KR), *s = gsl_vector_alloc(KR), *tmp = gsl_vector_alloc(KR);
    double off[KR], obj = 0.0;
    for (size_t i = 0; i < KR; i++)
        off[i] = b0 + b1 * d->c->x1[i];
    for (int it = 0; it < 100; it++) {
        /* W = exp(eta), s = W^1/2; b = W f + grad log p */
        for (size_t i = 0; i < KR; i++) {
            double lam = exp(off[i] + gsl_vector_get(f, i));
            gsl_vector_set(s, i, sqrt(lam));
            gsl_vector_set(bv, i, lam * gsl_vector_get(f, i) + d->c->y[i] - lam);
        }
        for (size_t i = 0; i < KR; i++)
            for (size_t j = 0; j < KR; j++)
                gsl_matrix_set(B, i, j,
                               (i == j) + gsl_vector_get(s, i) * gsl_matrix_get(K, i, j) *
                                              gsl_vector_get(s, j));
        ck_assert_int_eq(gsl_linalg_cholesky_decomp1(B), GSL_SUCCESS);
        /* a = b - W^1/2 B^-1 W^1/2 K b */
        gsl_blas_dgemv(CblasNoTrans, 1.0, K, bv, 0.0, tmp);
        for (size_t i = 0; i < KR; i++)
            gsl_vector_set(tmp, i, gsl_vector_get(tmp, i) * gsl_vector_get(s, i));
        gsl_linalg_cholesky_svx(B, tmp);
        for (size_t i = 0; i < KR; i++)
            gsl_vector_set(a, i, gsl_vector_get(bv, i) - gsl_vector_get(s, i) *
                                                             gsl_vector_get(tmp, i));
        gsl_blas_dgemv(CblasNoTrans, 1.0, K, a, 0.0, f);
        double af = 0.0, lp = 0.0, ldl = 0.0;
        for (size_t i = 0; i < KR; i++) {
            double eta = off[i] + gsl_vector_get(f, i), y = d->c->y[i];
            af += gsl_vector_get(a, i) * gsl_vector_get(f, i);
            lp += y * eta - exp(eta) - lgamma(y + 1.0);
        }
        /* the log-determinant at the new f */
        for (size_t i = 0; i < KR; i++)
            gsl_vector_set(s, i, sqrt(exp(off[i] + gsl_vector_get(f, i))));
        for (size_t i = 0; i < KR; i++)
            for (size_t j = 0; j < KR; j++)
                gsl_matrix_set(B, i, j,
                               (i == j) + gsl_vector_get(s, i) * gsl_matrix_get(K, i, j) *
                                              gsl_vector_get(s, j));
        ck_assert_int_eq(gsl_linalg_cholesky_decomp1(B), GSL_SUCCESS);
        for (size_t i = 0; i < KR; i++)
            ldl += log(gsl_matrix_get(B, i, i));
        double nobj = -0.5 * af + lp - ldl;
        if (it > 3 && fabs(nobj - obj) < 1e-14 * fabs(nobj))
            break;
        obj = nobj;
    }
    gsl_matrix_free(K);
    gsl_matrix_free(B);
    gsl_vector_free(f);
    gsl_vector_free(bv);
    gsl_vector_free(a);
    gsl_vector_free(s);
    gsl_vector_free(tmp);
    return obj;
}

/* The exact Gaussian log marginal likelihood and its gradient in every
 * parameter (kernel, iid variance, noise, intercept, covariate). */
START_TEST(test_kernel_gaussian_vs_dense)
{
    kcase c;
    kcase_make(&c, _i, 0);
    double f, g[32];
    dctx d = {&c, {0}};
    memcpy(d.th, c.o->value, c.np * sizeof *d.th);
    ck_assert_int_eq(c.o->eval(c.o->ctx, d.th, &f, g), GMM_OK);
    /* merged: one state per group, the count of merged values reported */
    ck_assert_uint_eq(gmm_latent_stack_nmerged(c.l, 0), c.nmerged);
    ck_assert(c.tol == 0.0 || c.nmerged > 0);
    size_t ngroup = 0, nv;
    for (size_t i = 0; i < KR; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= c.ts[j] == c.ts[i];
        ngroup += !seen;
    }
    ck_assert(gmm_latent_stack_values(c.l, 0, &nv) != NULL);
    ck_assert_uint_eq(nv, ngroup);
    double fd = dense_gauss(&d);
    double err = fabs(f - fd) / fabs(fd);
    /* 4th-order differences of the dense value at h = 2e-4 (relative):
     * truncation O(h^4) -- the periodic factor oscillates in its period at
     * 2 pi J span / period^2 per unit, 40 here -- rounding ~ eps |f| / h =
     * 4e-11 */
    double gerr = tu_fd_check4(d.th, c.np, g, dense_gauss, &d, 2e-4, 1.0, NULL);
    if (report()) {
        char buf[512];
        gmm_latent_stack_describe(c.l, buf, sizeof buf);
        fprintf(stderr, "stack kernel '%s': %s\n  loglik %.15g dense %.15g rel %.2e, grad %.2e\n",
                kspec[c.which], buf, f, fd, err, gerr);
    }
    ck_assert_msg(err < 1e-8, "%s: loglik %.15g vs dense %.15g", kspec[c.which], f, fd);
    ck_assert_msg(gerr < 1e-6, "%s: gradient rel err %g", kspec[c.which], gerr);
    kcase_free(&c);
}
END_TEST

/* Poisson: the stack's Laplace approximation (assembled path) against the
 * dense Algorithm 3.1, value and gradient. */
START_TEST(test_kernel_laplace_vs_dense)
{
    kcase c;
    kcase_make(&c, _i, 1);
    double f, g[32];
    dctx d = {&c, {0}};
    memcpy(d.th, c.o->value, c.np * sizeof *d.th);
    ck_assert_int_eq(c.o->eval(c.o->ctx, d.th, &f, g), GMM_OK);
    double fd = dense_laplace(&d);
    double gerr = tu_fd_check4(d.th, c.np, g, dense_laplace, &d, 2e-4, 1.0, NULL);
    if (report())
        fprintf(stderr, "stack kernel poisson '%s': laplace %.15g dense %.15g, grad %.2e\n",
                kspec[c.which], f, fd, gerr);
    ck_assert_msg(fabs(f - fd) < 1e-8 * fabs(fd), "%s: laplace %.15g vs dense %.15g",
                  kspec[c.which], f, fd);
    ck_assert_msg(gerr < 1e-6, "%s: gradient rel err %g", kspec[c.which], gerr);
    kcase_free(&c);
}
END_TEST

/* The reverse mode of the stacked prior (the kernel's slots through
 * gmm_ssm_prior_rev, scattered by the joint order) against central
 * differences of sum Qbar . Q(theta). */
typedef struct {
    gmm_latent *l;
    gmm_band *Q;
    const gmm_band *Qbar;
    double th[32];
} pctx;

static double prior_dot(void *p)
{
    pctx *q = p;
    double ld;
    ck_assert_int_eq(gmm_latent_prior(q->l, q->th, q->Q, &ld), GMM_OK);
    double s = 0.0;
    for (size_t j = 0; j < q->Q->n; j++)
        for (size_t i = j; i < q->Q->n && i <= j + q->Q->kl; i++)
            s += gmm_band_get(q->Qbar, i, j) * gmm_band_get(q->Q, i, j);
    return s;
}

START_TEST(test_kernel_prior_rev)
{
    kcase c;
    kcase_make(&c, _i, 0);
    size_t n = gmm_latent_dim(c.l), kl = gmm_latent_bandwidth(c.l);
    size_t np = gmm_latent_nparam(c.l);
    gmm_band *Q = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Qb = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    tu_rng r;
    tu_rng_seed(&r, 5);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + kl; i++)
            *gmm_band_ptr(Qb, i, j) = tu_normal(&r);
    pctx p = {c.l, Q, Qb, {0}};
    memcpy(p.th, gmm_latent_param_start(c.l), np * sizeof *p.th);
    double ld, tb[32] = {0};
    ck_assert_int_eq(gmm_latent_prior(c.l, p.th, Q, &ld), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rev(c.l, Qb, 0.0, tb), GMM_OK);
    double err = tu_fd_check4(p.th, np, tb, prior_dot, &p, 1e-3, 1.0, NULL);
    if (report())
        fprintf(stderr, "stack kernel prior_rev '%s': %.2e\n", kspec[c.which], err);
    ck_assert_msg(err < 1e-7, "%s: prior reverse rel err %g", kspec[c.which], err);
    gmm_band_free(Q);
    gmm_band_free(Qb);
    kcase_free(&c);
}
END_TEST

/* A new row's form f = w'x + eps (gmm_latent_stack_row) at values before,
 * between, on and after the data's: with S = Q^-1 the dense prior
 * covariance of the stacked latent, w'S w + evar must be k(0) + sg and w'S
 * h_j = k(t - t_j) (+ sg for the same level) for every data row j, h_j
 * its row of the observation map -- the kernel's covariances. */
START_TEST(test_kernel_new_rows)
{
    kcase c;
    kcase_make(&c, _i, 0);
    size_t n = gmm_latent_dim(c.l), np = gmm_latent_nparam(c.l);
    const double *th = gmm_latent_param_start(c.l);
    gmm_band *Qb = gmm_band_alloc(n, gmm_latent_bandwidth(c.l), 0, GMM_BAND_SYMMETRIC);
    double ld;
    ck_assert_int_eq(gmm_latent_prior(c.l, th, Qb, &ld), GMM_OK);
    double *Q = tu_band_to_dense(Qb);
    gsl_matrix_view Qv = gsl_matrix_view_array(Q, n, n);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(&Qv.matrix), GSL_SUCCESS);
    ck_assert_int_eq(gsl_linalg_cholesky_invert(&Qv.matrix), GSL_SUCCESS);
    /* the data rows' maps */
    size_t w = gmm_latent_obs_width(c.l);
    const size_t *off = gmm_latent_obs_offset(c.l);
    double *coef = malloc(KR * w * sizeof *coef);
    ck_assert_int_eq(gmm_latent_obs_coef(c.l, th, coef), GMM_OK);
    /* the latent's own parameters: the kernel's in the objective's order,
     * then the iid variance */
    double kp[16], sg = th[np - 1], b0, b1;
    dense_params(&c, c.o->value, kp, &sg, NULL, &b0, &b1);
    for (size_t i = 0; i < np; i++)
        ck_assert_double_eq(th[i], c.o->value[i]);
    double tmin = 1e300, tmax = -1e300;
    for (size_t i = 0; i < KR; i++) {
        tmin = fmin(tmin, c.t[i]);
        tmax = fmax(tmax, c.t[i]);
    }
    /* merged cases: also within tol of a state, on either side, and of a
     * merged value */
    double tq[] = {tmin - 2.3, tmin - 1e-3, c.t[7], 0.5 * (tmin + tmax) + 0.0137,
                   tmin + 0.31 * (tmax - tmin), tmax + 1e-3, tmax + 4.0,
                   c.ts[11] + 0.9 * c.tol, c.ts[12] - 0.7 * c.tol, c.t[4] + 0.2 * c.tol,
                   tmax + 0.5 * c.tol};
    size_t cap = gmm_latent_stack_row_max(c.l), *idx = malloc(cap * sizeof *idx);
    double *wv = malloc(cap * sizeof *wv), worst = 0.0;
    for (size_t q = 0; q < sizeof tq / sizeof *tq; q++) {
        gmm_stack_at at[2] = {{GMM_NO_INDEX, tq[q], NULL}, {q % KG, NAN, NULL}};
        size_t nnz;
        double ev;
        ck_assert_int_eq(gmm_latent_stack_row(c.l, th, at, idx, wv, &nnz, &ev), GMM_OK);
        double vv = ev;
        for (size_t a = 0; a < nnz; a++)
            for (size_t b = 0; b < nnz; b++)
                vv += wv[a] * wv[b] * Q[idx[a] * n + idx[b]];
        worst = fmax(worst, fabs(vv - (kcov(&c, kp, 0.0) + sg)) / (kp[0] + sg));
        for (size_t j = 0; j < KR; j++) {
            double cv = 0.0;
            for (size_t a = 0; a < nnz; a++)
                for (size_t e = 0; e < w; e++)
                    cv += wv[a] * coef[j * w + e] * Q[idx[a] * n + off[j] + e];
            double ref = kcov(&c, kp, snap_value(&c, tq[q]) - c.ts[j]) + (c.g[j] == q % KG ? sg : 0.0);
            worst = fmax(worst, fabs(cv - ref) / (kp[0] + sg));
        }
    }
    if (report())
        fprintf(stderr, "stack kernel new rows '%s': %.2e\n", kspec[c.which], worst);
    ck_assert_msg(worst < 1e-8, "%s: new rows' covariances off by %g", kspec[c.which], worst);
    free(idx);
    free(wv);
    free(coef);
    free(Q);
    gmm_band_free(Qb);
    kcase_free(&c);
}
END_TEST

/* A kernel with a damped zero-noise factor stacks in the square-root form
 * (test_kernel_gaussian_vs_dense, _laplace_vs_dense and _whiten check its
 * values): the assembled prior refuses it with the reason, the whitening
 * takes it, beside an intrinsic component too; a product with a factor with
 * process noise keeps the assembled form. */
START_TEST(test_kernel_damped_forms)
{
    static const char *spec[] = {"matern32 + periodic(period=7)", "matern32 + constant",
                                 "cosine(period=3)", "matern32 + matern12*periodic(period=7)"};
    double t[KR];
    for (size_t i = 0; i < KR; i++)
        t[i] = (double)i;
    for (size_t s = 0; s < 4; s++) {
        gmm_spec_node *sp;
        gmm_kernel *k;
        ck_assert_int_eq(gmm_spec_parse(spec[s], &sp), GMM_OK);
        ck_assert_int_eq(gmm_kernel_from_spec(sp, &k), GMM_OK);
        double *v = gmm_kernel_values(k);
        for (size_t i = 0; i < gmm_kernel_nparam(k); i++)
            if (isnan(v[i]))
                v[i] = 1.0;
        gmm_stack_term term[2] = {
            {.model = GMM_STACK_KERNEL, .name = "f.t", .value = t, .kernel = k},
            {.model = GMM_STACK_RW1, .name = "f.s", .value = t}};
        gmm_latent *l = NULL;
        ck_assert_int_eq(gmm_latent_stack_alloc(KR, 1, term, 0, &l), GMM_OK);
        size_t n = gmm_latent_dim(l);
        gmm_band *Q = gmm_band_alloc(n, gmm_latent_bandwidth(l), 0, GMM_BAND_SYMMETRIC);
        double ld;
        gmm_status want = s < 3 ? GMM_EINVAL : GMM_OK;
        ck_assert_int_eq(gmm_latent_prior(l, v, Q, &ld), want);
        if (s < 3)
            ck_assert_msg(strstr(gmm_error_message(), "square-root form") != NULL, "%s",
                          gmm_error_message());
        ck_assert_int_eq(gmm_latent_assembled(l), s == 3);
        ck_assert_int_eq(gmm_latent_whiten_setup(l, v), GMM_OK);
        gmm_band_free(Q);
        gmm_latent_free(l);
        l = NULL;
        /* beside an intrinsic rw1: values in the square-root form and the
         * constrained whitening (the CLI's fixtures) */
        ck_assert_int_eq(gmm_latent_stack_alloc(KR, 2, term, 0, &l), GMM_OK);
        double th[GMM_KERNEL_MAXPARAM * 8 + 1];
        size_t nk = gmm_kernel_nparam(k);
        ck_assert_uint_eq(gmm_latent_nparam(l), nk + 1);
        memcpy(th, v, nk * sizeof *th);
        th[nk] = 1.0; /* f.s.variance */
        ck_assert_int_eq(gmm_latent_whiten_setup(l, th), GMM_OK);
        gmm_latent_free(l);
        gmm_kernel_free(k);
        gmm_spec_free(sp);
    }
    /* merge_tol: finite, >= 0, on a kernel term only */
    size_t lv[KR] = {0};
    gmm_stack_term iid = {.model = GMM_STACK_IID, .name = "f.g", .nlevel = 1, .level = lv,
                          .merge_tol = 0.1};
    gmm_latent *l = NULL;
    ck_assert_int_eq(gmm_latent_stack_alloc(KR, 1, &iid, 0, &l), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "merge_tol") != NULL);
    gmm_spec_node *sp;
    gmm_kernel *k;
    ck_assert_int_eq(gmm_spec_parse("matern32(variance=1, lengthscale=2)", &sp), GMM_OK);
    ck_assert_int_eq(gmm_kernel_from_spec(sp, &k), GMM_OK);
    gmm_stack_term kt = {.model = GMM_STACK_KERNEL, .name = "f.t", .value = t, .kernel = k,
                         .merge_tol = -1.0};
    ck_assert_int_eq(gmm_latent_stack_alloc(KR, 1, &kt, 0, &l), GMM_EINVAL);
    kt.merge_tol = INFINITY;
    ck_assert_int_eq(gmm_latent_stack_alloc(KR, 1, &kt, 0, &l), GMM_EINVAL);
    ck_assert(l == NULL);
    gmm_kernel_free(k);
    gmm_spec_free(sp);
}
END_TEST

/* The whitening behind hmc: x = W v has the prior's covariance, so H W W'
 * H' is the dense kernel + iid covariance at the rows; d(xbar . W(theta)
 * v)/dtheta (the kernel's slots through the Cholesky's reverse mode and
 * gmm_ssm_prior_rev at the whitening's theta) against differences. */
typedef struct {
    gmm_latent *l;
    double th[32], *v, *xbar, *x;
} wctx;

static double whiten_dot(void *p)
{
    wctx *w = p;
    size_t n = gmm_latent_dim(w->l);
    ck_assert_int_eq(gmm_latent_whiten_setup(w->l, w->th), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten(w->l, w->v, w->x), GMM_OK);
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += w->xbar[i] * w->x[i];
    return s;
}

START_TEST(test_kernel_whiten)
{
    kcase c;
    kcase_make(&c, _i, 0);
    size_t n = gmm_latent_dim(c.l), np = gmm_latent_nparam(c.l);
    size_t w = gmm_latent_obs_width(c.l);
    const size_t *off = gmm_latent_obs_offset(c.l);
    wctx x = {c.l, {0}, malloc(n * sizeof(double)), malloc(n * sizeof(double)),
              malloc(n * sizeof(double))};
    memcpy(x.th, gmm_latent_param_start(c.l), np * sizeof *x.th);
    double *coef = malloc(KR * w * sizeof *coef), *HW = calloc(KR * n, sizeof *HW);
    ck_assert_int_eq(gmm_latent_obs_coef(c.l, x.th, coef), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_setup(c.l, x.th), GMM_OK);
    /* rows of H W: W' h_r by the transpose */
    for (size_t r = 0; r < KR; r++) {
        memset(x.v, 0, n * sizeof *x.v);
        for (size_t e = 0; e < w; e++)
            x.v[off[r] + e] = coef[r * w + e];
        ck_assert_int_eq(gmm_latent_whiten_t(c.l, x.v, HW + r * n), GMM_OK);
    }
    double kp[16], sg, b0, b1, err = 0.0;
    dense_params(&c, c.o->value, kp, &sg, NULL, &b0, &b1);
    for (size_t i = 0; i < KR; i++)
        for (size_t j = 0; j < KR; j++) {
            double s = 0.0;
            for (size_t a = 0; a < n; a++)
                s += HW[i * n + a] * HW[j * n + a];
            double ref = kcov(&c, kp, c.ts[i] - c.ts[j]) + (c.g[i] == c.g[j] ? sg : 0.0);
            err = fmax(err, fabs(s - ref) / (kp[0] + sg));
        }
    tu_rng r;
    tu_rng_seed(&r, 11);
    for (size_t i = 0; i < n; i++) {
        x.v[i] = tu_normal(&r);
        x.xbar[i] = tu_normal(&r);
    }
    double gb[32] = {0};
    ck_assert_int_eq(gmm_latent_whiten_setup(c.l, x.th), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_rev(c.l, x.v, x.xbar, gb), GMM_OK);
    double gerr = tu_fd_check4(x.th, np, gb, whiten_dot, &x, 1e-3, 1.0, NULL);
    /* the same from the last whiten's v and whiten_t's g (NULL arguments) */
    double gn[32] = {0}, *tmp = malloc(n * sizeof *tmp);
    ck_assert_int_eq(gmm_latent_whiten_setup(c.l, x.th), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_rev(c.l, NULL, NULL, gn), GMM_EINVAL);
    ck_assert_int_eq(gmm_latent_whiten(c.l, x.v, tmp), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_t(c.l, x.xbar, tmp), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_rev(c.l, NULL, NULL, gn), GMM_OK);
    for (size_t i = 0; i < np; i++)
        ck_assert_msg(fabs(gn[i] - gb[i]) <= 1e-9 * fmax(1.0, fabs(gb[i])),
                      "%s: whiten_rev from the saved vectors, %s: %g vs %g", kspec[c.which],
                      gmm_latent_param_name(c.l, i), gn[i], gb[i]);
    free(tmp);
    if (report())
        fprintf(stderr, "stack kernel whiten '%s': H W W'H' %.2e, rev %.2e\n", kspec[c.which], err,
                gerr);
    ck_assert_msg(err < 1e-8, "%s: H W W' H' off the dense covariance by %g", kspec[c.which], err);
    ck_assert_msg(gerr < 1e-6, "%s: whiten_rev rel err %g", kspec[c.which], gerr);
    free(coef);
    free(HW);
    free(x.v);
    free(x.xbar);
    free(x.x);
    kcase_free(&c);
}
END_TEST

/* The square-root form (case 3) under a count-down allocator: each failing
 * allocation of the first evaluation (its workspace, the merged rows, the
 * fold's) or of the first whitening setup is a clean error, and the same
 * call without injection then gives the clean value -- a half-built
 * workspace is never taken for a built one.  _i: 0 Gaussian, 1 Poisson. */
START_TEST(test_kernel_sqrt_enomem)
{
    int poisson = _i;
    kcase c;
    kcase_make(&c, 3, poisson);
    size_t n = gmm_latent_dim(c.l), np = gmm_latent_nparam(c.l);
    double th[32], f0, g0[32], f, g[32], lth[32];
    memcpy(th, c.o->value, c.np * sizeof *th);
    memcpy(lth, gmm_latent_param_start(c.l), np * sizeof *lth);
    double *v = malloc(n * sizeof *v), *x0 = malloc(n * sizeof *x0), *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        v[i] = sin(1.0 + (double)i);
    ck_assert_int_eq(c.o->eval(c.o->ctx, th, &f0, g0), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_setup(c.l, lth), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten(c.l, v, x0), GMM_OK);
    kcase_free(&c);
    int failed = 0, wfailed = 0;
    for (long k = 0; k < 2000; k++) {
        kcase_make(&c, 3, poisson);
        gmm_alloc_fail_after(k);
        gmm_status st = c.o->eval(c.o->ctx, th, &f, g);
        gmm_alloc_fail_after(-1);
        if (st == GMM_OK) {
            kcase_free(&c);
            break;
        }
        failed++;
        ck_assert_int_eq(c.o->eval(c.o->ctx, th, &f, g), GMM_OK);
        ck_assert_msg(fabs(f - f0) <= 1e-12 * fabs(f0), "failure %ld: %.17g vs %.17g", k, f, f0);
        for (size_t i = 0; i < c.np; i++)
            ck_assert_msg(fabs(g[i] - g0[i]) <= 1e-9 * fmax(1.0, fabs(g0[i])),
                          "failure %ld: gradient %zu %.17g vs %.17g", k, i, g[i], g0[i]);
        kcase_free(&c);
    }
    for (long k = 0; k < 2000; k++) {
        kcase_make(&c, 3, poisson);
        gmm_alloc_fail_after(k);
        gmm_status st = gmm_latent_whiten_setup(c.l, lth);
        gmm_alloc_fail_after(-1);
        if (st == GMM_OK) {
            kcase_free(&c);
            break;
        }
        wfailed++;
        ck_assert_int_eq(gmm_latent_whiten_setup(c.l, lth), GMM_OK);
        ck_assert_int_eq(gmm_latent_whiten(c.l, v, x), GMM_OK);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(fabs(x[i] - x0[i]) <= 1e-12 * fmax(1.0, fabs(x0[i])),
                          "whiten failure %ld: x[%zu] %.17g vs %.17g", k, i, x[i], x0[i]);
        kcase_free(&c);
    }
    ck_assert_int_gt(failed, 10);
    ck_assert_int_gt(wfailed, 5);
    free(v);
    free(x0);
    free(x);
}
END_TEST

Suite *model_stack_kernel_suite(void)
{
    Suite *s = suite_create("model_stack_kernel");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_kernel_gaussian_vs_dense, 0, KCASES + KMERGED);
    tcase_add_loop_test(tc, test_kernel_laplace_vs_dense, 0, KCASES + KMERGED);
    /* the assembled form's prior and new rows (by Q^-1): all but case 3 */
    tcase_add_loop_test(tc, test_kernel_prior_rev, 0, KCASES_ASM);
    tcase_add_loop_test(tc, test_kernel_prior_rev, KCASES, KCASES + KMERGED);
    tcase_add_loop_test(tc, test_kernel_new_rows, 0, KCASES_ASM);
    tcase_add_loop_test(tc, test_kernel_new_rows, KCASES, KCASES + KMERGED);
    tcase_add_loop_test(tc, test_kernel_whiten, 0, KCASES + KMERGED);
    tcase_add_test(tc, test_kernel_damped_forms);
    tcase_add_loop_test(tc, test_kernel_sqrt_enomem, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
