/* test_stack_ts.c -- the time-series components and interactions of the
 * stacked latent (stack.h AR1, SEASONAL, GROUP, REPLICATE) against a dense
 * computation built here from their definitions, not from the tool's Q:
 * the precision (AR1's tridiagonal, SEASONAL's S'S, the scaled Besag
 * Laplacian from the dense pseudo-inverse, the Kronecker products in
 * group-major order), the constraints the documentation names (SEASONAL:
 * A = N', the differences of the residue classes' indicators; a group
 * structure: the main model's within each group, or for an intrinsic group
 * structure sum_g x_(g,i) = 0 per main latent), and the constrained prior's
 * covariance by conditioning N(0, (Q + A'A)^-1) on A x = 0 (A spans Q's
 * null space) -- so neither the pinning nor the band enter.  The Gaussian
 * log marginal likelihood of y = x[idx] + noise is compared to 1e-8
 * relative, its gradient against fourth-order differences of the dense
 * value.  Also: new rows of AR1 against its definition, and the refusals.
 * GMM_TEST_REPORT=1 prints the measured errors. */
#include <check.h>
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/graph.h"
#include "gmm/latent.h"
#include "gmm/stack.h"
#include "support/testutil.h"

#define NR 30
#define NMAX 64

static int report(void) { return getenv("GMM_TEST_REPORT") != NULL; }

/* ---- dense structures (row-major, n x n) ---------------------------------- */

static void ar1_dense(double *Q, size_t n, double v, double rho)
{
    memset(Q, 0, n * n * sizeof *Q);
    double a = 1.0 / (v * (1.0 - rho * rho));
    for (size_t i = 0; i < n; i++) {
        Q[i * n + i] = a * (i == 0 || i + 1 == n ? 1.0 : 1.0 + rho * rho);
        if (i > 0)
            Q[i * n + i - 1] = Q[(i - 1) * n + i] = -rho * a;
    }
}

/* D'D / v, D the k-th differences (k = 1, 2) at unit spacing; k = 0: I / v */
static void diff_dense(double *Q, size_t n, int k, double v)
{
    memset(Q, 0, n * n * sizeof *Q);
    static const double d1[2] = {-1, 1}, d2[3] = {1, -2, 1};
    const double *d = k == 1 ? d1 : d2;
    if (k == 0) {
        for (size_t i = 0; i < n; i++)
            Q[i * n + i] = 1.0 / v;
        return;
    }
    for (size_t s = 0; s + (size_t)k < n; s++)
        for (int a = 0; a <= k; a++)
            for (int b = 0; b <= k; b++)
                Q[(s + a) * n + s + b] += d[a] * d[b] / v;
}

/* RW1 on sorted values t (m): sum (x_{j+1} - x_j)^2 / (v dt) */
static void rw1_dense(double *Q, const double *t, size_t m, double v)
{
    memset(Q, 0, m * m * sizeof *Q);
    for (size_t j = 0; j + 1 < m; j++) {
        double w = 1.0 / (v * (t[j + 1] - t[j]));
        Q[j * m + j] += w;
        Q[(j + 1) * m + j + 1] += w;
        Q[j * m + j + 1] -= w;
        Q[(j + 1) * m + j] -= w;
    }
}

static void seasonal_dense(double *Q, size_t n, size_t m, double v)
{
    memset(Q, 0, n * n * sizeof *Q);
    for (size_t s = 0; s + m <= n; s++)
        for (size_t a = s; a < s + m; a++)
            for (size_t b = s; b < s + m; b++)
                Q[a * n + b] += 1.0 / v;
}

/* The scaled Besag R* = c R of a connected graph: c the geometric mean of
 * the diagonal of R's pseudo-inverse (the sum-to-zero field's variances). */
static void besag_dense(double *Q, const gmm_graph *g, double v, double *mvar)
{
    size_t n = g->n;
    gsl_matrix *R = gsl_matrix_calloc(n, n), *E = gsl_matrix_alloc(n, n);
    gsl_vector *ev = gsl_vector_alloc(n);
    for (size_t i = 0; i < n; i++)
        for (size_t p = g->ptr[i]; p < g->ptr[i + 1]; p++) {
            gsl_matrix_set(R, i, g->adj[p], -1.0);
            gsl_matrix_set(R, i, i, gsl_matrix_get(R, i, i) + 1.0);
        }
    gsl_matrix *Rc = gsl_matrix_alloc(n, n);
    gsl_matrix_memcpy(Rc, R);
    gsl_eigen_symmv_workspace *w = gsl_eigen_symmv_alloc(n);
    gsl_eigen_symmv(Rc, ev, E, w);
    double lsum = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = 0.0;
        for (size_t k = 0; k < n; k++)
            if (gsl_vector_get(ev, k) > 1e-9)
                d += gsl_matrix_get(E, i, k) * gsl_matrix_get(E, i, k) / gsl_vector_get(ev, k);
        lsum += log(d);
    }
    double c = exp(lsum / (double)n);
    for (size_t i = 0; i < n && mvar; i++) { /* the scaled field's: diag(R^+) / c */
        double d = 0.0;
        for (size_t k = 0; k < n; k++)
            if (gsl_vector_get(ev, k) > 1e-9)
                d += gsl_matrix_get(E, i, k) * gsl_matrix_get(E, i, k) / gsl_vector_get(ev, k);
        mvar[i] = d / c;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            Q[i * n + j] = c * gsl_matrix_get(R, i, j) / v;
    gsl_eigen_symmv_free(w);
    gsl_matrix_free(R);
    gsl_matrix_free(Rc);
    gsl_matrix_free(E);
    gsl_vector_free(ev);
}

/* K = C (x) M, group-major: K[(g n + i), (h n + j)] = C[g h] M[i j] */
static void kron_dense(double *K, const double *C, size_t G, const double *M, size_t n)
{
    size_t N = G * n;
    for (size_t g = 0; g < G; g++)
        for (size_t h = 0; h < G; h++)
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++)
                    K[(g * n + i) * N + h * n + j] = C[g * G + h] * M[i * n + j];
}

/* log N(y; 0, H S H' + noise I), S the covariance of N(0, (Q + A'A)^-1)
 * given A x = 0 (k rows); H reads x[idx[r]]. */
static double dense_loglik(const double *Q, size_t n, const double *A, size_t k,
                           const size_t *idx, const double *y, size_t nr, double noise)
{
    gsl_matrix *P = gsl_matrix_alloc(n, n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double s = Q[i * n + j];
            for (size_t c = 0; c < k; c++)
                s += A[c * n + i] * A[c * n + j];
            gsl_matrix_set(P, i, j, s);
        }
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(P), GSL_SUCCESS);
    ck_assert_int_eq(gsl_linalg_cholesky_invert(P), GSL_SUCCESS); /* P := Sigma0 */
    if (k) {
        gsl_matrix *SA = gsl_matrix_alloc(n, k), *M = gsl_matrix_alloc(k, k);
        for (size_t i = 0; i < n; i++)
            for (size_t c = 0; c < k; c++) {
                double s = 0.0;
                for (size_t j = 0; j < n; j++)
                    s += gsl_matrix_get(P, i, j) * A[c * n + j];
                gsl_matrix_set(SA, i, c, s);
            }
        for (size_t a = 0; a < k; a++)
            for (size_t b = 0; b < k; b++) {
                double s = 0.0;
                for (size_t j = 0; j < n; j++)
                    s += A[a * n + j] * gsl_matrix_get(SA, j, b);
                gsl_matrix_set(M, a, b, s);
            }
        ck_assert_int_eq(gsl_linalg_cholesky_decomp1(M), GSL_SUCCESS);
        gsl_linalg_cholesky_invert(M);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double s = 0.0;
                for (size_t a = 0; a < k; a++)
                    for (size_t b = 0; b < k; b++)
                        s += gsl_matrix_get(SA, i, a) * gsl_matrix_get(M, a, b) *
                             gsl_matrix_get(SA, j, b);
                gsl_matrix_set(P, i, j, gsl_matrix_get(P, i, j) - s);
            }
        gsl_matrix_free(SA);
        gsl_matrix_free(M);
    }
    gsl_matrix *C = gsl_matrix_alloc(nr, nr);
    for (size_t a = 0; a < nr; a++)
        for (size_t b = 0; b < nr; b++)
            gsl_matrix_set(C, a, b, gsl_matrix_get(P, idx[a], idx[b]) + (a == b ? noise : 0.0));
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(C), GSL_SUCCESS);
    gsl_vector *yv = gsl_vector_alloc(nr), *al = gsl_vector_alloc(nr);
    for (size_t a = 0; a < nr; a++)
        gsl_vector_set(yv, a, y[a]);
    gsl_linalg_cholesky_solve(C, yv, al);
    double q = 0.0, lc = 0.0;
    for (size_t a = 0; a < nr; a++) {
        q += y[a] * gsl_vector_get(al, a);
        lc += 2.0 * log(gsl_matrix_get(C, a, a));
    }
    gsl_matrix_free(P);
    gsl_matrix_free(C);
    gsl_vector_free(yv);
    gsl_vector_free(al);
    return -0.5 * (double)nr * log(2.0 * M_PI) - 0.5 * lc - 0.5 * q;
}

/* ---- cases --------------------------------------------------------------------- */

enum { C_AR1, C_AR1_NEG, C_SEASONAL, C_BESAG_AR1, C_RW1_AR1, C_IID_RW1, C_REPLICATE,
       C_AR1_IID, NCASE };
static const char *case_name[] = {"ar1",        "ar1 rho -0.95", "seasonal",   "besag x ar1",
                                   "rw1 x ar1",  "iid x rw1",     "rw1 replicate", "ar1 + iid"};

typedef struct {
    gmm_graph *graph;
    gmm_latent *l;
    size_t nr, np;
    size_t lev[NR];
    double val[NR], grp[NR], val2[NR];
    double y[NR];
    double p[4]; /* theta then noise */
    gmm_stack_term t[2];
    size_t K;
} tcase;

/* A graph of 5 nodes: a ring of 4 with a tail. */
static gmm_graph *test_graph(void)
{
    size_t ei[] = {0, 1, 2, 3, 3}, ej[] = {1, 2, 3, 0, 4};
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(5, 5, ei, ej, NULL, NULL, NULL, &g), GMM_OK);
    return g;
}

static void case_make(tcase *c, int which)
{
    memset(c, 0, sizeof *c);
    tu_rng r;
    tu_rng_seed(&r, 77 + (uint64_t)which);
    c->nr = NR;
    c->K = 1;
    gmm_stack_term *t = &c->t[0];
    t->name = "f";
    for (size_t i = 0; i < NR; i++) {
        c->y[i] = 0.7 * tu_normal(&r);
        /* integer positions 3 .. 14 with a gap at 9 and repeats */
        double v = 3.0 + (double)((i * 7) % 12);
        c->val[i] = v == 9.0 ? 10.0 : v;
        c->grp[i] = (double)(1 + (i * 5) % 4); /* groups 1 .. 4 */
        c->lev[i] = (i * 3) % 5;
    }
    switch (which) {
    case C_AR1:
    case C_AR1_NEG:
        t->model = GMM_STACK_AR1;
        t->value = c->val;
        c->np = 2;
        c->p[0] = 0.8;
        c->p[1] = which == C_AR1 ? 0.6 : -0.95;
        break;
    case C_SEASONAL:
        t->model = GMM_STACK_SEASONAL;
        t->value = c->val;
        t->season = 4;
        c->np = 1;
        c->p[0] = 0.5;
        break;
    case C_BESAG_AR1:
        c->graph = test_graph();
        t->model = GMM_STACK_BESAG;
        t->graph = c->graph;
        t->level = c->lev;
        t->nlevel = 5;
        t->group = c->grp;
        t->control = GMM_STACK_AR1;
        c->np = 2;
        c->p[0] = 1.3;
        c->p[1] = 0.7;
        break;
    case C_RW1_AR1:
    case C_REPLICATE:
        for (size_t i = 0; i < NR; i++) /* values 0, 1, 2.5, 4, 7 */
            c->val[i] = (double[]){0, 1, 2.5, 4, 7}[(i * 2) % 5];
        t->model = GMM_STACK_RW1;
        t->value = c->val;
        if (which == C_RW1_AR1) {
            t->group = c->grp;
            t->control = GMM_STACK_AR1;
        } else {
            t->replicate = c->grp;
        }
        c->np = which == C_RW1_AR1 ? 2 : 1;
        c->p[0] = 0.9;
        c->p[1] = -0.4;
        break;
    case C_IID_RW1:
        t->model = GMM_STACK_IID;
        t->level = c->lev;
        t->nlevel = 5;
        t->group = c->grp;
        t->control = GMM_STACK_RW1;
        c->np = 1;
        c->p[0] = 0.6;
        break;
    case C_AR1_IID:
        t->model = GMM_STACK_AR1;
        t->value = c->val;
        c->t[1] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "g", .level = c->lev,
                                   .nlevel = 5};
        c->K = 2;
        c->np = 3;
        c->p[0] = 1.1;
        c->p[1] = 0.85;
        c->p[2] = 0.4;
        break;
    }
    c->p[c->np] = 0.3; /* noise */
    ck_assert_int_eq(gmm_latent_stack_alloc(NR, c->K, c->t, 0, &c->l), GMM_OK);
}

static void case_free(tcase *c)
{
    gmm_latent_free(c->l);
    gmm_graph_free(c->graph);
}

/* The dense model at theta p: Q (NMAX^2), A (rows k), the rows' local
 * indices in the components' concatenated local order. */
static double case_dense(tcase *c, const double *p)
{
    static double Q[NMAX * NMAX], A[NMAX * NMAX], M[NMAX * NMAX], C[16 * 16];
    size_t idx[NR], n = 0, k = 0;
    const double *val = c->val;
    memset(A, 0, sizeof A);
    if (c->t[0].model == GMM_STACK_AR1) { /* positions 3 .. 14 */
        n = 12;
        ar1_dense(M, n, p[0], p[1]);
        for (size_t r = 0; r < NR; r++)
            idx[r] = (size_t)(val[r] - 3.0);
        if (c->K == 2) { /* + iid on lev: block diagonal */
            size_t N = n + 5;
            memset(Q, 0, N * N * sizeof *Q);
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++)
                    Q[i * N + j] = M[i * n + j];
            for (size_t i = 0; i < 5; i++)
                Q[(n + i) * N + n + i] = 1.0 / p[2];
            /* rows read x_ar1[idx] + x_iid[lev]: H has two entries per row;
             * with H x = L x, L of rank nr, the covariance is L S L' */
            static double L[NR * NMAX], S[NMAX * NMAX];
            memset(L, 0, sizeof L);
            for (size_t r = 0; r < NR; r++) {
                L[r * N + idx[r]] = 1.0;
                L[r * N + n + c->lev[r]] = 1.0;
            }
            /* S = Q^-1 (proper) and the marginal of L x */
            gsl_matrix *P = gsl_matrix_alloc(N, N);
            for (size_t i = 0; i < N; i++)
                for (size_t j = 0; j < N; j++)
                    gsl_matrix_set(P, i, j, Q[i * N + j]);
            gsl_linalg_cholesky_decomp1(P);
            gsl_linalg_cholesky_invert(P);
            for (size_t i = 0; i < N; i++)
                for (size_t j = 0; j < N; j++)
                    S[i * N + j] = gsl_matrix_get(P, i, j);
            gsl_matrix_free(P);
            gsl_matrix *Cy = gsl_matrix_alloc(NR, NR);
            for (size_t a = 0; a < NR; a++)
                for (size_t b = 0; b < NR; b++) {
                    double s = a == b ? p[3] : 0.0;
                    for (size_t i = 0; i < N; i++)
                        for (size_t j = 0; j < N; j++)
                            s += L[a * N + i] * S[i * N + j] * L[b * N + j];
                    gsl_matrix_set(Cy, a, b, s);
                }
            gsl_linalg_cholesky_decomp1(Cy);
            gsl_vector *yv = gsl_vector_alloc(NR), *al = gsl_vector_alloc(NR);
            for (size_t a = 0; a < NR; a++)
                gsl_vector_set(yv, a, c->y[a]);
            gsl_linalg_cholesky_solve(Cy, yv, al);
            double q = 0.0, lc = 0.0;
            for (size_t a = 0; a < NR; a++) {
                q += c->y[a] * gsl_vector_get(al, a);
                lc += 2.0 * log(gsl_matrix_get(Cy, a, a));
            }
            gsl_matrix_free(Cy);
            gsl_vector_free(yv);
            gsl_vector_free(al);
            return -0.5 * NR * log(2.0 * M_PI) - 0.5 * lc - 0.5 * q;
        }
        memcpy(Q, M, n * n * sizeof *Q);
    } else if (c->t[0].model == GMM_STACK_SEASONAL) {
        size_t m = 4;
        n = 12;
        seasonal_dense(Q, n, m, p[0]);
        for (size_t r = 0; r < NR; r++)
            idx[r] = (size_t)(val[r] - 3.0);
        for (size_t j = 0; j + 1 < m; j++, k++)
            for (size_t i = 0; i < n; i++)
                A[k * n + i] = i % m == j ? 1.0 : i % m == m - 1 ? -1.0 : 0.0;
    } else if (c->t[0].model == GMM_STACK_BESAG) { /* 4 groups of 5 nodes */
        size_t G = 4, nm = 5;
        besag_dense(M, c->graph, p[0], NULL);
        double R[16];
        ar1_dense(R, G, 1.0, p[1]);
        kron_dense(Q, R, G, M, nm);
        n = G * nm;
        for (size_t g = 0; g < G; g++, k++)
            for (size_t i = 0; i < nm; i++)
                A[k * n + g * nm + i] = 1.0;
        for (size_t r = 0; r < NR; r++)
            idx[r] = (size_t)(c->grp[r] - 1.0) * nm + c->lev[r];
    } else if (c->t[0].model == GMM_STACK_RW1) { /* values 0, 1, 2.5, 4, 7 */
        static const double tv[5] = {0, 1, 2.5, 4, 7};
        size_t G = 4, nm = 5;
        rw1_dense(M, tv, nm, p[0]);
        if (c->t[0].group)
            ar1_dense(C, G, 1.0, p[1]);
        else
            diff_dense(C, G, 0, 1.0);
        kron_dense(Q, C, G, M, nm);
        n = G * nm;
        for (size_t g = 0; g < G; g++, k++)
            for (size_t i = 0; i < nm; i++)
                A[k * n + g * nm + i] = 1.0;
        for (size_t r = 0; r < NR; r++) {
            size_t j = 0;
            while (tv[j] != val[r])
                j++;
            idx[r] = (size_t)(c->grp[r] - 1.0) * nm + j;
        }
    } else { /* iid (x) rw1 */
        size_t G = 4, nm = 5;
        diff_dense(M, nm, 0, p[0]);
        diff_dense(C, G, 1, 1.0);
        kron_dense(Q, C, G, M, nm);
        n = G * nm;
        for (size_t i = 0; i < nm; i++, k++)
            for (size_t g = 0; g < G; g++)
                A[k * n + g * nm + i] = 1.0;
        for (size_t r = 0; r < NR; r++)
            idx[r] = (size_t)(c->grp[r] - 1.0) * nm + c->lev[r];
    }
    return dense_loglik(Q, n, A, k, idx, c->y, NR, p[c->np]);
}

static double dense_value(void *ctx)
{
    tcase *c = ctx;
    return case_dense(c, c->p);
}

START_TEST(test_ts_vs_dense)
{
    tcase c;
    case_make(&c, _i);
    double f, g[4] = {0}, nb;
    ck_assert_int_eq(gmm_latent_gaussian(c.l, c.p, c.y, c.p[c.np], &f, g, &nb), GMM_OK);
    g[c.np] = nb;
    double fd = case_dense(&c, c.p);
    double err = fabs(f - fd) / fmax(1.0, fabs(fd));
    /* 4th-order differences at h = 1e-4 (rho -0.95 is 0.05 from its edge):
     * truncation ~ h^4, rounding ~ eps |f| / h */
    double gerr = tu_fd_check4(c.p, c.np + 1, g, dense_value, &c, 1e-4, 1.0, NULL);
    if (report()) {
        char buf[512];
        gmm_latent_stack_describe(c.l, buf, sizeof buf);
        fprintf(stderr, "stack_ts %s: %s\n  loglik %.12g vs dense %.12g: rel %.2e, grad %.2e\n",
                case_name[_i], buf, f, fd, err, gerr);
    }
    ck_assert_msg(err < 1e-8, "%s: loglik %.15g vs dense %.15g", case_name[_i], f, fd);
    ck_assert_msg(gerr < 1e-6, "%s: gradient rel err %g", case_name[_i], gerr);
    case_free(&c);
}
END_TEST

/* AR1's new values: within the positions the latent itself, beyond the
 * last by h rho^h x_last + N(0, v (1 - rho^2h)), before the first the same
 * backwards. */
START_TEST(test_ar1_new_rows)
{
    tcase c;
    case_make(&c, C_AR1);
    size_t idx[8], nnz;
    double w[8], ev;
    gmm_stack_at at = {GMM_NO_INDEX, 9.0, NULL};
    ck_assert_int_eq(gmm_latent_stack_row(c.l, c.p, &at, idx, w, &nnz, &ev), GMM_OK);
    ck_assert(nnz == 1 && w[0] == 1.0 && ev == 0.0);
    ck_assert_uint_eq(idx[0], gmm_latent_stack_index(c.l, 0, 6));
    at.value = 17.0; /* 3 past 14 */
    ck_assert_int_eq(gmm_latent_stack_row(c.l, c.p, &at, idx, w, &nnz, &ev), GMM_OK);
    ck_assert_uint_eq(idx[0], gmm_latent_stack_index(c.l, 0, 11));
    ck_assert_double_eq_tol(w[0], 0.6 * 0.6 * 0.6, 1e-15);
    ck_assert_double_eq_tol(ev, 0.8 * (1.0 - pow(0.6, 6)), 1e-15);
    at.value = 1.0; /* 2 before 3 */
    ck_assert_int_eq(gmm_latent_stack_row(c.l, c.p, &at, idx, w, &nnz, &ev), GMM_OK);
    ck_assert_uint_eq(idx[0], gmm_latent_stack_index(c.l, 0, 0));
    ck_assert_double_eq_tol(w[0], 0.36, 1e-15);
    at.value = 4.5;
    ck_assert_int_eq(gmm_latent_stack_row(c.l, c.p, &at, idx, w, &nnz, &ev), GMM_EINVAL);
    case_free(&c);
}
END_TEST

/* besag (x) ar1's new rows: a fitted group reads (g, i); 2 groups past the
 * last, rho^2 x_(last, i) + N(0, (1 - rho^4) variance s_i), s_i the scaled
 * Besag field's constrained marginal variance from the dense pseudo-inverse;
 * a new group with rw2 groups or an unfitted replicate is refused. */
START_TEST(test_group_new_rows)
{
    tcase c;
    case_make(&c, C_BESAG_AR1);
    double Q[25], mv[5], grp[2] = {3.0, NAN}, w[8], ev;
    size_t idx[8], nnz;
    besag_dense(Q, c.graph, c.p[0], mv);
    gmm_stack_at at = {2, NAN, NULL};
    ck_assert_int_eq(gmm_latent_stack_row_group(c.l, c.p, &at, grp, idx, w, &nnz, &ev), GMM_OK);
    ck_assert(nnz == 1 && w[0] == 1.0 && ev == 0.0);
    ck_assert_uint_eq(idx[0], gmm_latent_stack_index(c.l, 0, 2 * 5 + 2));
    grp[0] = 6.0; /* groups 1 .. 4: 2 past the last */
    ck_assert_int_eq(gmm_latent_stack_row_group(c.l, c.p, &at, grp, idx, w, &nnz, &ev), GMM_OK);
    double r2 = c.p[1] * c.p[1], want = (1.0 - r2 * r2) * c.p[0] * mv[2];
    ck_assert_uint_eq(idx[0], gmm_latent_stack_index(c.l, 0, 3 * 5 + 2));
    ck_assert_double_eq_tol(w[0], r2, 1e-15);
    ck_assert_msg(fabs(ev - want) < 1e-12 * want, "evar %.15g, dense %.15g", ev, want);
    ck_assert_int_eq(gmm_latent_stack_row(c.l, c.p, &at, idx, w, &nnz, &ev), GMM_EINVAL);
    case_free(&c);
    case_make(&c, C_REPLICATE);
    at = (gmm_stack_at){GMM_NO_INDEX, 2.5, NULL};
    grp[0] = NAN;
    grp[1] = 4.0;
    ck_assert_int_eq(gmm_latent_stack_row_group(c.l, c.p, &at, grp, idx, w, &nnz, &ev), GMM_OK);
    ck_assert_uint_eq(idx[0], gmm_latent_stack_index(c.l, 0, 3 * 5 + 2));
    grp[1] = 5.0;
    ck_assert_int_eq(gmm_latent_stack_row_group(c.l, c.p, &at, grp, idx, w, &nnz, &ev),
                     GMM_EINVAL);
    case_free(&c);
}
END_TEST

/* Structure: AR1 and SEASONAL bandwidths, the group-major band. */
START_TEST(test_ts_band)
{
    tcase c;
    case_make(&c, C_SEASONAL);
    ck_assert_uint_eq(gmm_latent_bandwidth(c.l), 3); /* m - 1 */
    ck_assert_uint_eq(gmm_latent_nconstr(c.l), 3);
    case_free(&c);
    case_make(&c, C_BESAG_AR1);
    /* the joint RCM's band is O(n_main), not O(G n_main): 11 here (the
     * group-major order's 2 n_main - 1 = 9) */
    ck_assert_uint_le(gmm_latent_bandwidth(c.l), 3 * 5);
    ck_assert_uint_eq(gmm_latent_nconstr(c.l), 4);
    case_free(&c);
    case_make(&c, C_IID_RW1);
    ck_assert_uint_eq(gmm_latent_nconstr(c.l), 5);
    case_free(&c);
}
END_TEST

/* Refusals: a value not an integer (with its row), rho out of (-1, 1), an
 * intrinsic main model with intrinsic groups, ar1 (x) ar1. */
START_TEST(test_ts_refusals)
{
    double v[4] = {1, 2, 3.5, 4}, gv[4] = {1, 1, 2, 2};
    size_t lev[4] = {0, 1, 0, 1};
    gmm_latent *l = NULL;
    gmm_stack_term t = {.model = GMM_STACK_AR1, .name = "f", .value = v};
    ck_assert_int_eq(gmm_latent_stack_alloc(4, 1, &t, 0, &l), GMM_EINVAL);
    ck_assert_uint_eq(gmm_error_index(), 2);
    v[2] = 3.0;
    t.rho = 1.0;
    ck_assert_int_eq(gmm_latent_stack_alloc(4, 1, &t, 0, &l), GMM_EINVAL);
    t.rho = 0.0;
    t.group = gv;
    t.control = GMM_STACK_AR1;
    ck_assert_int_eq(gmm_latent_stack_alloc(4, 1, &t, 0, &l), GMM_EINVAL);
    t = (gmm_stack_term){.model = GMM_STACK_RW1, .name = "f", .value = v, .group = gv,
                         .control = GMM_STACK_RW1};
    ck_assert_int_eq(gmm_latent_stack_alloc(4, 1, &t, 0, &l), GMM_EINVAL);
    t = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f", .level = lev, .nlevel = 2,
                         .season = 3};
    ck_assert_int_eq(gmm_latent_stack_alloc(4, 1, &t, 0, &l), GMM_EINVAL);
    ck_assert_ptr_null(l);
}
END_TEST

Suite *model_stack_ts_suite(void)
{
    Suite *s = suite_create("model_stack_ts");
    TCase *tc = tcase_create("dense");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_ts_vs_dense, 0, NCASE);
    tcase_add_test(tc, test_ar1_new_rows);
    tcase_add_test(tc, test_group_new_rows);
    tcase_add_test(tc, test_ts_band);
    tcase_add_test(tc, test_ts_refusals);
    suite_add_tcase(s, tc);
    return s;
}
