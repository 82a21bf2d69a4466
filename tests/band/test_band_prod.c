/* test_band_prod.c -- band products, band-vector products and the
 * band-restricted outer product (band_prod.c) against plain dense loops, and
 * their reverse modes (band_prod_rev.c) against central differences of
 * c = sum W .* output.
 *
 * Tolerances.  Forward: max abs error / max(1, max |reference|) <= PROD_C n
 * eps (inputs N(0,1)).  Reverse: relative FD error <= FD_TOL (entries below
 * FD_FLOOR compared in absolute terms); the outputs are bilinear in the
 * inputs, so central differences are exact up to rounding.  Symmetric inputs
 * are perturbed through their stored entries, so both mirrored entries move:
 * that checks the sensitivity convention of band.h.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/band.h"
#include "support/testutil.h"

#define PROD_C 8.0
#define EPS 2.220446049250313e-16
#define FD_STEP 1e-5
#define FD_FLOOR 1e-2
#define FD_TOL 1e-6
#define FD_SAMPLE 8

static const size_t NS[] = {1, 2, 3, 10, 57};
#define NNS (sizeof NS / sizeof NS[0])

/* Operand shapes: (kl, ku, kind).  n + 2 is clamped to n - 1. */
typedef struct {
    size_t kl, ku;
    gmm_band_kind kind;
} shape;

static size_t shapes(size_t n, shape out[6])
{
    shape s[6] = {{0, 0, GMM_BAND_GENERAL}, {1, 0, GMM_BAND_LOWER},  {0, 2, GMM_BAND_GENERAL},
                  {2, 1, GMM_BAND_GENERAL}, {n / 2, 0, GMM_BAND_LOWER}, {n + 2, n + 2, GMM_BAND_GENERAL}};
    memcpy(out, s, sizeof s);
    return 6;
}

static void fill_vec(double *x, size_t m, tu_rng *r)
{
    for (size_t i = 0; i < m; i++)
        x[i] = tu_normal(r);
}

/* Dense column-major op(D) (a copy). */
static double *dense_op(const gmm_band *A, gmm_trans t)
{
    double *D = tu_band_to_dense(A);
    size_t n = A->n;
    if (t == GMM_TRANS)
        for (size_t j = 0; j < n; j++)
            for (size_t i = j + 1; i < n; i++) {
                double v = D[j * n + i];
                D[j * n + i] = D[i * n + j];
                D[i * n + j] = v;
            }
    return D;
}

/* P Q for dense column-major n x n. */
static double *dense_mul(const double *P, const double *Q, size_t n)
{
    double *R = calloc(n > 0 ? n * n : 1, sizeof *R);
    for (size_t j = 0; j < n; j++)
        for (size_t m = 0; m < n; m++)
            for (size_t i = 0; i < n; i++)
                R[j * n + i] += P[m * n + i] * Q[j * n + m];
    return R;
}

static double dot_band(const gmm_band *W, const gmm_band *X)
{
    double s = 0.0;
    for (size_t j = 0; j < X->n; j++)
        for (size_t i = (j >= X->ku ? j - X->ku : 0); i <= j + X->kl && i < X->n; i++)
            s += *gmm_band_ptr(W, i, j) * *gmm_band_ptr(X, i, j);
    return s;
}

static void expect_edim(gmm_status st, const char *needle)
{
    ck_assert_int_eq(st, GMM_EDIM);
    ck_assert_int_eq(gmm_error_status(), GMM_EDIM);
    ck_assert_msg(strstr(gmm_error_message(), needle) != NULL, "message '%s' lacks '%s'",
                  gmm_error_message(), needle);
}

/* ---- gemm ------------------------------------------------------------------------ */

START_TEST(test_gemm_forward)
{
    tu_rng r;
    tu_rng_seed(&r, 41);
    size_t count = 0;
    for (size_t a = 0; a < NNS; a++) {
        size_t n = NS[a];
        shape sh[6];
        size_t ns = shapes(n, sh);
        for (size_t ia = 0; ia < ns; ia++)
            for (size_t ib = 0; ib < ns; ib++)
                for (int ta = 0; ta <= 1; ta++)
                    for (int tb = 0; tb <= 1; tb++) {
                        gmm_band *A = gmm_band_alloc(n, sh[ia].kl, sh[ia].ku, sh[ia].kind);
                        gmm_band *B = gmm_band_alloc(n, sh[ib].kl, sh[ib].ku, sh[ib].kind);
                        tu_band_fill_random(A, &r);
                        tu_band_fill_random(B, &r);
                        double *Ad = dense_op(A, (gmm_trans)ta), *Bd = dense_op(B, (gmm_trans)tb);
                        double *R = dense_mul(Ad, Bd, n);
                        size_t kl = (ta ? A->ku : A->kl) + (tb ? B->ku : B->kl);
                        size_t ku = (ta ? A->kl : A->ku) + (tb ? B->kl : B->ku);
                        /* The exact band, a narrower and a wider one. */
                        size_t cb[3][2] = {{kl, ku}, {kl / 2, ku ? ku - 1 : 0}, {n + 2, n + 2}};
                        for (int ic = 0; ic < 3; ic++) {
                            gmm_band_kind ck = (ic == 0 && ku == 0) ? GMM_BAND_LOWER
                                                                     : GMM_BAND_GENERAL;
                            gmm_band *C = gmm_band_alloc(n, cb[ic][0], cb[ic][1], ck);
                            tu_band_fill_random(C, &r); /* overwritten */
                            ck_assert_int_eq(gmm_band_gemm((gmm_trans)ta, A, (gmm_trans)tb, B, C),
                                             GMM_OK);
                            double err = tu_band_vs_dense(C, R);
                            ck_assert_msg(err <= PROD_C * n * EPS,
                                          "n %zu A(%zu,%zu) B(%zu,%zu) ta %d tb %d C(%zu,%zu): %g",
                                          n, A->kl, A->ku, B->kl, B->ku, ta, tb, C->kl, C->ku, err);
                            gmm_band_free(C);
                            count++;
                        }
                        free(Ad);
                        free(Bd);
                        free(R);
                        gmm_band_free(A);
                        gmm_band_free(B);
                    }
    }
    ck_assert_uint_gt(count, 2000);
}
END_TEST

typedef struct {
    gmm_trans ta, tb;
    gmm_band *A, *B, *C;
    const gmm_band *W;
} gemm_ctx;

static double gemm_obj(void *vctx)
{
    gemm_ctx *c = vctx;
    gmm_band_gemm(c->ta, c->A, c->tb, c->B, c->C);
    return dot_band(c->W, c->C);
}

/* Abar/Bbar of A's/B's shape against FD; wider ones against the dense
 * Cbar op(B)^T and op(A)^T Cbar (transposed when ta/tb). */
START_TEST(test_gemm_rev)
{
    tu_rng r;
    tu_rng_seed(&r, 42);
    double worst = 0.0;
    for (size_t a = 0; a < NNS; a++) {
        size_t n = NS[a];
        shape sh[6];
        size_t ns = shapes(n, sh);
        for (size_t ia = 0; ia < ns; ia++)
            for (size_t ib = 0; ib < ns; ib++)
                for (int t = 0; t < 4; t++) {
                    if ((ia + ib + (size_t)t) % 2 && n > 10)
                        continue; /* half the grid at n = 57 */
                    gmm_trans ta = (gmm_trans)(t & 1), tb = (gmm_trans)(t >> 1);
                    gmm_band *A = gmm_band_alloc(n, sh[ia].kl, sh[ia].ku, sh[ia].kind);
                    gmm_band *B = gmm_band_alloc(n, sh[ib].kl, sh[ib].ku, sh[ib].kind);
                    gmm_band *Abar = gmm_band_alloc(n, sh[ia].kl, sh[ia].ku, sh[ia].kind);
                    gmm_band *Bbar = gmm_band_alloc(n, sh[ib].kl, sh[ib].ku, sh[ib].kind);
                    gmm_band *Abar2 = gmm_band_alloc(n, A->kl + 1, A->ku + 2, GMM_BAND_GENERAL);
                    gmm_band *Bbar2 = gmm_band_alloc(n, B->kl + 2, B->ku + 1, GMM_BAND_GENERAL);
                    size_t kl = (ta ? A->ku : A->kl) + (tb ? B->ku : B->kl);
                    size_t ku = (ta ? A->kl : A->ku) + (tb ? B->kl : B->ku);
                    /* C exact or narrower than the product. */
                    if ((ia + ib) % 2) {
                        kl /= 2;
                        ku = ku ? ku - 1 : 0;
                    }
                    gmm_band *C = gmm_band_alloc(n, kl, ku, GMM_BAND_GENERAL);
                    gmm_band *W = gmm_band_alloc(n, kl, ku, GMM_BAND_GENERAL);
                    tu_band_fill_random(A, &r);
                    tu_band_fill_random(B, &r);
                    tu_band_fill_random(W, &r);
                    ck_assert_int_eq(gmm_band_gemm_rev(ta, A, tb, B, W, Abar, Bbar), GMM_OK);
                    ck_assert_int_eq(gmm_band_gemm_rev(ta, A, tb, B, W, Abar2, Bbar2), GMM_OK);

                    double *Wd = tu_band_to_dense(W);
                    double *BtT = dense_op(B, tb == GMM_TRANS ? GMM_NOTRANS : GMM_TRANS);
                    double *AtT = dense_op(A, ta == GMM_TRANS ? GMM_NOTRANS : GMM_TRANS);
                    double *Ga = dense_mul(Wd, BtT, n), *Gb = dense_mul(AtT, Wd, n);
                    gmm_band *tmp = gmm_band_alloc(n, n, n, GMM_BAND_GENERAL);
                    /* Abar = op(A)bar or its transpose; compare in A's orientation. */
                    for (int which = 0; which < 2; which++) {
                        double *Gd = which ? Gb : Ga;
                        int tr = which ? tb == GMM_TRANS : ta == GMM_TRANS;
                        for (size_t j = 0; j < n; j++)
                            for (size_t i = 0; i < n; i++)
                                *gmm_band_ptr(tmp, i, j) = tr ? Gd[i * n + j] : Gd[j * n + i];
                        double *Td = tu_band_to_dense(tmp);
                        double err = tu_band_vs_dense(which ? Bbar2 : Abar2, Td);
                        ck_assert_msg(err <= PROD_C * n * EPS, "n %zu: dense %s err %g", n,
                                      which ? "Bbar" : "Abar", err);
                        free(Td);
                    }

                    gemm_ctx c = {ta, tb, A, B, C, W};
                    double e1 = tu_fd_check_band(A, Abar, gemm_obj, &c, FD_STEP, FD_FLOOR,
                                                 FD_SAMPLE, &r, NULL, NULL);
                    double e2 = tu_fd_check_band(B, Bbar, gemm_obj, &c, FD_STEP, FD_FLOOR,
                                                 FD_SAMPLE, &r, NULL, NULL);
                    ck_assert_msg(e1 <= FD_TOL && e2 <= FD_TOL,
                                  "n %zu A(%zu,%zu) B(%zu,%zu) ta %d tb %d: fd A %g B %g", n,
                                  A->kl, A->ku, B->kl, B->ku, ta, tb, e1, e2);
                    worst = fmax(worst, fmax(e1, e2));
                    free(Wd);
                    free(BtT);
                    free(AtT);
                    free(Ga);
                    free(Gb);
                    gmm_band_free(tmp);
                    gmm_band_free(A);
                    gmm_band_free(B);
                    gmm_band_free(Abar);
                    gmm_band_free(Bbar);
                    gmm_band_free(Abar2);
                    gmm_band_free(Bbar2);
                    gmm_band_free(C);
                    gmm_band_free(W);
                }
    }
    if (getenv("GMM_TEST_REPORT"))
        fprintf(stderr, "gemm_rev: worst fd rel err %.3g\n", worst);
}
END_TEST

typedef struct {
    gmm_band *A, *C;
    const gmm_band *W;
} gram_ctx;

static double gram_obj(void *vctx)
{
    gram_ctx *c = vctx;
    gmm_band_gemm(GMM_NOTRANS, c->A, GMM_TRANS, c->A, c->C);
    return dot_band(c->W, c->C);
}

/* C = A A^T uses A twice: passing the same adjoint as Abar and Bbar collects
 * both contributions. */
START_TEST(test_gemm_rev_same_operand)
{
    tu_rng r;
    tu_rng_seed(&r, 43);
    size_t n = 10;
    gmm_band *A = gmm_band_alloc(n, 2, 1, GMM_BAND_GENERAL);
    gmm_band *Abar = gmm_band_alloc(n, 2, 1, GMM_BAND_GENERAL);
    gmm_band *C = gmm_band_alloc(n, 3, 3, GMM_BAND_GENERAL);
    gmm_band *W = gmm_band_alloc(n, 3, 3, GMM_BAND_GENERAL);
    tu_band_fill_random(A, &r);
    tu_band_fill_random(W, &r);
    ck_assert_int_eq(gmm_band_gemm_rev(GMM_NOTRANS, A, GMM_TRANS, A, W, Abar, Abar), GMM_OK);
    gram_ctx c = {A, C, W};
    double e = tu_fd_check_band(A, Abar, gram_obj, &c, FD_STEP, FD_FLOOR, 1000, &r, NULL, NULL);
    ck_assert_msg(e <= FD_TOL, "fd err %g", e);
    expect_edim(gmm_band_gemm_rev(GMM_NOTRANS, A, GMM_TRANS, A, W, W, NULL), "alias");
    expect_edim(gmm_band_gemm_rev(GMM_NOTRANS, A, GMM_TRANS, A, W, NULL, A), "alias");
    gmm_band_free(A);
    gmm_band_free(Abar);
    gmm_band_free(C);
    gmm_band_free(W);
}
END_TEST

/* ---- gemv ------------------------------------------------------------------------ */

/* Shapes plus symmetric operands: the hand loop's bandwidths (1, 3, 12)
 * and dsbmv's (13, and n + 2 clamped to n - 1 = 56 at n = 57). */
static size_t gemv_shapes(size_t n, shape out[11])
{
    size_t m = shapes(n, out);
    out[m++] = (shape){1, 0, GMM_BAND_SYMMETRIC};
    out[m++] = (shape){3, 0, GMM_BAND_SYMMETRIC};
    out[m++] = (shape){12, 0, GMM_BAND_SYMMETRIC};
    out[m++] = (shape){13, 0, GMM_BAND_SYMMETRIC};
    out[m++] = (shape){n + 2, 0, GMM_BAND_SYMMETRIC};
    return m;
}

typedef struct {
    gmm_trans t;
    double alpha;
    gmm_band *A;
    double *x, *y;
    const double *w;
} gemv_ctx;

static double gemv_obj(void *vctx)
{
    gemv_ctx *c = vctx;
    gmm_band_gemv(c->t, c->alpha, c->A, c->x, 0.0, c->y);
    double s = 0.0;
    for (size_t i = 0; i < c->A->n; i++)
        s += c->w[i] * c->y[i];
    return s;
}

START_TEST(test_gemv_forward_and_rev)
{
    tu_rng r;
    tu_rng_seed(&r, 51);
    double worst = 0.0;
    for (size_t a = 0; a < NNS; a++) {
        size_t n = NS[a];
        shape sh[11];
        size_t ns = gemv_shapes(n, sh);
        double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *y0 = malloc(n * sizeof *y);
        double *w = malloc(n * sizeof *w), *ref = malloc(n * sizeof *ref);
        double *xbar = malloc(n * sizeof *xbar), *p = malloc(n * sizeof *p);
        for (size_t is = 0; is < ns; is++)
            for (int t = 0; t <= 1; t++)
                for (int ib = 0; ib <= 1; ib++) {
                    gmm_trans tt = (gmm_trans)t;
                    double alpha = 1.3, beta = ib ? -0.7 : 0.0;
                    gmm_band *A = gmm_band_alloc(n, sh[is].kl, sh[is].ku, sh[is].kind);
                    gmm_band *Abar = gmm_band_alloc(n, sh[is].kl, sh[is].ku, sh[is].kind);
                    tu_band_fill_random(A, &r);
                    fill_vec(x, n, &r);
                    fill_vec(y0, n, &r);
                    fill_vec(w, n, &r);
                    if (!ib)
                        y0[n - 1] = NAN; /* beta = 0 overwrites */
                    double *Ad = dense_op(A, tt);
                    for (size_t i = 0; i < n; i++) {
                        double s = 0.0;
                        for (size_t j = 0; j < n; j++)
                            s += Ad[j * n + i] * x[j];
                        ref[i] = alpha * s + (ib ? beta * y0[i] : 0.0);
                    }
                    memcpy(y, y0, n * sizeof *y);
                    ck_assert_int_eq(gmm_band_gemv(tt, alpha, A, x, beta, y), GMM_OK);
                    double err = tu_max_rel_diff(y, ref, n);
                    ck_assert_msg(err <= PROD_C * n * EPS, "n %zu A(%zu,%zu,%d) t %d: %g", n,
                                  A->kl, A->ku, (int)A->kind, t, err);

                    /* Reverse, with xbar accumulating onto p. */
                    fill_vec(p, n, &r);
                    memcpy(xbar, p, n * sizeof *p);
                    ck_assert_int_eq(gmm_band_gemv_rev(tt, alpha, A, x, w, Abar, xbar), GMM_OK);
                    for (size_t i = 0; i < n; i++)
                        xbar[i] -= p[i];
                    gemv_ctx c = {tt, alpha, A, x, y, w};
                    double e1 = tu_fd_check_band(A, Abar, gemv_obj, &c, FD_STEP, FD_FLOOR,
                                                 FD_SAMPLE * 4, &r, NULL, NULL);
                    double e2 = tu_fd_check(x, n, xbar, gemv_obj, &c, FD_STEP, FD_FLOOR, NULL);
                    ck_assert_msg(e1 <= FD_TOL && e2 <= FD_TOL,
                                  "n %zu A(%zu,%zu,%d) t %d: fd A %g x %g", n, A->kl, A->ku,
                                  (int)A->kind, t, e1, e2);
                    worst = fmax(worst, fmax(e1, e2));
                    free(Ad);
                    gmm_band_free(A);
                    gmm_band_free(Abar);
                }
        free(x);
        free(y);
        free(y0);
        free(w);
        free(ref);
        free(xbar);
        free(p);
    }
    if (getenv("GMM_TEST_REPORT"))
        fprintf(stderr, "gemv_rev: worst fd rel err %.3g\n", worst);
}
END_TEST

/* ---- outer ------------------------------------------------------------------------ */

typedef struct {
    double alpha;
    size_t k, ldm, ldv;
    double *M, *V;
    gmm_band *O;
    const gmm_band *W;
} outer_ctx;

static double outer_obj(void *vctx)
{
    outer_ctx *c = vctx;
    gmm_band_set_zero(c->O);
    gmm_band_outer(c->alpha, c->k, c->M, c->ldm, c->V, c->ldv, c->O);
    return dot_band(c->W, c->O);
}

START_TEST(test_outer_forward_and_rev)
{
    tu_rng r;
    tu_rng_seed(&r, 61);
    double worst = 0.0;
    for (size_t a = 0; a < NNS; a++) {
        size_t n = NS[a];
        shape sh[11];
        size_t ns = gemv_shapes(n, sh);
        for (size_t is = 0; is < ns; is++)
            for (size_t k = 1; k <= 3; k += 2) {
                double alpha = 0.7;
                size_t ldm = n + 1, ldv = n + 2, ldmb = n + 3, ldvb = n;
                gmm_band *O = gmm_band_alloc(n, sh[is].kl, sh[is].ku, sh[is].kind);
                gmm_band *O0 = gmm_band_alloc(n, sh[is].kl, sh[is].ku, sh[is].kind);
                gmm_band *W = gmm_band_alloc(n, sh[is].kl, sh[is].ku, sh[is].kind);
                double *M = malloc(ldm * k * sizeof *M), *V = malloc(ldv * k * sizeof *V);
                double *Mbar = calloc(ldmb * k, sizeof *Mbar), *Vbar = calloc(ldvb * k, sizeof *Vbar);
                fill_vec(M, ldm * k, &r);
                fill_vec(V, ldv * k, &r);
                tu_band_fill_random(O0, &r);
                tu_band_fill_random(W, &r);
                gmm_band_copy(O, O0);
                ck_assert_int_eq(gmm_band_outer(alpha, k, M, ldm, V, ldv, O), GMM_OK);
                double err = 0.0;
                for (size_t j = 0; j < n; j++)
                    for (size_t i = 0; i < n; i++) {
                        if (!gmm_band_in_band(O, i, j))
                            continue;
                        double s = 0.0;
                        for (size_t q = 0; q < k; q++) {
                            s += M[q * ldm + i] * V[q * ldv + j];
                            if (O->kind == GMM_BAND_SYMMETRIC && i != j)
                                s += V[q * ldv + i] * M[q * ldm + j];
                        }
                        double want = *gmm_band_ptr(O0, i, j) + alpha * s;
                        err = fmax(err, fabs(*gmm_band_ptr(O, i, j) - want));
                    }
                ck_assert_msg(err <= PROD_C * n * EPS * 10, "n %zu O(%zu,%zu,%d) k %zu: %g", n,
                              O->kl, O->ku, (int)O->kind, k, err);

                ck_assert_int_eq(gmm_band_outer_rev(alpha, k, M, ldm, V, ldv, W, Mbar, ldmb,
                                                    Vbar, ldvb),
                                 GMM_OK);
                double *am = calloc(ldm * k, sizeof *am), *av = calloc(ldv * k, sizeof *av);
                for (size_t q = 0; q < k; q++) {
                    memcpy(am + q * ldm, Mbar + q * ldmb, n * sizeof *am);
                    memcpy(av + q * ldv, Vbar + q * ldvb, n * sizeof *av);
                }
                outer_ctx c = {alpha, k, ldm, ldv, M, V, O, W};
                double e1 = tu_fd_check_sample(M, ldm * k, am, outer_obj, &c, FD_STEP, FD_FLOOR,
                                               FD_SAMPLE * 4, &r, NULL);
                double e2 = tu_fd_check_sample(V, ldv * k, av, outer_obj, &c, FD_STEP, FD_FLOOR,
                                               FD_SAMPLE * 4, &r, NULL);
                ck_assert_msg(e1 <= FD_TOL && e2 <= FD_TOL,
                              "n %zu O(%zu,%zu,%d) k %zu: fd M %g V %g", n, O->kl, O->ku,
                              (int)O->kind, k, e1, e2);
                worst = fmax(worst, fmax(e1, e2));
                free(am);
                free(av);
                free(M);
                free(V);
                free(Mbar);
                free(Vbar);
                gmm_band_free(O);
                gmm_band_free(O0);
                gmm_band_free(W);
            }
    }
    if (getenv("GMM_TEST_REPORT"))
        fprintf(stderr, "outer_rev: worst fd rel err %.3g\n", worst);
}
END_TEST

/* The worked example of band.h: c = trace(S Q) = dot(S, Q) for symmetric S,
 * Q; through y = Q x, c = x^T Q x gives Qbar(i,j) = 2 x_i x_j off the
 * diagonal and x_i^2 on it. */
START_TEST(test_gemv_rev_symmetric_convention)
{
    size_t n = 3;
    gmm_band *Q = gmm_band_alloc(n, 1, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Qbar = gmm_band_alloc(n, 1, 0, GMM_BAND_SYMMETRIC);
    double x[3] = {1.0, 2.0, -3.0}, xbar[3] = {0};
    ck_assert_int_eq(gmm_band_gemv_rev(GMM_NOTRANS, 1.0, Q, x, x, Qbar, xbar), GMM_OK);
    ck_assert(*gmm_band_ptr(Qbar, 0, 0) == 1.0);
    ck_assert(*gmm_band_ptr(Qbar, 1, 0) == 4.0);
    ck_assert(*gmm_band_ptr(Qbar, 2, 1) == -12.0);
    ck_assert(*gmm_band_ptr(Qbar, 2, 2) == 9.0);
    gmm_band_free(Q);
    gmm_band_free(Qbar);
}
END_TEST

/* ---- errors and edge cases ------------------------------------------------------- */

START_TEST(test_prod_errors)
{
    size_t n = 5;
    gmm_band *A = gmm_band_alloc(n, 1, 1, GMM_BAND_GENERAL);
    gmm_band *B = gmm_band_alloc(n, 1, 0, GMM_BAND_LOWER);
    gmm_band *C = gmm_band_alloc(n, 2, 1, GMM_BAND_GENERAL);
    gmm_band *CL = gmm_band_alloc(n, 2, 0, GMM_BAND_LOWER);
    gmm_band *S = gmm_band_alloc(n, 1, 0, GMM_BAND_SYMMETRIC);
    gmm_band *A6 = gmm_band_alloc(6, 1, 1, GMM_BAND_GENERAL);
    double x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {0};

    expect_edim(gmm_band_gemm(GMM_NOTRANS, A, GMM_NOTRANS, B, A), "alias");
    expect_edim(gmm_band_gemm(GMM_NOTRANS, B, GMM_NOTRANS, A, A), "alias");
    expect_edim(gmm_band_gemm(GMM_NOTRANS, A6, GMM_NOTRANS, B, C), "n differs");
    expect_edim(gmm_band_gemm(GMM_NOTRANS, S, GMM_NOTRANS, B, C), "SYMMETRIC");
    expect_edim(gmm_band_gemm(GMM_NOTRANS, A, GMM_NOTRANS, B, CL), "LOWER");
    expect_edim(gmm_band_gemm(GMM_NOTRANS, B, GMM_TRANS, B, CL), "LOWER");
    ck_assert_int_eq(gmm_band_gemm(GMM_NOTRANS, B, GMM_NOTRANS, B, CL), GMM_OK);
    expect_edim(gmm_band_gemm_rev(GMM_NOTRANS, A, GMM_NOTRANS, B, C, A6, NULL), "n differs");
    expect_edim(gmm_band_gemm_rev(GMM_NOTRANS, A, GMM_NOTRANS, B, C, S, NULL), "GENERAL");
    expect_edim(gmm_band_gemv(GMM_NOTRANS, 1.0, A, x, 0.0, x), "alias");
    expect_edim(gmm_band_gemv_rev(GMM_NOTRANS, 1.0, S, x, y, A, NULL), "SYMMETRIC");
    expect_edim(gmm_band_gemv_rev(GMM_NOTRANS, 1.0, A, x, y, S, NULL), "SYMMETRIC");
    expect_edim(gmm_band_gemv_rev(GMM_NOTRANS, 1.0, A, x, y, A6, NULL), "n differs");
    expect_edim(gmm_band_outer(1.0, 2, x, 4, x, 5, A), "leading");
    expect_edim(gmm_band_outer_rev(1.0, 1, x, 5, x, 5, A, y, 4, NULL, 0), "leading");
    gmm_band_free(A);
    gmm_band_free(B);
    gmm_band_free(C);
    gmm_band_free(CL);
    gmm_band_free(S);
    gmm_band_free(A6);
}
END_TEST

START_TEST(test_prod_empty)
{
    gmm_band *A = gmm_band_alloc(0, 1, 1, GMM_BAND_GENERAL);
    gmm_band *B = gmm_band_alloc(0, 1, 0, GMM_BAND_LOWER);
    gmm_band *C = gmm_band_alloc(0, 2, 1, GMM_BAND_GENERAL);
    gmm_band *S = gmm_band_alloc(0, 1, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Abar = gmm_band_alloc(0, 1, 1, GMM_BAND_GENERAL);
    gmm_band *Bbar = gmm_band_alloc(0, 1, 0, GMM_BAND_LOWER);
    gmm_band *Sbar = gmm_band_alloc(0, 1, 0, GMM_BAND_SYMMETRIC);
    double x[1] = {1.0}, y[1] = {2.0};
    ck_assert_int_eq(gmm_band_gemm(GMM_TRANS, A, GMM_NOTRANS, B, C), GMM_OK);
    ck_assert_int_eq(gmm_band_gemm_rev(GMM_TRANS, A, GMM_NOTRANS, B, C, Abar, Bbar), GMM_OK);
    ck_assert_int_eq(gmm_band_gemv(GMM_NOTRANS, 1.0, S, x, 0.0, y), GMM_OK);
    ck_assert_int_eq(gmm_band_gemv_rev(GMM_NOTRANS, 1.0, S, x, y, Sbar, x), GMM_OK);
    ck_assert_int_eq(gmm_band_outer(1.0, 3, x, 0, y, 0, S), GMM_OK);
    ck_assert_int_eq(gmm_band_outer_rev(1.0, 3, x, 0, y, 0, S, x, 0, y, 0), GMM_OK);
    ck_assert(x[0] == 1.0 && y[0] == 2.0);
    gmm_band_free(A);
    gmm_band_free(B);
    gmm_band_free(C);
    gmm_band_free(S);
    gmm_band_free(Abar);
    gmm_band_free(Bbar);
    gmm_band_free(Sbar);
}
END_TEST

Suite *band_prod_suite(void)
{
    Suite *s = suite_create("band_prod");
    TCase *tc = tcase_create("prod");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_gemm_forward);
    tcase_add_test(tc, test_gemm_rev);
    tcase_add_test(tc, test_gemm_rev_same_operand);
    tcase_add_test(tc, test_gemv_forward_and_rev);
    tcase_add_test(tc, test_outer_forward_and_rev);
    tcase_add_test(tc, test_gemv_rev_symmetric_convention);
    tcase_add_test(tc, test_prod_errors);
    tcase_add_test(tc, test_prod_empty);
    suite_add_tcase(s, tc);
    return s;
}
