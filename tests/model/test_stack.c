/* test_stack.c -- the stacked latent (stack.h) against dense GSL
 * computations: the exact Gaussian marginal likelihood of proper stacks
 * (iid + iid, iid + a graph precision) and of stacks with intrinsic
 * components (rw1, rw2, their cyclic forms, besag, bym2; the prior the Gaussian with precision
 * Q on {A x = 0}, covariance V (V'QV)^-1 V') -- value to 1e-8, gradient
 * against fourth-order central differences of the dense value, posterior
 * mean and covariance band; the Laplace approximation and prediction at
 * rows of a proper stack through gmm_problem against a dense Newton
 * iteration; whitening (W W' = Q^-1) and its reverse mode; the structure
 * matrices (rw2 against the integrated Wiener covariance, besag's scaling
 * against the dense pseudo-inverse's marginal variances), the generalised
 * log-determinants against dense eigenvalues; the cyclic walks against
 * their definition (null space, band, a seasonal fit's continuity at the
 * wrap); the refusals.
 * GMM_TEST_REPORT=1 prints the measured errors. */
#include <check.h>
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/gmrf.h"
#include "gmm/graph.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/spec.h"
#include "gmm/stack.h"
#include "gmm/vi.h"
#include "support/testutil.h"
#include "support/tu_model.h"

static int report(void) { return getenv("GMM_TEST_REPORT") != NULL; }

/* ---- dense helpers ------------------------------------------------------------ */

static double *dense_Q(gmm_latent *l, const double *theta)
{
    size_t n = gmm_latent_dim(l);
    gmm_band *Q = gmm_band_alloc(n, gmm_latent_bandwidth(l), 0, GMM_BAND_SYMMETRIC);
    double ld;
    ck_assert_int_eq(gmm_latent_prior(l, theta, Q, &ld), GMM_OK);
    double *D = tu_band_to_dense(Q);
    gmm_band_free(Q);
    return D;
}

/* H (nrows x n) from the observation map. */
static double *dense_H(gmm_latent *l)
{
    size_t n = gmm_latent_dim(l), nr = gmm_latent_nrows(l), w = gmm_latent_obs_width(l);
    double *H = calloc(nr * n, sizeof *H), *coef = malloc(nr * w * sizeof *coef);
    const size_t *off = gmm_latent_obs_offset(l);
    ck_assert_int_eq(gmm_latent_obs_coef(l, gmm_latent_param_start(l), coef), GMM_OK);
    for (size_t r = 0; r < nr; r++)
        for (size_t a = 0; a < w; a++)
            H[r * n + off[r] + a] += coef[r * w + a];
    free(coef);
    return H;
}

/* An orthonormal basis V (n x (n - k), row-major) of {x : A x = 0}. */
static double *null_basis(const double *A, size_t k, size_t n)
{
    double *V = malloc(n * (n - k) * sizeof *V);
    if (k == 0) {
        memset(V, 0, n * n * sizeof *V);
        for (size_t i = 0; i < n; i++)
            V[i * n + i] = 1.0;
        return V;
    }
    gsl_matrix *At = gsl_matrix_alloc(n, k), *Qm = gsl_matrix_alloc(n, n),
               *R = gsl_matrix_alloc(n, k);
    gsl_vector *tau = gsl_vector_alloc(k);
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < n; j++)
            gsl_matrix_set(At, j, i, A[i * n + j]);
    gsl_linalg_QR_decomp(At, tau);
    gsl_linalg_QR_unpack(At, tau, Qm, R);
    for (size_t i = 0; i < n; i++)
        for (size_t j = k; j < n; j++)
            V[i * (n - k) + j - k] = gsl_matrix_get(Qm, i, j);
    gsl_matrix_free(At);
    gsl_matrix_free(Qm);
    gsl_matrix_free(R);
    gsl_vector_free(tau);
    return V;
}

/* The constrained prior covariance V (V'QV)^-1 V' and log det(V'QV). */
static double *dense_sigma(gmm_latent *l, const double *theta, double *logdet)
{
    size_t n = gmm_latent_dim(l), k = gmm_latent_nconstr(l), d = n - k;
    double *A = malloc((k ? k : 1) * n * sizeof *A);
    ck_assert_int_eq(gmm_latent_stack_constraints(l, A), GMM_OK);
    double *Q = dense_Q(l, theta), *V = null_basis(A, k, n);
    gsl_matrix *M = gsl_matrix_calloc(d, d), *T = gsl_matrix_calloc(n, d);
    for (size_t i = 0; i < n; i++) /* T = Q V */
        for (size_t j = 0; j < d; j++) {
            double s = 0.0;
            for (size_t t = 0; t < n; t++)
                s += Q[i * n + t] * V[t * d + j];
            gsl_matrix_set(T, i, j, s);
        }
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++) {
            double s = 0.0;
            for (size_t t = 0; t < n; t++)
                s += V[t * d + i] * gsl_matrix_get(T, t, j);
            gsl_matrix_set(M, i, j, s);
        }
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(M), GSL_SUCCESS);
    double ld = 0.0;
    for (size_t i = 0; i < d; i++)
        ld += 2.0 * log(gsl_matrix_get(M, i, i));
    *logdet = ld;
    gsl_linalg_cholesky_invert(M);
    double *S = calloc(n * n, sizeof *S);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++) {
            double s = 0.0; /* (V M^-1)_ij */
            for (size_t t = 0; t < d; t++)
                s += V[i * d + t] * gsl_matrix_get(M, t, j);
            gsl_matrix_set(T, i, j, s);
        }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (size_t t = 0; t < d; t++)
                s += gsl_matrix_get(T, i, t) * V[j * d + t];
            S[i * n + j] = s;
        }
    gsl_matrix_free(M);
    gsl_matrix_free(T);
    free(A);
    free(Q);
    free(V);
    return S;
}

/* log N(y_obs; 0, H S H' + noise I); with mean/cov (n, n x n; may be NULL)
 * the posterior of x. */
static double dense_loglik(gmm_latent *l, const double *theta, const double *y, double noise,
                           double *mean, double *cov)
{
    size_t n = gmm_latent_dim(l), nr = gmm_latent_nrows(l);
    double ld;
    double *S = dense_sigma(l, theta, &ld), *H = dense_H(l);
    size_t *ob = malloc(nr * sizeof *ob), no = 0;
    for (size_t r = 0; r < nr; r++)
        if (!isnan(y[r]))
            ob[no++] = r;
    gsl_matrix *HS = gsl_matrix_alloc(no, n), *C = gsl_matrix_alloc(no, no);
    for (size_t a = 0; a < no; a++)
        for (size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (size_t t = 0; t < n; t++)
                s += H[ob[a] * n + t] * S[t * n + j];
            gsl_matrix_set(HS, a, j, s);
        }
    for (size_t a = 0; a < no; a++)
        for (size_t b = 0; b < no; b++) {
            double s = a == b ? noise : 0.0;
            for (size_t t = 0; t < n; t++)
                s += gsl_matrix_get(HS, a, t) * H[ob[b] * n + t];
            gsl_matrix_set(C, a, b, s);
        }
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(C), GSL_SUCCESS);
    gsl_vector *yv = gsl_vector_alloc(no), *al = gsl_vector_alloc(no);
    for (size_t a = 0; a < no; a++)
        gsl_vector_set(yv, a, y[ob[a]]);
    gsl_linalg_cholesky_solve(C, yv, al);
    double q = 0.0, lc = 0.0;
    for (size_t a = 0; a < no; a++) {
        q += y[ob[a]] * gsl_vector_get(al, a);
        lc += 2.0 * log(gsl_matrix_get(C, a, a));
    }
    double f = -0.5 * (double)no * log(2.0 * M_PI) - 0.5 * lc - 0.5 * q;
    if (mean)
        for (size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (size_t a = 0; a < no; a++)
                s += gsl_matrix_get(HS, a, j) * gsl_vector_get(al, a);
            mean[j] = s;
        }
    if (cov) {
        gsl_vector *col = gsl_vector_alloc(no), *z = gsl_vector_alloc(no);
        memcpy(cov, S, n * n * sizeof *cov);
        for (size_t j = 0; j < n; j++) {
            for (size_t a = 0; a < no; a++)
                gsl_vector_set(col, a, gsl_matrix_get(HS, a, j));
            gsl_linalg_cholesky_solve(C, col, z);
            for (size_t i = 0; i < n; i++) {
                double s = 0.0;
                for (size_t a = 0; a < no; a++)
                    s += gsl_matrix_get(HS, a, i) * gsl_vector_get(z, a);
                cov[i * n + j] -= s;
            }
        }
        gsl_vector_free(col);
        gsl_vector_free(z);
    }
    gsl_vector_free(yv);
    gsl_vector_free(al);
    gsl_matrix_free(HS);
    gsl_matrix_free(C);
    free(ob);
    free(S);
    free(H);
    return f;
}

/* ---- cases ------------------------------------------------------------------------ */

#define NR 36

typedef struct {
    gmm_graph *graph;
    gmm_spec_node *spec;
    gmm_gmrf *gmrf;
    gmm_latent *l;
    size_t nr;
    size_t lev[3][NR];
    double val[3][NR];
    double y[NR];
    double p[8]; /* theta then noise */
    size_t np;
    gmm_stack_term t[2]; /* the terms (pointing into lev, val) */
    size_t K;
} scase;

/* A graph of 11 nodes: a ring of 6 with a chord, a path of 4, an island. */
static gmm_graph *test_graph(void)
{
    size_t ei[] = {0, 1, 2, 3, 4, 5, 0, 6, 7, 8};
    size_t ej[] = {1, 2, 3, 4, 5, 0, 3, 7, 8, 9};
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(11, 10, ei, ej, NULL, NULL, NULL, &g), GMM_OK);
    return g;
}

static void scase_free(scase *c)
{
    gmm_latent_free(c->l);
    gmm_gmrf_free(c->gmrf);
    gmm_spec_free(c->spec);
    gmm_graph_free(c->graph);
}

/* rw1+besag: the data read only the ring, whose constant and rw1's are
 * seen only through their sum, so Q + H'H/noise is singular off the
 * constrained subspace; besag-gap: a connected component and the island
 * without data. */
enum {
    C_IID_IID,
    C_IID_GRAPH,
    C_RW1_IID,
    C_RW2,
    C_BESAG_IID,
    C_BYM2_RW1,
    C_RW1_BESAG,
    C_BESAG_GAP,
    C_RW1C_IID,
    C_RW2C,
    C_BESAG_RW2,
    C_NCASE
};

/* Case `which` with rows' levels and values drawn with seed; y from the
 * prior-ish scale, two rows missing. */
static void scase_make(scase *c, int which)
{
    tu_rng r;
    memset(c, 0, sizeof *c);
    tu_rng_seed(&r, 1234 + (uint64_t)which);
    c->nr = NR;
    gmm_stack_term t[2];
    memset(t, 0, sizeof t);
    size_t K = 2;
    for (size_t i = 0; i < NR; i++) {
        c->lev[0][i] = (size_t)(tu_uniform(&r) * 7);
        c->lev[1][i] = (size_t)(tu_uniform(&r) * 11);
        /* irregular index values with repeats */
        c->val[0][i] = 0.3 * (double)(size_t)(tu_uniform(&r) * 9) + 0.05 * (double)(i % 3 == 0);
        c->y[i] = 0.8 * tu_normal(&r) + 0.3 * (double)(c->lev[1][i] % 3);
    }
    c->y[4] = NAN;
    c->y[17] = NAN;
    switch (which) {
    case C_IID_IID:
        t[0] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.a", .nlevel = 7,
                                .level = c->lev[0], .variance = 0.7};
        t[1] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.b", .nlevel = 11,
                                .level = c->lev[1], .variance = 1.3};
        break;
    case C_IID_GRAPH: {
        const char *txt = "edge-ou(variance = 1.4, lengthscale = 2.5)";
        c->graph = test_graph();
        ck_assert_int_eq(gmm_spec_parse(txt, &c->spec), GMM_OK);
        ck_assert_int_eq(gmm_gmrf_alloc(c->graph, c->spec, txt, &c->gmrf), GMM_OK);
        t[0] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.a", .nlevel = 7,
                                .level = c->lev[0], .variance = 0.7};
        t[1] = (gmm_stack_term){.model = GMM_STACK_GRAPH, .name = "f.node", .level = c->lev[1],
                                .gmrf = c->gmrf};
        break;
    }
    case C_RW1_IID:
        t[0] = (gmm_stack_term){.model = GMM_STACK_RW1, .name = "f.t", .value = c->val[0],
                                .variance = 0.9};
        t[1] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.b", .nlevel = 11,
                                .level = c->lev[1], .variance = 0.4};
        break;
    case C_RW2:
        K = 1;
        t[0] = (gmm_stack_term){.model = GMM_STACK_RW2, .name = "f.t", .value = c->val[0],
                                .variance = 0.6};
        break;
    case C_BESAG_IID:
        c->graph = test_graph();
        t[0] = (gmm_stack_term){.model = GMM_STACK_BESAG, .name = "f.d", .level = c->lev[1],
                                .graph = c->graph, .variance = 0.8};
        t[1] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.a", .nlevel = 7,
                                .level = c->lev[0], .variance = 0.5};
        break;
    case C_RW1_BESAG:
        c->graph = test_graph();
        for (size_t i = 0; i < NR; i++) /* only the ring: its constant aliases rw1's */
            c->lev[1][i] %= 6;
        t[0] = (gmm_stack_term){.model = GMM_STACK_RW1, .name = "f.t", .value = c->val[0],
                                .variance = 0.5};
        t[1] = (gmm_stack_term){.model = GMM_STACK_BESAG, .name = "f.d", .level = c->lev[1],
                                .graph = c->graph, .variance = 0.8};
        break;
    case C_BESAG_GAP:
        c->graph = test_graph();
        for (size_t i = 0; i < NR; i++)
            c->lev[1][i] %= 6;
        t[0] = (gmm_stack_term){.model = GMM_STACK_BESAG, .name = "f.d", .level = c->lev[1],
                                .graph = c->graph, .variance = 0.8};
        t[1] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.a", .nlevel = 7,
                                .level = c->lev[0], .variance = 0.5};
        break;
    case C_RW1C_IID: /* the default period: one mean spacing past the last value */
        t[0] = (gmm_stack_term){.model = GMM_STACK_RW1, .name = "f.t", .value = c->val[0],
                                .variance = 0.9, .cyclic = 1};
        t[1] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.b", .nlevel = 11,
                                .level = c->lev[1], .variance = 0.4};
        break;
    case C_RW2C: /* values 0 .. 2.45, wrap 0.65 */
        K = 1;
        t[0] = (gmm_stack_term){.model = GMM_STACK_RW2, .name = "f.t", .value = c->val[0],
                                .variance = 0.6, .cyclic = 1, .period = 3.1};
        break;
    case C_BESAG_RW2:
        c->graph = test_graph();
        t[0] = (gmm_stack_term){.model = GMM_STACK_BESAG, .name = "f.d", .level = c->lev[1],
                                .graph = c->graph, .variance = 0.8};
        t[1] = (gmm_stack_term){.model = GMM_STACK_RW2, .name = "f.t", .value = c->val[0],
                                .variance = 0.2};
        break;
    case C_BYM2_RW1:
        c->graph = test_graph();
        t[0] = (gmm_stack_term){.model = GMM_STACK_BYM2, .name = "f.d", .level = c->lev[1],
                                .graph = c->graph, .variance = 1.1, .phi = 0.6};
        t[1] = (gmm_stack_term){.model = GMM_STACK_RW1, .name = "f.t", .value = c->val[0],
                                .variance = 0.3};
        break;
    }
    ck_assert_int_eq(gmm_latent_stack_alloc(NR, K, t, 0, &c->l), GMM_OK);
    memcpy(c->t, t, sizeof t);
    c->K = K;
    c->np = gmm_latent_nparam(c->l);
    memcpy(c->p, gmm_latent_param_start(c->l), c->np * sizeof *c->p);
    c->p[c->np] = 0.45;
}

static double dense_value(void *ctx)
{
    scase *c = ctx;
    return dense_loglik(c->l, c->p, c->y, c->p[c->np], NULL, NULL);
}

static const char *case_name[] = {"iid+iid",   "iid+graph", "rw1+iid",   "rw2",
                                  "besag+iid", "bym2+rw1",  "rw1+besag", "besag-gap",
                                  "rw1c+iid",  "rw2c",      "besag+rw2"};

START_TEST(test_gaussian_vs_dense)
{
    scase c;
    scase_make(&c, _i);
    size_t n = gmm_latent_dim(c.l), np = c.np;
    double f, g[8], nb;
    ck_assert_int_eq(gmm_latent_gaussian(c.l, c.p, c.y, c.p[np], &f, g, &nb), GMM_OK);
    g[np] = nb;
    double *mean = malloc(n * sizeof *mean), *cov = malloc(n * n * sizeof *cov);
    double fd = dense_loglik(c.l, c.p, c.y, c.p[np], mean, cov);
    double err = fabs(f - fd) / fmax(1.0, fabs(fd));
    /* gradient against 4th-order differences of the dense value: truncation
     * O(h^4) at h = 1e-3, rounding ~ eps |f| / h: 1e-6 is a wide margin */
    double gerr = tu_fd_check4(c.p, np + 1, g, dense_value, &c, 1e-3, 1.0, NULL);
    /* posterior */
    double *pm = malloc(n * sizeof *pm);
    gmm_band *pc = gmm_band_alloc(n, gmm_latent_bandwidth(c.l), 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_latent_gaussian_posterior(c.l, pm, pc), GMM_OK);
    double merr = 0.0, cerr = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, sqrt(cov[i * n + i]));
    for (size_t i = 0; i < n; i++) {
        merr = fmax(merr, fabs(pm[i] - mean[i]) / fmax(1.0, scale));
        for (size_t j = 0; j < n; j++)
            if (gmm_band_in_band(pc, i, j) || gmm_band_in_band(pc, j, i))
                cerr = fmax(cerr, fabs(gmm_band_get(pc, i, j) - cov[i * n + j]) /
                                      fmax(1e-3, scale * scale));
    }
    if (report()) {
        char buf[512];
        gmm_latent_stack_describe(c.l, buf, sizeof buf);
        fprintf(stderr, "stack %s: %s\n  loglik %.12g rel err %.2e, grad %.2e, mean %.2e, "
                        "cov %.2e\n",
                case_name[_i], buf, f, err, gerr, merr, cerr);
    }
    ck_assert_msg(err < 1e-8, "%s: loglik %.15g vs dense %.15g", case_name[_i], f, fd);
    ck_assert_msg(gerr < 1e-6, "%s: gradient rel err %g", case_name[_i], gerr);
    ck_assert_msg(merr < 1e-8 && cerr < 1e-8, "%s: posterior mean %g cov %g", case_name[_i],
                  merr, cerr);
    gmm_band_free(pc);
    free(pm);
    free(mean);
    free(cov);
    scase_free(&c);
}
END_TEST

/* The band and the data's windows: an iid term alone has bandwidth 0;
 * two crossed factors read windows of width <= bandwidth + 1. */
START_TEST(test_order)
{
    scase c;
    scase_make(&c, C_IID_IID);
    size_t w = gmm_latent_obs_width(c.l), bw = gmm_latent_bandwidth(c.l);
    ck_assert_uint_le(w, bw + 1);
    ck_assert_uint_ge(bw, 1);
    ck_assert_uint_eq(gmm_latent_dim(c.l), 18);
    ck_assert_uint_eq(gmm_latent_stack_size(c.l, 0), 7);
    ck_assert_uint_eq(gmm_latent_stack_size(c.l, 1), 11);
    ck_assert_uint_eq(gmm_latent_nconstr(c.l), 0);
    scase_free(&c);

    size_t lev[5] = {0, 1, 2, 1, 0};
    gmm_stack_term t = {.model = GMM_STACK_IID, .name = "f.g", .nlevel = 3, .level = lev};
    gmm_latent *l = NULL;
    ck_assert_int_eq(gmm_latent_stack_alloc(5, 1, &t, 0, &l), GMM_OK);
    ck_assert_uint_eq(gmm_latent_bandwidth(l), 0);
    ck_assert_uint_eq(gmm_latent_obs_width(l), 1);
    ck_assert_str_eq(gmm_latent_param_name(l, 0), "f.g.variance");
    gmm_latent_free(l);
}
END_TEST

/* The observation map is kept sparse: each row's entries are its terms'
 * latents, one per term (nnz = nrows nterm, not nrows width), at increasing
 * positions inside the row's window, and the windows gmm_latent_obs_coef
 * expands hold exactly those coefficients and zeros elsewhere. */
START_TEST(test_sparse_map)
{
    for (int which = 0; which < C_NCASE; which++) {
        scase c;
        scase_make(&c, which);
        gmm_latent *l = c.l;
        size_t nr = gmm_latent_nrows(l), w = gmm_latent_obs_width(l);
        size_t K = gmm_latent_stack_nterm(l);
        gmm_obsmap map = gmm_latent_obs_map(l);
        const size_t *rp = map.rowptr, *pos = map.pos;
        ck_assert_ptr_nonnull(rp);
        ck_assert_ptr_nonnull(pos);
        ck_assert_uint_eq(gmm_obsmap_nnz(&map), nr * K);
        ck_assert_uint_eq(rp[nr], nr * K);
        ck_assert_int_eq(gmm_latent_obs_varies(l), 0);
        double *val = malloc(nr * K * sizeof *val), *coef = malloc(nr * w * sizeof *coef);
        const double *th = gmm_latent_param_start(l);
        ck_assert_int_eq(gmm_latent_obs_values(l, th, val), GMM_OK);
        ck_assert_int_eq(gmm_latent_obs_coef(l, th, coef), GMM_OK);
        for (size_t r = 0; r < nr; r++) {
            ck_assert_uint_eq(rp[r + 1] - rp[r], K);
            size_t seen = 0;
            for (size_t k = rp[r]; k < rp[r + 1]; k++) {
                ck_assert_uint_lt(pos[k], w);
                if (k > rp[r])
                    ck_assert_uint_gt(pos[k], pos[k - 1]);
                ck_assert(val[k] == 1.0 && coef[r * w + pos[k]] == 1.0);
                /* two iid terms: the latents of the row's two levels */
                size_t x = gmm_latent_obs_offset(l)[r] + pos[k], hit = 0;
                for (size_t t = 0; which == C_IID_IID && t < K; t++)
                    hit += gmm_latent_stack_index(l, t, c.lev[t][r]) == x;
                ck_assert_msg(which != C_IID_IID || hit == 1, "row %zu: latent %zu is not the "
                              "row's", r, x);
            }
            for (size_t a = 0; a < w; a++)
                seen += coef[r * w + a] != 0.0;
            ck_assert_uint_eq(seen, K);
        }
        free(val);
        free(coef);
        scase_free(&c);
    }
}
END_TEST

/* Whitening: W W' = the prior covariance (Q^-1, or V (V'QV)^-1 V' with
 * constraints), whiten_t = W', unwhiten inverts whiten on its range, and
 * whiten_rev against differences (BYM2's null space moves with theta). */
typedef struct {
    scase *c;
    double v[64], xbar[64];
} wctx;

static double whiten_value(void *p)
{
    wctx *w = p;
    size_t n = gmm_latent_dim(w->c->l);
    double x[64];
    ck_assert_int_eq(gmm_latent_whiten_setup(w->c->l, w->c->p), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten(w->c->l, w->v, x), GMM_OK);
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += w->xbar[i] * x[i];
    return s;
}

START_TEST(test_whiten)
{
    static const int cases[] = {C_IID_GRAPH, C_RW2, C_BYM2_RW1, C_RW1_BESAG, C_RW2C};
    int which = cases[_i];
    scase c;
    scase_make(&c, which);
    size_t n = gmm_latent_dim(c.l);
    ck_assert_uint_le(n, 64);
    double ld, *S = dense_sigma(c.l, c.p, &ld), *W = malloc(n * n * sizeof *W);
    ck_assert_int_eq(gmm_latent_whiten_setup(c.l, c.p), GMM_OK);
    for (size_t j = 0; j < n; j++) {
        double e[64] = {0}, x[64];
        e[j] = 1.0;
        ck_assert_int_eq(gmm_latent_whiten(c.l, e, x), GMM_OK);
        for (size_t i = 0; i < n; i++)
            W[i * n + j] = x[i];
    }
    double err = 0.0, smax = 0.0, terr = 0.0;
    for (size_t i = 0; i < n; i++)
        smax = fmax(smax, S[i * n + i]);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (size_t a = 0; a < n; a++)
                s += W[i * n + a] * W[j * n + a];
            err = fmax(err, fabs(s - S[i * n + j]) / smax);
        }
    /* W' g against the transpose; unwhiten(whiten(v)) whitens back to x */
    tu_rng r;
    tu_rng_seed(&r, 7);
    double g[64], u[64], v[64], x[64], x2[64];
    for (size_t i = 0; i < n; i++)
        g[i] = tu_normal(&r);
    ck_assert_int_eq(gmm_latent_whiten_t(c.l, g, u), GMM_OK);
    for (size_t a = 0; a < n; a++) {
        double s = 0.0;
        for (size_t i = 0; i < n; i++)
            s += W[i * n + a] * g[i];
        terr = fmax(terr, fabs(s - u[a]));
    }
    ck_assert_int_eq(gmm_latent_whiten(c.l, g, x), GMM_OK);
    ck_assert_int_eq(gmm_latent_unwhiten(c.l, x, v), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten(c.l, v, x2), GMM_OK);
    double uerr = 0.0;
    for (size_t i = 0; i < n; i++)
        uerr = fmax(uerr, fabs(x2[i] - x[i]));
    wctx w = {.c = &c};
    for (size_t i = 0; i < n; i++) {
        w.v[i] = tu_normal(&r);
        w.xbar[i] = tu_normal(&r);
    }
    double gb[8] = {0};
    ck_assert_int_eq(gmm_latent_whiten_setup(c.l, c.p), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_rev(c.l, w.v, w.xbar, gb), GMM_OK);
    double gerr = tu_fd_check4(c.p, c.np, gb, whiten_value, &w, 1e-3, 1.0, NULL);
    /* whiten_rev of the last whiten and whiten_t (v, xbar NULL), their own
     * arrays overwritten since: against differences as above, and the same
     * as given v and xbar to rounding -- whiten_t's solve, reused, sums in
     * another order than the reverse's own, which moves the intrinsic
     * priors' ill-conditioned gradients by up to 7e-11 relative (rw2c);
     * 1e-9 leaves a margin and is still far below what the differences
     * resolve */
    double gs[8] = {0}, serr = 0.0, gscale = 0.0;
    ck_assert_int_eq(gmm_latent_whiten_setup(c.l, c.p), GMM_OK); /* the FD's moved it */
    ck_assert_int_eq(gmm_latent_whiten_rev(c.l, NULL, NULL, gs), GMM_EINVAL);
    memcpy(x, w.v, n * sizeof *x);
    ck_assert_int_eq(gmm_latent_whiten(c.l, x, x), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_t(c.l, w.xbar, u), GMM_OK);
    memset(x, 0, sizeof x);
    memset(u, 0, sizeof u);
    ck_assert_int_eq(gmm_latent_whiten_rev(c.l, NULL, NULL, gs), GMM_OK);
    for (size_t i = 0; i < c.np; i++) {
        serr = fmax(serr, fabs(gs[i] - gb[i]));
        gscale = fmax(gscale, fabs(gb[i]));
    }
    ck_assert_msg(serr <= 1e-9 * gscale, "%s: whiten_rev saved: %g of %g", case_name[which],
                  serr, gscale);
    double serr_fd = tu_fd_check4(c.p, c.np, gs, whiten_value, &w, 1e-3, 1.0, NULL);
    ck_assert_msg(serr_fd < 1e-6, "%s: whiten_rev saved vs FD: %g", case_name[which], serr_fd);
    if (report())
        fprintf(stderr, "stack whiten %s: W W' %.2e, W' %.2e, unwhiten %.2e, rev %.2e, "
                        "saved %.2e (FD %.2e)\n",
                case_name[which], err, terr, uerr, gerr, serr / gscale, serr_fd);
    ck_assert_msg(err < 1e-8, "%s: W W' - Sigma: %g", case_name[which], err);
    ck_assert_msg(terr < 1e-10 && uerr < 1e-10, "%s: whiten_t %g unwhiten %g",
                  case_name[which], terr, uerr);
    ck_assert_msg(gerr < 1e-6, "%s: whiten_rev: %g", case_name[which], gerr);
    free(S);
    free(W);
    scase_free(&c);
}
END_TEST

/* The Laplace approximation (Poisson, with an intercept) and the
 * posterior at data rows of a proper stack through gmm_problem, against a
 * dense Newton iteration: log q(y) = log p(y | x^) - x^'Q x^/2 + log|Q|/2 -
 * log|Q + H'DH|/2 at the mode x^, D = diag(exp(b + H x^)). */
START_TEST(test_laplace_problem)
{
    scase c;
    scase_make(&c, C_IID_GRAPH);
    size_t n = gmm_latent_dim(c.l), nr = NR, np = c.np;
    double cnt[NR];
    tu_rng r;
    tu_rng_seed(&r, 99);
    for (size_t i = 0; i < nr; i++)
        cnt[i] = (double)(size_t)(3.0 * tu_uniform(&r) + 0.5 * (double)(c.lev[1][i] % 4));
    cnt[5] = NAN;
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse("poisson", &lik), GMM_OK);
    gmm_problem *p = NULL;
    double b = 0.2;
    ck_assert_int_eq(gmm_problem_alloc(c.l, &lik, cnt, NULL, 1, b, &p), GMM_OK);
    gmm_objective *o = gmm_problem_objective(p);
    double th[8], f;
    memcpy(th, c.p, np * sizeof *th);
    th[np] = b;
    ck_assert_int_eq(o->eval(o->ctx, th, &f, NULL), GMM_OK);
    double *fm = malloc(nr * sizeof *fm), *fv = malloc(nr * sizeof *fv);
    ck_assert_int_eq(gmm_problem_predict_rows(p, th, fm, fv), GMM_OK);

    /* dense Newton */
    double *Q = dense_Q(c.l, c.p), *H = dense_H(c.l), x[64] = {0};
    gsl_matrix *P = gsl_matrix_alloc(n, n);
    gsl_vector *gv = gsl_vector_alloc(n), *dx = gsl_vector_alloc(n);
    double ldP = 0.0, lpy = 0.0, qx = 0.0;
    for (int it = 0; it < 50; it++) {
        for (size_t i = 0; i < n; i++) {
            double s = 0.0;
            for (size_t j = 0; j < n; j++) {
                s -= Q[i * n + j] * x[j];
                gsl_matrix_set(P, i, j, Q[i * n + j]);
            }
            gsl_vector_set(gv, i, s);
        }
        for (size_t k = 0; k < nr; k++) {
            if (isnan(cnt[k]))
                continue;
            double eta = b;
            for (size_t j = 0; j < n; j++)
                eta += H[k * n + j] * x[j];
            double lam = exp(eta);
            for (size_t i = 0; i < n; i++) {
                gsl_vector_set(gv, i, gsl_vector_get(gv, i) + H[k * n + i] * (cnt[k] - lam));
                for (size_t j = 0; j < n; j++)
                    gsl_matrix_set(P, i, j,
                                   gsl_matrix_get(P, i, j) + lam * H[k * n + i] * H[k * n + j]);
            }
        }
        gsl_linalg_cholesky_decomp1(P);
        gsl_linalg_cholesky_solve(P, gv, dx);
        for (size_t i = 0; i < n; i++)
            x[i] += gsl_vector_get(dx, i);
    }
    /* P at the mode (one more assembly), log terms */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            gsl_matrix_set(P, i, j, Q[i * n + j]);
    for (size_t k = 0; k < nr; k++) {
        if (isnan(cnt[k]))
            continue;
        double eta = b;
        for (size_t j = 0; j < n; j++)
            eta += H[k * n + j] * x[j];
        double lam = exp(eta);
        lpy += cnt[k] * eta - lam - lgamma(cnt[k] + 1.0);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++)
                gsl_matrix_set(P, i, j,
                               gsl_matrix_get(P, i, j) + lam * H[k * n + i] * H[k * n + j]);
    }
    gsl_matrix *Pinv = gsl_matrix_alloc(n, n);
    gsl_linalg_cholesky_decomp1(P);
    gsl_matrix_memcpy(Pinv, P);
    gsl_linalg_cholesky_invert(Pinv);
    for (size_t i = 0; i < n; i++) {
        ldP += 2.0 * log(gsl_matrix_get(P, i, i));
        for (size_t j = 0; j < n; j++)
            qx += x[i] * Q[i * n + j] * x[j];
    }
    double ldQ;
    ck_assert_int_eq(gmm_latent_stack_logdet(c.l, c.p, &ldQ), GMM_OK);
    double fd = lpy - 0.5 * qx + 0.5 * ldQ - 0.5 * ldP;
    double perr = 0.0;
    for (size_t k = 0; k < nr; k++) {
        double m = b, v = 0.0;
        for (size_t i = 0; i < n; i++) {
            m += H[k * n + i] * x[i];
            for (size_t j = 0; j < n; j++)
                v += H[k * n + i] * gsl_matrix_get(Pinv, i, j) * H[k * n + j];
        }
        perr = fmax(perr, fmax(fabs(fm[k] - m), fabs(fv[k] - v)));
    }
    if (report())
        fprintf(stderr, "stack laplace: %.12g vs dense %.12g, rows %.2e\n", f, fd, perr);
    ck_assert_msg(fabs(f - fd) < 1e-8 * fmax(1.0, fabs(fd)), "laplace %.15g vs %.15g", f, fd);
    ck_assert_msg(perr < 1e-8, "predict rows %g", perr);
    /* whitened log joint runs on the stack */
    double v0[64] = {0}, lp, grad[64];
    ck_assert_int_eq(gmm_problem_whiten_setup(p, th), GMM_OK);
    ck_assert_int_eq(gmm_problem_whitened_logp(p, v0, &lp, grad), GMM_OK);
    ck_assert(isfinite(lp));
    gsl_matrix_free(P);
    gsl_matrix_free(Pinv);
    gsl_vector_free(gv);
    gsl_vector_free(dx);
    free(Q);
    free(H);
    free(fm);
    free(fv);
    gmm_problem_free(p);
    scase_free(&c);
}
END_TEST

/* The Laplace approximation with constraints (Poisson, intercept) against
 * a dense Newton iteration in the coordinates beta of x = V beta (V an
 * orthonormal basis of {A x = 0}): log q = log p(y | x^) - x^'Q x^/2 +
 * log det(V'QV)/2 - log det(V'(Q + H'DH)V)/2; its gradient against
 * differences of the banded value; the posterior at rows. */
typedef struct {
    gmm_objective *o;
    double th[8];
} octx;

static double obj_value(void *p)
{
    octx *c = p;
    double f;
    ck_assert_int_eq(c->o->eval(c->o->ctx, c->th, &f, NULL), GMM_OK);
    return f;
}

START_TEST(test_laplace_constrained)
{
    static const int cases[] = {C_RW1_IID,   C_RW2,      C_BESAG_IID, C_BYM2_RW1,
                                C_RW1_BESAG, C_BESAG_GAP, C_RW1C_IID, C_RW2C};
    int which = cases[_i];
    scase c;
    scase_make(&c, which);
    size_t n = gmm_latent_dim(c.l), nr = NR, np = c.np, k = gmm_latent_nconstr(c.l), d = n - k;
    double cnt[NR];
    tu_rng r;
    tu_rng_seed(&r, 5 + (uint64_t)which);
    for (size_t i = 0; i < nr; i++)
        cnt[i] = (double)(size_t)(2.0 * tu_uniform(&r) + 0.4 * (double)(c.lev[1][i] % 4) +
                                  0.5 * c.val[0][i]);
    cnt[5] = NAN;
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse("poisson", &lik), GMM_OK);
    gmm_problem *p = NULL;
    double b = 0.3;
    ck_assert_int_eq(gmm_problem_alloc(c.l, &lik, cnt, NULL, 1, b, &p), GMM_OK);
    octx oc = {.o = gmm_problem_objective(p)};
    memcpy(oc.th, c.p, np * sizeof *oc.th);
    oc.th[np] = b;
    double f, g[8];
    ck_assert_int_eq(oc.o->eval(oc.o->ctx, oc.th, &f, g), GMM_OK);
    double *fm = malloc(nr * sizeof *fm), *fv = malloc(nr * sizeof *fv);
    ck_assert_int_eq(gmm_problem_predict_rows(p, oc.th, fm, fv), GMM_OK);

    double *A = malloc(k * n * sizeof *A), ldv;
    ck_assert_int_eq(gmm_latent_stack_constraints(c.l, A), GMM_OK);
    double *V = null_basis(A, k, n), *Q = dense_Q(c.l, c.p), *H = dense_H(c.l);
    double *S = dense_sigma(c.l, c.p, &ldv);
    double *HV = calloc(nr * d, sizeof *HV), *QV = calloc(n * d, sizeof *QV);
    for (size_t i = 0; i < nr; i++)
        for (size_t j = 0; j < d; j++)
            for (size_t t = 0; t < n; t++)
                HV[i * d + j] += H[i * n + t] * V[t * d + j];
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            for (size_t t = 0; t < n; t++)
                QV[i * d + j] += Q[i * n + t] * V[t * d + j];
    gsl_matrix *M = gsl_matrix_alloc(d, d);
    gsl_vector *gv = gsl_vector_alloc(d), *db = gsl_vector_alloc(d);
    double *beta = calloc(d, sizeof *beta), lpy = 0.0, qx = 0.0;
    for (int it = 0; it < 60; it++) {
        lpy = 0.0;
        for (size_t i = 0; i < d; i++) {
            double s = 0.0;
            for (size_t j = 0; j < d; j++) {
                double vqv = 0.0;
                for (size_t t = 0; t < n; t++)
                    vqv += V[t * d + i] * QV[t * d + j];
                gsl_matrix_set(M, i, j, vqv);
                s -= vqv * beta[j];
            }
            gsl_vector_set(gv, i, s);
        }
        for (size_t a = 0; a < nr; a++) {
            if (isnan(cnt[a]))
                continue;
            double eta = b;
            for (size_t j = 0; j < d; j++)
                eta += HV[a * d + j] * beta[j];
            double lam = exp(eta);
            lpy += cnt[a] * eta - lam - lgamma(cnt[a] + 1.0);
            for (size_t i = 0; i < d; i++) {
                gsl_vector_set(gv, i, gsl_vector_get(gv, i) + HV[a * d + i] * (cnt[a] - lam));
                for (size_t j = 0; j < d; j++)
                    gsl_matrix_set(M, i, j,
                                   gsl_matrix_get(M, i, j) + lam * HV[a * d + i] * HV[a * d + j]);
            }
        }
        ck_assert_int_eq(gsl_linalg_cholesky_decomp1(M), GSL_SUCCESS);
        if (it == 59)
            break; /* M, lpy at the mode */
        gsl_linalg_cholesky_solve(M, gv, db);
        for (size_t i = 0; i < d; i++)
            beta[i] += gsl_vector_get(db, i);
    }
    double ldM = 0.0;
    for (size_t i = 0; i < d; i++) {
        ldM += 2.0 * log(gsl_matrix_get(M, i, i));
        for (size_t j = 0; j < d; j++) {
            double vqv = 0.0;
            for (size_t t = 0; t < n; t++)
                vqv += V[t * d + i] * QV[t * d + j];
            qx += beta[i] * vqv * beta[j];
        }
    }
    double fd = lpy - 0.5 * qx + 0.5 * ldv - 0.5 * ldM;
    gsl_linalg_cholesky_invert(M);
    double perr = 0.0;
    for (size_t a = 0; a < nr; a++) {
        double m = b, v = 0.0;
        for (size_t i = 0; i < d; i++) {
            m += HV[a * d + i] * beta[i];
            for (size_t j = 0; j < d; j++)
                v += HV[a * d + i] * gsl_matrix_get(M, i, j) * HV[a * d + j];
        }
        perr = fmax(perr, fmax(fabs(fm[a] - m), fabs(fv[a] - v)));
    }
    double gerr = tu_fd_check4(oc.th, np + 1, g, obj_value, &oc, 1e-3, 1.0, NULL);
    if (report())
        fprintf(stderr, "stack laplace %s: %.12g vs dense %.12g (%.2e), rows %.2e, grad %.2e\n",
                case_name[which], f, fd, fabs(f - fd), perr, gerr);
    ck_assert_msg(fabs(f - fd) < 1e-8 * fmax(1.0, fabs(fd)), "%s: laplace %.15g vs %.15g",
                  case_name[which], f, fd);
    ck_assert_msg(perr < 1e-8, "%s: predict rows %g", case_name[which], perr);
    ck_assert_msg(gerr < 1e-6, "%s: gradient %g", case_name[which], gerr);
    /* HMC's start: the whitened Laplace mode maps back onto the mode */
    double mode[64], vq[64], xq[64], lp, grad[64];
    ck_assert_int_eq(gmm_problem_posterior(p, oc.th, mode, NULL), GMM_OK);
    ck_assert_int_eq(gmm_problem_whiten_setup(p, oc.th), GMM_OK);
    ck_assert_int_eq(gmm_problem_whitened_start(p, oc.th, vq), GMM_OK);
    ck_assert_int_eq(gmm_problem_whitened_latent(p, vq, xq), GMM_OK);
    ck_assert_int_eq(gmm_problem_whitened_logp(p, vq, &lp, grad), GMM_OK);
    double xerr = 0.0;
    for (size_t i = 0; i < n; i++)
        xerr = fmax(xerr, fabs(xq[i] - mode[i]));
    ck_assert_msg(xerr < 1e-8, "%s: whitened start %g", case_name[which], xerr);
    gsl_matrix_free(M);
    gsl_vector_free(gv);
    gsl_vector_free(db);
    free(beta);
    free(A);
    free(V);
    free(Q);
    free(H);
    free(S);
    free(HV);
    free(QV);
    free(fm);
    free(fv);
    gmm_problem_free(p);
    scase_free(&c);
}
END_TEST

/* ---- prediction at new rows ------------------------------------------------------------ */

/* The mode xh (n) and covariance S (n x n) of the posterior of x given y
 * (nr rows of H, NAN missing) under the prior precision Q conditioned on A
 * x = 0 (k rows), by Newton's method in x = V z (V an orthonormal basis of
 * the subspace): Gaussian (noise > 0, exact after one step) or Poisson
 * (noise 0), each row's linear predictor b + H x.  S = V (V'(Q + H'WH)V)^-1
 * V' at the mode: the exact posterior, or the Laplace approximation's. */
static void dense_post(const double *Q, const double *H, const double *A, size_t n, size_t nr,
                       size_t k, const double *y, double b, double noise, double *xh, double *S)
{
    size_t d = n - k;
    double *V = null_basis(A, k, n), *HV = calloc(nr * d, sizeof *HV);
    double *VQV = calloc(d * d, sizeof *VQV), *z = calloc(d, sizeof *z);
    for (size_t a = 0; a < nr; a++)
        for (size_t j = 0; j < d; j++)
            for (size_t t = 0; t < n; t++)
                HV[a * d + j] += H[a * n + t] * V[t * d + j];
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++)
            for (size_t t = 0; t < n; t++)
                for (size_t u = 0; u < n; u++)
                    VQV[i * d + j] += V[t * d + i] * Q[t * n + u] * V[u * d + j];
    gsl_matrix *M = gsl_matrix_alloc(d, d);
    gsl_vector *g = gsl_vector_alloc(d), *dz = gsl_vector_alloc(d);
    for (int it = 0; it < 40; it++) {
        for (size_t i = 0; i < d; i++) {
            double s = 0.0;
            for (size_t j = 0; j < d; j++) {
                gsl_matrix_set(M, i, j, VQV[i * d + j]);
                s -= VQV[i * d + j] * z[j];
            }
            gsl_vector_set(g, i, s);
        }
        for (size_t a = 0; a < nr; a++) {
            if (isnan(y[a]))
                continue;
            double eta = b, w, r;
            for (size_t j = 0; j < d; j++)
                eta += HV[a * d + j] * z[j];
            if (noise > 0.0) {
                w = 1.0 / noise;
                r = (y[a] - eta) / noise;
            } else {
                w = exp(eta);
                r = y[a] - w;
            }
            for (size_t i = 0; i < d; i++) {
                gsl_vector_set(g, i, gsl_vector_get(g, i) + HV[a * d + i] * r);
                for (size_t j = 0; j < d; j++)
                    gsl_matrix_set(M, i, j, gsl_matrix_get(M, i, j) + w * HV[a * d + i] * HV[a * d + j]);
            }
        }
        ck_assert_int_eq(gsl_linalg_cholesky_decomp1(M), GSL_SUCCESS);
        if (it == 39)
            break; /* M at the mode */
        gsl_linalg_cholesky_solve(M, g, dz);
        for (size_t i = 0; i < d; i++)
            z[i] += gsl_vector_get(dz, i);
    }
    gsl_linalg_cholesky_invert(M);
    for (size_t i = 0; i < n; i++) {
        xh[i] = 0.0;
        for (size_t j = 0; j < d; j++)
            xh[i] += V[i * d + j] * z[j];
        for (size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (size_t a = 0; a < d; a++)
                for (size_t c2 = 0; c2 < d; c2++)
                    s += V[i * d + a] * gsl_matrix_get(M, a, c2) * V[j * d + c2];
            S[i * n + j] = s;
        }
    }
    gsl_matrix_free(M);
    gsl_vector_free(g);
    gsl_vector_free(dz);
    free(V);
    free(HV);
    free(VQV);
    free(z);
}

/* log E_{f ~ N(m, v)} Poisson(y | exp f) by Simpson's rule on m +- 14 sd
 * (8000 intervals; the integrand is smooth, so the rule's error is far
 * below the 1e-9 the comparison allows). */
static double dense_poisson_lpd(double y, double m, double v)
{
    size_t K = 8000;
    double sd = sqrt(v), h = 28.0 * sd / (double)K, mx = -INFINITY, sum = 0.0;
    double *l = malloc((K + 1) * sizeof *l);
    for (size_t i = 0; i <= K; i++) {
        double f = m - 14.0 * sd + (double)i * h, u = (f - m) / sd;
        l[i] = y * f - exp(f) - lgamma(y + 1.0) - 0.5 * u * u - log(sd * sqrt(2.0 * M_PI));
        mx = fmax(mx, l[i]);
    }
    for (size_t i = 0; i <= K; i++)
        sum += (i == 0 || i == K ? 1.0 : i % 2 ? 4.0 : 2.0) * exp(l[i] - mx);
    free(l);
    return mx + log(sum * h / 3.0);
}

#define NNEW 12

/* Prediction at new rows (gmm_latent_stack_row, gmm_problem_predict_forms)
 * against the dense posterior of the AUGMENTED model: the same components
 * over the data's rows and the new ones (a new iid level one more level, a
 * new walk value one more level of the walk), conditioned on the model's
 * own constraints (over the data's levels only), the new rows unobserved.
 * Its marginal on the data's latents is the model's prior (the Wiener and
 * integrated Wiener processes restrict to any subset of times), so the
 * new rows' posterior there is the exact predictive (Gaussian) or the
 * Laplace approximation's (Poisson) -- computed without bridges: the test
 * of the bridges, the extrapolation, the new-level priors and of a'Sigma a
 * for rows whose latents lie outside the band (a solve).  Then the
 * outcome's log predictive density: normal for the Gaussian, Simpson's
 * rule for the Poisson. */
START_TEST(test_predict_new_rows)
{
    static const int cases[] = {C_RW1_IID, C_BESAG_RW2, C_RW1C_IID, C_RW2C,
                                C_BYM2_RW1, C_RW1_BESAG, C_IID_GRAPH, C_RW2};
    int which = cases[_i / 2], pois = _i % 2;
    scase c;
    scase_make(&c, which);
    size_t K = c.K, np = c.np, n = gmm_latent_dim(c.l), k = gmm_latent_nconstr(c.l);
    size_t nr2 = NR + NNEW;
    static const double vnew[NNEW] = {-1, 0.17, 1.234, 2.31, -0.4, 2.9,
                                      3.77, 0.61, 1.95, -1, -1.27, 0.02};
    /* the augmented terms and each new row's reading */
    gmm_stack_term t2[2];
    size_t lev2[2][NR + NNEW];
    double val2[2][NR + NNEW];
    gmm_stack_at at[NNEW * 2];
    memcpy(t2, c.t, sizeof t2);
    for (size_t j = 0; j < K; j++) {
        const gmm_stack_term *t = &c.t[j];
        int walk = t->model == GMM_STACK_RW1 || t->model == GMM_STACK_RW2;
        double per = walk && t->cyclic ? gmm_latent_stack_period(c.l, j) : 0.0;
        size_t m = 0;
        const double *vals = walk ? gmm_latent_stack_values(c.l, j, &m) : NULL;
        for (size_t r = 0; r < NR; r++) {
            lev2[j][r] = t->level ? t->level[r] : 0;
            val2[j][r] = walk ? t->value[r] : 0.0;
        }
        size_t nlev = t->model == GMM_STACK_IID ? t->nlevel : 11;
        for (size_t q = 0; q < NNEW; q++) {
            double v = !walk ? 0.0 : vnew[q] == -1 ? vals[(q * 5) % m] : vnew[q];
            if (walk && per > 0.0 && v < vals[0])
                v += 2.0 * per; /* onto the circle from above */
            size_t lv = t->model == GMM_STACK_IID ? (q * 5 + 3) % (nlev + 1) : (q * 7 + 2) % nlev;
            lev2[j][NR + q] = lv;
            val2[j][NR + q] = v;
            at[q * K + j] = (gmm_stack_at){lv == nlev ? GMM_NO_INDEX : lv, v, NULL};
        }
        t2[j].level = t->level ? lev2[j] : NULL;
        t2[j].value = walk ? val2[j] : NULL;
        if (t->model == GMM_STACK_IID)
            t2[j].nlevel = t->nlevel + 1;
        if (per > 0.0)
            t2[j].period = per;
    }
    gmm_latent *l2 = NULL;
    ck_assert_int_eq(gmm_latent_stack_alloc(nr2, K, t2, 0, &l2), GMM_OK);
    size_t n2 = gmm_latent_dim(l2);
    /* the model's constraints in the augmented numbering */
    size_t *map = malloc(n * sizeof *map);
    for (size_t j = 0; j < K; j++) {
        size_t m = 0, m2 = 0;
        const double *u = gmm_latent_stack_values(c.l, j, &m);
        const double *u2 = gmm_latent_stack_values(l2, j, &m2);
        int two = c.t[j].model == GMM_STACK_RW2;
        for (size_t a = 0; a < gmm_latent_stack_size(c.l, j); a++) {
            size_t a2 = a;
            if (u) {
                size_t jj = two ? a / 2 : a, j2 = 0;
                while (j2 < m2 && u2[j2] != u[jj])
                    j2++;
                ck_assert_uint_lt(j2, m2);
                a2 = two ? 2 * j2 + a % 2 : j2;
            }
            map[gmm_latent_stack_index(c.l, j, a)] = gmm_latent_stack_index(l2, j, a2);
        }
    }
    double *A = malloc((k ? k : 1) * n * sizeof *A), *A2 = calloc((k ? k : 1) * n2, sizeof *A2);
    ck_assert_int_eq(gmm_latent_stack_constraints(c.l, A), GMM_OK);
    for (size_t i = 0; i < k; i++)
        for (size_t a = 0; a < n; a++)
            A2[i * n2 + map[a]] = A[i * n + a];

    /* data: the case's y (Gaussian) or counts from it (Poisson) */
    double y2[NR + NNEW], ynew[NNEW], b = 0.3, noise = c.p[np];
    for (size_t r = 0; r < NR; r++)
        y2[r] = pois && !isnan(c.y[r]) ? floor(2.0 * fabs(c.y[r]) + (double)(r % 3)) : c.y[r];
    for (size_t q = 0; q < NNEW; q++) {
        y2[NR + q] = NAN;
        ynew[q] = pois ? (double)(q % 4) : 0.4 * (double)q - 1.7;
    }
    double *Q2 = dense_Q(l2, c.p), *H2 = dense_H(l2);
    double *xh = malloc(n2 * sizeof *xh), *S2 = malloc(n2 * n2 * sizeof *S2);
    dense_post(Q2, H2, A2, n2, nr2, k, y2, b, pois ? 0.0 : noise, xh, S2);

    /* the banded model */
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse(pois ? "poisson" : "gaussian", &lik), GMM_OK);
    double one[NR];
    for (size_t r = 0; r < NR; r++)
        one[r] = 1.0;
    const char *cname[] = {"intercept"};
    gmm_problem_design des = {1, one, cname, &b, 1}; /* borrowed: one outlives p */
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc_design(c.l, &lik, y2, NULL, &des, &p), GMM_OK);
    double th[8];
    memcpy(th, c.p, np * sizeof *th);
    size_t nt = np;
    if (!pois)
        th[nt++] = noise;
    th[nt++] = b;
    ck_assert_uint_eq(nt, gmm_problem_objective(p)->nparam);
    size_t ptr[NNEW + 1], idx[NNEW * 2 * GMM_STACK_ROW_MAX], outside = 0;
    double w[NNEW * 2 * GMM_STACK_ROW_MAX], ev[NNEW], mean[NNEW], var[NNEW];
    ptr[0] = 0;
    for (size_t q = 0; q < NNEW; q++) {
        size_t nnz, lo = SIZE_MAX, hi = 0;
        ck_assert_int_eq(gmm_latent_stack_row(c.l, th, at + q * K, idx + ptr[q], w + ptr[q],
                                              &nnz, &ev[q]),
                         GMM_OK);
        ptr[q + 1] = ptr[q] + nnz;
        for (size_t e = ptr[q]; e < ptr[q + 1]; e++) {
            lo = idx[e] < lo ? idx[e] : lo;
            hi = idx[e] > hi ? idx[e] : hi;
        }
        outside += nnz && hi - lo > gmm_latent_bandwidth(c.l);
    }
    ck_assert_int_eq(gmm_problem_predict_forms(p, th, NNEW, ptr, idx, w, mean, var), GMM_OK);
    gmm_lik lk;
    ck_assert_int_eq(gmm_problem_lik_at(p, th, &lk), GMM_OK);
    double merr = 0.0, verr = 0.0, lerr = 0.0;
    for (size_t q = 0; q < NNEW; q++) {
        const double *h = H2 + (NR + q) * n2;
        double dm = b, dv = 0.0;
        for (size_t i = 0; i < n2; i++) {
            dm += h[i] * xh[i];
            for (size_t j = 0; j < n2; j++)
                dv += h[i] * S2[i * n2 + j] * h[j];
        }
        double m = mean[q] + b, v = var[q] + ev[q], lpd;
        ck_assert_int_eq(gmm_lik_predictive(&lk, ynew[q], 1.0, m, v, &lpd), GMM_OK);
        double dl = pois ? dense_poisson_lpd(ynew[q], dm, dv)
                         : -0.5 * log(2.0 * M_PI * (dv + noise)) -
                               0.5 * (ynew[q] - dm) * (ynew[q] - dm) / (dv + noise);
        merr = fmax(merr, fabs(m - dm) / sqrt(dv));
        verr = fmax(verr, fabs(v - dv) / dv);
        lerr = fmax(lerr, fabs(lpd - dl));
    }
    if (report())
        fprintf(stderr, "stack new rows %s %s: mean %.2e sd, var %.2e rel, lpd %.2e; %zu of %d "
                        "rows outside the band %zu\n",
                case_name[which], pois ? "poisson" : "gaussian", merr, verr, lerr, outside, NNEW,
                gmm_latent_bandwidth(c.l));
    ck_assert_msg(merr < 1e-8 && verr < 1e-8 && lerr < 1e-8, "%s %s: mean %g var %g lpd %g",
                  case_name[which], pois ? "poisson" : "gaussian", merr, verr, lerr);
    /* rows whose latents lie outside the band took the solve */
    if (K == 2)
        ck_assert_msg(outside > 0, "%s: no row outside the band", case_name[which]);
    free(map);
    free(A);
    free(A2);
    free(Q2);
    free(H2);
    free(xh);
    free(S2);
    gmm_problem_free(p);
    gmm_latent_free(l2);
    scase_free(&c);
}
END_TEST

/* Forms under a VI q (gmm_vi_predict_forms) on a proper stack (iid +
 * graph): Sigma = (L L')^-1 from q's factor, inverted densely, against the
 * band for forms within it and the banded solve for forms outside it. */
START_TEST(test_predict_forms_vi)
{
    static const int cases[] = {C_IID_GRAPH, C_BYM2_RW1, C_RW1_BESAG};
    scase c;
    scase_make(&c, cases[_i]);
    size_t n = gmm_latent_dim(c.l), np = c.np, bw = gmm_latent_bandwidth(c.l);
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse("poisson", &lik), GMM_OK);
    double cnt[NR];
    for (size_t r = 0; r < NR; r++)
        cnt[r] = isnan(c.y[r]) ? NAN : floor(2.0 * fabs(c.y[r]));
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(c.l, &lik, cnt, NULL, 1, 0.1, &p), GMM_OK);
    gmm_vi_params vp;
    gmm_vi_params_init(&vp);
    gmm_vi *vi = NULL;
    ck_assert_int_eq(gmm_vi_alloc(p, &vp, &vi), GMM_OK);
    double th[8];
    memcpy(th, c.p, np * sizeof *th);
    th[np] = 0.1;
    ck_assert_int_eq(gmm_vi_set_state(vi, th, NULL, NULL), GMM_OK);
    ck_assert_int_eq(gmm_vi_start_laplace(vi, NULL), GMM_OK);
    gmm_band *L = gmm_band_alloc(n, gmm_vi_bandwidth(vi), 0, GMM_BAND_LOWER);
    ck_assert_int_eq(gmm_vi_factor(vi, L), GMM_OK);
    double *D = tu_band_to_dense(L); /* D[j n + i] = L(i, j) */
    gsl_matrix *M = gsl_matrix_alloc(n, n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (size_t t = 0; t < n; t++)
                s += D[t * n + i] * D[t * n + j];
            gsl_matrix_set(M, i, j, s);
        }
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(M), GSL_SUCCESS);
    gsl_linalg_cholesky_invert(M);
    size_t k = gmm_latent_nconstr(c.l);
    if (k) { /* q conditioned on A x = 0: M - M A'(A M A')^-1 A M */
        double *A = malloc(k * n * sizeof *A), *U = calloc(n * k, sizeof *U);
        ck_assert_int_eq(gmm_latent_stack_constraints(c.l, A), GMM_OK);
        gsl_matrix *G = gsl_matrix_calloc(k, k);
        for (size_t i = 0; i < n; i++)
            for (size_t a = 0; a < k; a++)
                for (size_t t = 0; t < n; t++)
                    U[i * k + a] += gsl_matrix_get(M, i, t) * A[a * n + t];
        for (size_t a = 0; a < k; a++)
            for (size_t b = 0; b < k; b++) {
                double g = 0.0;
                for (size_t t = 0; t < n; t++)
                    g += A[a * n + t] * U[t * k + b];
                gsl_matrix_set(G, a, b, g);
            }
        gsl_linalg_cholesky_decomp1(G);
        gsl_linalg_cholesky_invert(G);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double s = gsl_matrix_get(M, i, j);
                for (size_t a = 0; a < k; a++)
                    for (size_t b = 0; b < k; b++)
                        s -= U[i * k + a] * gsl_matrix_get(G, a, b) * U[j * k + b];
                gsl_matrix_set(M, i, j, s);
            }
        gsl_matrix_free(G);
        free(A);
        free(U);
    }
    /* forms: pairs of latents at every distance, three-term forms */
    size_t ptr[3 * 64 + 1], idx[3 * 3 * 64], nq = 0, inside = 0, outside = 0;
    double w[3 * 3 * 64], mean[3 * 64], var[3 * 64];
    ptr[0] = 0;
    for (size_t a = 0; a < n && nq < 3 * 64 - 2; a += 3)
        for (size_t gap = 1; gap < n - a && nq < 3 * 64 - 2; gap += 4) {
            size_t e = ptr[nq];
            idx[e] = a;
            w[e] = 1.0;
            idx[e + 1] = a + gap;
            w[e + 1] = -0.7;
            ptr[++nq] = e + 2;
            inside += gap <= bw;
            outside += gap > bw;
        }
    ck_assert_int_eq(gmm_vi_predict_forms(vi, nq, ptr, idx, w, mean, var), GMM_OK);
    const double *mq = gmm_vi_mean(vi);
    double err = 0.0;
    for (size_t q = 0; q < nq; q++) {
        double m = 0.0, v = 0.0;
        for (size_t e = ptr[q]; e < ptr[q + 1]; e++) {
            m += w[e] * mq[idx[e]];
            for (size_t f = ptr[q]; f < ptr[q + 1]; f++)
                v += w[e] * w[f] * gsl_matrix_get(M, idx[e], idx[f]);
        }
        err = fmax(err, fmax(fabs(mean[q] - m), fabs(var[q] - v) / v));
    }
    if (report())
        fprintf(stderr, "stack forms under vi: %zu forms (%zu inside the band %zu, %zu outside), "
                        "error %.2e\n",
                nq, inside, bw, outside, err);
    ck_assert_msg(inside > 0 && outside > 0, "forms inside %zu, outside %zu", inside, outside);
    ck_assert_msg(err < 1e-10, "vi forms: %g", err);
    gsl_matrix_free(M);
    free(D);
    gmm_band_free(L);
    gmm_vi_free(vi);
    gmm_problem_free(p);
    scase_free(&c);
}
END_TEST

/* ---- variational inference on the constrained subspace ---------------------- */

/* A Gaussian likelihood: q conditioned on A x = 0 contains the exact
 * posterior, so at the Laplace start (exact here) the ELBO is the dense
 * constrained log marginal likelihood and its gradient vanishes, and from
 * a far start (m = 0, L = I) the fit climbs back to both.  Where Q +
 * H'H / noise is singular off the subspace (rw1+besag: two constants read
 * through their sum; besag-gap: a component without data) the start is
 * pinned (not the posterior), and the fit still reaches it. */
START_TEST(test_vi_gaussian_constrained)
{
    static const int cases[] = {C_RW1_IID, C_BESAG_IID, C_BYM2_RW1, C_RW2C,
                                C_RW2,     C_RW1C_IID,  C_BESAG_GAP, C_RW1_BESAG};
    int which = cases[_i], exact_start = which != C_RW1_BESAG && which != C_BESAG_GAP;
    scase c;
    scase_make(&c, which);
    size_t n = gmm_latent_dim(c.l), np = c.np, nr = NR;
    double noise = c.p[np];
    gmm_lik lik = tu_lik_of("gaussian", noise);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(c.l, &lik, c.y, NULL, 0, 0.0, &p), GMM_OK);
    double *dm = malloc(n * sizeof *dm), *dc = malloc(n * n * sizeof *dc);
    double dense = dense_loglik(c.l, c.p, c.y, noise, dm, dc);
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    par.tol = 0.0; /* to the gradient test */
    par.epsilon = 1e-10;
    par.max_iter = 20000;
    gmm_vi *v = NULL;
    ck_assert_msg(gmm_vi_alloc(p, &par, &v) == GMM_OK, "%s", gmm_error_message());
    const char *start = NULL;
    ck_assert_int_eq(gmm_vi_start_laplace(v, &start), GMM_OK);
    ck_assert_str_eq(start, "laplace");
    size_t nv = gmm_vi_nvar(v);
    double *gl = malloc(nv * sizeof *gl), e0, g0 = 0.0;
    ck_assert_int_eq(gmm_vi_elbo(v, gmm_vi_theta(v), gmm_vi_lambda(v), &e0, gl, NULL), GMM_OK);
    for (size_t j = 0; j < nv; j++)
        g0 = fmax(g0, fabs(gl[j]));
    ck_assert_int_eq(gmm_vi_set_state(v, NULL, NULL, NULL), GMM_OK);
    gmm_vi_result res;
    ck_assert_msg(gmm_vi_fit(v, &res) == GMM_OK, "%s", gmm_error_message());
    gmm_band *cov = gmm_band_alloc(n, gmm_latent_bandwidth(c.l), 0, GMM_BAND_SYMMETRIC);
    double *mv = malloc(n * sizeof *mv), em = 0.0, es = 0.0;
    ck_assert_int_eq(gmm_vi_posterior(v, mv, cov), GMM_OK);
    for (size_t i = 0; i < n; i++) {
        double sd = sqrt(dc[i * n + i]);
        em = fmax(em, fabs(mv[i] - dm[i]) / sd);
        es = fmax(es, fabs(sqrt(gmm_band_get(cov, i, i)) - sd) / sd);
    }
    double *a = malloc(4 * nr * sizeof *a), ep = 0.0;
    ck_assert_int_eq(gmm_vi_predict_rows(v, a, a + nr), GMM_OK);
    ck_assert_int_eq(gmm_problem_predict_rows(p, gmm_vi_theta(v), a + 2 * nr, a + 3 * nr),
                     GMM_OK);
    for (size_t i = 0; i < nr; i++)
        ep = fmax(ep, fmax(fabs(a[i] - a[2 * nr + i]) / sqrt(a[3 * nr + i]),
                           fabs(a[nr + i] - a[3 * nr + i]) / a[3 * nr + i]));
    double r0 = fabs(e0 - dense) / fabs(dense), r1 = fabs(res.elbo - dense) / fabs(dense);
    if (report())
        fprintf(stderr, "stack vi %s: at the posterior ELBO %.12g vs dense %.12g (%.2e), "
                        "gradient %.2e; from m = 0, L = I: %zu iterations, %.2e, mean %.2e "
                        "sd, sd %.2e, rows %.2e\n",
                case_name[which], e0, dense, r0, g0, res.iterations, r1, em, es, ep);
    ck_assert_msg(!exact_start || r0 < 1e-11, "%s: ELBO at the posterior %.15g, dense %.15g",
                  case_name[which], e0, dense);
    ck_assert_msg(!exact_start || g0 < 1e-8, "%s: gradient %g at the posterior",
                  case_name[which], g0);
    ck_assert_msg(e0 <= dense + 1e-12 * fabs(dense), "%s: start's ELBO %.15g above %.15g",
                  case_name[which], e0, dense);
    ck_assert_msg(res.elbo <= dense + 1e-12 * fabs(dense), "%s: ELBO %.15g above %.15g",
                  case_name[which], res.elbo, dense);
    ck_assert_msg(r1 < 1e-9, "%s: fitted ELBO %.15g, dense %.15g (%s)", case_name[which],
                  res.elbo, dense, res.message);
    ck_assert_msg(em < 1e-4 && es < 1e-4 && ep < 1e-4, "%s: mean %g sd, sd %g, rows %g",
                  case_name[which], em, es, ep);
    free(a);
    free(mv);
    free(gl);
    free(dm);
    free(dc);
    gmm_band_free(cov);
    gmm_vi_free(v);
    gmm_problem_free(p);
    scase_free(&c);
}
END_TEST

/* The ELBO of q = N(m, (L L')^-1) conditioned on A x = 0, Poisson counts
 * with intercept b0 = theta[np], dense: Sigma_c = Sigma - Sigma A' G^-1 A
 * Sigma, m_c likewise, the expectations in closed form, the KL of the two
 * Gaussians in the coordinates z of x = V z (V an orthonormal basis of {A x
 * = 0}), whose precisions V'QV and (V'Sigma_c V)^-1 are full rank. */
typedef struct {
    scase *c;
    const double *cnt;
    size_t b, np;
    double *lam, *th;
} velbo;

static double dense_elbo(void *ctx)
{
    velbo *e = ctx;
    gmm_latent *l = e->c->l;
    size_t n = gmm_latent_dim(l), k = gmm_latent_nconstr(l), d = n - k, nr = NR;
    gmm_band lb;
    ck_assert_int_eq(gmm_band_view(&lb, e->lam + n, n, e->b, 0, GMM_BAND_LOWER), GMM_OK);
    gsl_matrix *S = gsl_matrix_calloc(n, n), *G = gsl_matrix_calloc(k, k);
    for (size_t i = 0; i < n; i++) /* S = L L' */
        for (size_t j = 0; j <= i; j++) {
            double s = 0.0;
            for (size_t t = i > e->b ? i - e->b : 0; t <= j; t++) {
                double li = gmm_band_get(&lb, i, t), lj = gmm_band_get(&lb, j, t);
                s += (t == i ? exp(li) : li) * (t == j ? exp(lj) : lj);
            }
            gsl_matrix_set(S, i, j, s);
            gsl_matrix_set(S, j, i, s);
        }
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(S), GSL_SUCCESS);
    gsl_linalg_cholesky_invert(S);
    double *A = malloc(k * n * sizeof *A), *U = calloc(n * k, sizeof *U);
    ck_assert_int_eq(gmm_latent_stack_constraints(l, A), GMM_OK);
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0; a < k; a++)
            for (size_t t = 0; t < n; t++)
                U[i * k + a] += gsl_matrix_get(S, i, t) * A[a * n + t];
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++) {
            double s = 0.0;
            for (size_t t = 0; t < n; t++)
                s += A[a * n + t] * U[t * k + b];
            gsl_matrix_set(G, a, b, s);
        }
    gsl_linalg_cholesky_decomp1(G);
    gsl_linalg_cholesky_invert(G);
    double *Sc = malloc(n * n * sizeof *Sc), *mc = malloc(n * sizeof *mc), am[8] = {0};
    for (size_t a = 0; a < k; a++)
        for (size_t t = 0; t < n; t++)
            am[a] += A[a * n + t] * e->lam[t];
    for (size_t i = 0; i < n; i++) {
        mc[i] = e->lam[i];
        for (size_t a = 0; a < k; a++)
            for (size_t b = 0; b < k; b++)
                mc[i] -= U[i * k + a] * gsl_matrix_get(G, a, b) * am[b];
        for (size_t j = 0; j < n; j++) {
            double s = gsl_matrix_get(S, i, j);
            for (size_t a = 0; a < k; a++)
                for (size_t b = 0; b < k; b++)
                    s -= U[i * k + a] * gsl_matrix_get(G, a, b) * U[j * k + b];
            Sc[i * n + j] = s;
        }
    }
    double *H = dense_H(l), E = 0.0, b0 = e->th[e->np];
    for (size_t r = 0; r < nr; r++) {
        if (isnan(e->cnt[r]))
            continue;
        double mu = b0, s2 = 0.0;
        for (size_t i = 0; i < n; i++) {
            mu += H[r * n + i] * mc[i];
            for (size_t j = 0; j < n; j++)
                s2 += H[r * n + i] * Sc[i * n + j] * H[r * n + j];
        }
        E += e->cnt[r] * mu - exp(mu + 0.5 * s2) - lgamma(e->cnt[r] + 1.0);
    }
    double *Q = dense_Q(l, e->th), *V = null_basis(A, k, n);
    gsl_matrix *Qz = gsl_matrix_calloc(d, d), *Sz = gsl_matrix_calloc(d, d);
    double *mz = calloc(d, sizeof *mz), kl = -(double)d;
    for (size_t a = 0; a < d; a++) {
        for (size_t t = 0; t < n; t++)
            mz[a] += V[t * d + a] * mc[t];
        for (size_t b = 0; b < d; b++) {
            double q = 0.0, s = 0.0;
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++) {
                    q += V[i * d + a] * Q[i * n + j] * V[j * d + b];
                    s += V[i * d + a] * Sc[i * n + j] * V[j * d + b];
                }
            gsl_matrix_set(Qz, a, b, q);
            gsl_matrix_set(Sz, a, b, s);
        }
    }
    for (size_t a = 0; a < d; a++)
        for (size_t b = 0; b < d; b++)
            kl += gsl_matrix_get(Qz, a, b) * (gsl_matrix_get(Sz, b, a) + mz[a] * mz[b]);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(Qz), GSL_SUCCESS);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(Sz), GSL_SUCCESS);
    for (size_t a = 0; a < d; a++)
        kl -= 2.0 * log(gsl_matrix_get(Qz, a, a)) + 2.0 * log(gsl_matrix_get(Sz, a, a));
    gsl_matrix_free(S);
    gsl_matrix_free(G);
    gsl_matrix_free(Qz);
    gsl_matrix_free(Sz);
    free(A);
    free(U);
    free(Sc);
    free(mc);
    free(H);
    free(Q);
    free(V);
    free(mz);
    return E - 0.5 * kl;
}

typedef struct {
    gmm_vi *v;
    double *th, *lam;
} vctx;

static double banded_elbo(void *ctx)
{
    vctx *c = ctx;
    double f;
    ck_assert_int_eq(gmm_vi_elbo(c->v, c->th, c->lam, &f, NULL, NULL), GMM_OK);
    return f;
}

/* Poisson counts at a q away from the optimum (q's band 1 and the prior's):
 * the ELBO against the dense one; its gradient in lambda and theta against
 * differences of the banded ELBO on every entry, and along a random
 * direction of lambda against differences of the dense ELBO. */
START_TEST(test_vi_poisson_constrained)
{
    static const int cases[] = {C_RW1_IID, C_BESAG_IID, C_BYM2_RW1, C_RW2C, C_RW1_BESAG};
    int which = cases[_i / 2];
    scase c;
    scase_make(&c, which);
    size_t n = gmm_latent_dim(c.l), np = c.np;
    double cnt[NR];
    tu_rng r;
    tu_rng_seed(&r, 40 + (uint64_t)_i);
    for (size_t i = 0; i < NR; i++)
        cnt[i] = (double)(size_t)(2.0 * tu_uniform(&r) + 0.4 * (double)(c.lev[1][i] % 4) +
                                  0.5 * c.val[0][i]);
    cnt[5] = NAN;
    gmm_lik lik = tu_lik_of("poisson", NAN);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(c.l, &lik, cnt, NULL, 1, 0.3, &p), GMM_OK);
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    par.bandwidth = _i % 2 ? GMM_VI_BANDWIDTH_PRIOR : 1;
    gmm_vi *v = NULL;
    ck_assert_msg(gmm_vi_alloc(p, &par, &v) == GMM_OK, "%s", gmm_error_message());
    size_t nv = gmm_vi_nvar(v), b = gmm_vi_bandwidth(v), nt = gmm_vi_nparam(v);
    double *lam = malloc(nv * sizeof *lam), *gl = malloc(nv * sizeof *gl);
    double th[8], gt[8], dir[2] = {0}, f;
    memcpy(th, gmm_vi_theta(v), nt * sizeof *th);
    gmm_band lb;
    ck_assert_int_eq(gmm_band_view(&lb, lam + n, n, b, 0, GMM_BAND_LOWER), GMM_OK);
    for (size_t j = 0; j < nv; j++)
        lam[j] = j < n ? 0.4 * tu_normal(&r) : 0.25 * tu_normal(&r);
    for (size_t j = 0; j < n; j++)
        *gmm_band_ptr(&lb, j, j) = 0.3 + 0.2 * tu_normal(&r); /* log L(j, j) */
    ck_assert_msg(gmm_vi_elbo(v, th, lam, &f, gl, gt) == GMM_OK, "%s", gmm_error_message());
    velbo de = {&c, cnt, b, np, lam, th};
    double fd = dense_elbo(&de), ev = fabs(f - fd) / fmax(1.0, fabs(fd));
    vctx vc = {v, th, lam};
    size_t wl = 0, wt = 0;
    double el = tu_fd_check4(lam, nv, gl, banded_elbo, &vc, 1e-3, 1.0, &wl);
    double et = tu_fd_check4(th, nt, gt, banded_elbo, &vc, 1e-3, 1.0, &wt);
    /* the dense ELBO along u: d/dt at t = 0 of f(lambda + t u) */
    double *u = malloc(nv * sizeof *u), *l0 = malloc(nv * sizeof *l0), gu = 0.0, h = 1e-3;
    memcpy(l0, lam, nv * sizeof *l0);
    for (size_t j = 0; j < nv; j++) {
        u[j] = tu_normal(&r);
        gu += gl[j] * u[j];
    }
    double fs[4], ts[4] = {-2.0, -1.0, 1.0, 2.0};
    for (size_t s = 0; s < 4; s++) {
        for (size_t j = 0; j < nv; j++)
            lam[j] = l0[j] + ts[s] * h * u[j];
        fs[s] = dense_elbo(&de);
    }
    memcpy(lam, l0, nv * sizeof *l0);
    dir[0] = (8.0 * (fs[2] - fs[1]) - (fs[3] - fs[0])) / (12.0 * h);
    dir[1] = fabs(dir[0] - gu) / fmax(1.0, fabs(gu));
    if (report())
        fprintf(stderr, "stack vi poisson %s b %zu: ELBO %.12g dense %.12g (%.2e); gradient "
                        "lambda %.2e, theta %.2e, dense direction %.2e\n",
                case_name[which], b, f, fd, ev, el, et, dir[1]);
    ck_assert_msg(ev < 1e-11, "%s b %zu: ELBO %.15g, dense %.15g", case_name[which], b, f, fd);
    ck_assert_msg(el < 1e-7, "%s b %zu: d/dlambda[%zu] %.10g, error %.3g", case_name[which], b,
                  wl, gl[wl], el);
    ck_assert_msg(et < 1e-7, "%s b %zu: d/dtheta[%zu] %.10g, error %.3g", case_name[which], b,
                  wt, gt[wt], et);
    ck_assert_msg(dir[1] < 1e-7, "%s b %zu: along u %.12g, dense %.12g", case_name[which], b,
                  gu, dir[0]);
    free(u);
    free(l0);
    free(lam);
    free(gl);
    gmm_vi_free(v);
    gmm_problem_free(p);
    scase_free(&c);
}
END_TEST

/* ---- structure ----------------------------------------------------------------------- */

/* RW2: with the first state pinned (x_0 = x'_0 = 0) Q's inverse is the
 * integrated Wiener process's covariance from t_0: for s <= t,
 * cov(X_s, X_t) = v (s^2 t / 2 - s^3 / 6), cov(X_s, X'_t) = v s^2 / 2,
 * cov(X'_s, X_t) = v (s t - s^2 / 2), cov(X'_s, X'_t) = v s. */
START_TEST(test_rw2_structure)
{
    double t[] = {0.5, 0.9, 1.0, 2.2, 2.25, 3.0, 4.6};
    size_t m = 7;
    double v = 0.7;
    gmm_stack_term tm = {.model = GMM_STACK_RW2, .name = "f.t", .value = t, .variance = v};
    gmm_latent *l = NULL;
    ck_assert_int_eq(gmm_latent_stack_alloc(m, 1, &tm, 0, &l), GMM_OK);
    ck_assert_uint_eq(gmm_latent_dim(l), 2 * m);
    ck_assert_uint_le(gmm_latent_bandwidth(l), 3);
    ck_assert_uint_eq(gmm_latent_nconstr(l), 2);
    size_t n = 2 * m, d = n - 2;
    double *Q = dense_Q(l, &v);
    gsl_matrix *M = gsl_matrix_alloc(d, d);
    for (size_t a = 0; a < d; a++)
        for (size_t b = 0; b < d; b++)
            gsl_matrix_set(M, a, b,
                           Q[gmm_latent_stack_index(l, 0, a + 2) * n +
                             gmm_latent_stack_index(l, 0, b + 2)]);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(M), GSL_SUCCESS);
    gsl_linalg_cholesky_invert(M);
    double err = 0.0;
    for (size_t a = 0; a < d; a++)
        for (size_t b = 0; b < d; b++) {
            double s = t[a / 2 + 1] - t[0], u = t[b / 2 + 1] - t[0], want;
            int da = a % 2, db = b % 2; /* derivative states */
            if (s > u) { /* symmetric: order so that s <= u */
                double tmp = s;
                s = u;
                u = tmp;
                int ti = da;
                da = db;
                db = ti;
            }
            if (!da && !db)
                want = s * s * u / 2 - s * s * s / 6;
            else if (!da && db)
                want = s * s / 2;
            else if (da && !db)
                want = s * u - s * s / 2;
            else
                want = s;
            err = fmax(err, fabs(gsl_matrix_get(M, a, b) - v * want));
        }
    ck_assert_msg(err < 1e-10, "rw2 covariance: %g", err);
    gsl_matrix_free(M);
    free(Q);
    gmm_latent_free(l);
}
END_TEST

/* RW1 with x_0 pinned: Q's inverse is the Wiener covariance from t_0,
 * v min(s, t). */
START_TEST(test_rw1_structure)
{
    double t[] = {0.5, 0.9, 1.0, 2.2, 2.25, 3.0, 4.6, 0.9};
    double v = 1.7;
    gmm_stack_term tm = {.model = GMM_STACK_RW1, .name = "f.t", .value = t, .variance = v};
    gmm_latent *l = NULL;
    ck_assert_int_eq(gmm_latent_stack_alloc(8, 1, &tm, 0, &l), GMM_OK);
    size_t n = gmm_latent_dim(l), d = n - 1;
    ck_assert_uint_eq(n, 7);
    ck_assert_uint_eq(gmm_latent_bandwidth(l), 1);
    double *Q = dense_Q(l, &v);
    gsl_matrix *M = gsl_matrix_alloc(d, d);
    for (size_t a = 0; a < d; a++)
        for (size_t b = 0; b < d; b++)
            gsl_matrix_set(M, a, b,
                           Q[gmm_latent_stack_index(l, 0, a + 1) * n +
                             gmm_latent_stack_index(l, 0, b + 1)]);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(M), GSL_SUCCESS);
    gsl_linalg_cholesky_invert(M);
    const double *val = gmm_latent_stack_values(l, 0, NULL);
    double err = 0.0;
    for (size_t a = 0; a < d; a++)
        for (size_t b = 0; b < d; b++)
            err = fmax(err, fabs(gsl_matrix_get(M, a, b) -
                                 v * (fmin(val[a + 1], val[b + 1]) - val[0])));
    ck_assert_msg(err < 1e-12, "rw1 covariance: %g", err);
    gsl_matrix_free(M);
    free(Q);
    gmm_latent_free(l);
}
END_TEST

/* BYM2 against its definition b = sqrt(s) (sqrt(1 - phi) v + sqrt(phi) u):
 * with R+ the pseudo-inverse of the scaled structure c (D - A) (built here
 * from the graph, c from gmm_latent_stack_scale; an island 1), the
 * constrained prior covariance of (b, u) is [s ((1 - phi) I + phi R+),
 * sqrt(s phi) R+; ., R+]. */
START_TEST(test_bym2_structure)
{
    gmm_graph *g = test_graph();
    size_t lev[11], m = 11;
    for (size_t i = 0; i < m; i++)
        lev[i] = i;
    double th[2] = {1.3, 0.35};
    gmm_stack_term t = {.model = GMM_STACK_BYM2, .name = "f.d", .level = lev, .graph = g,
                        .variance = th[0], .phi = th[1]};
    gmm_latent *l = NULL;
    ck_assert_int_eq(gmm_latent_stack_alloc(m, 1, &t, 0, &l), GMM_OK);
    ck_assert_str_eq(gmm_latent_param_name(l, 1), "f.d.phi");
    size_t n = 2 * m;
    double ld, *S = dense_sigma(l, th, &ld);
    gsl_matrix *R = gsl_matrix_calloc(m, m), *E = gsl_matrix_alloc(m, m);
    gsl_vector *ev = gsl_vector_alloc(m);
    gsl_eigen_symmv_workspace *ws = gsl_eigen_symmv_alloc(m);
    for (size_t v = 0; v < m; v++) {
        double c = gmm_latent_stack_scale(l, 0, v);
        size_t deg = g->ptr[v + 1] - g->ptr[v];
        gsl_matrix_set(R, v, v, deg ? c * (double)deg : 1.0);
        for (size_t p = g->ptr[v]; p < g->ptr[v + 1]; p++)
            gsl_matrix_set(R, v, g->adj[p], -c);
    }
    gsl_eigen_symmv(R, ev, E, ws);
    double Rp[11][11] = {{0}};
    for (size_t e = 0; e < m; e++) {
        double lam = gsl_vector_get(ev, e);
        if (lam < 1e-10)
            continue;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < m; j++)
                Rp[i][j] += gsl_matrix_get(E, i, e) * gsl_matrix_get(E, j, e) / lam;
    }
    double err = 0.0, s = th[0], phi = th[1];
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < m; j++) {
            size_t bi = gmm_latent_stack_index(l, 0, i), bj = gmm_latent_stack_index(l, 0, j);
            size_t ui = gmm_latent_stack_index(l, 0, m + i), uj = gmm_latent_stack_index(l, 0, m + j);
            double bb = s * ((1.0 - phi) * (i == j) + phi * Rp[i][j]);
            err = fmax(err, fabs(S[bi * n + bj] - bb));
            err = fmax(err, fabs(S[bi * n + uj] - sqrt(s * phi) * Rp[i][j]));
            err = fmax(err, fabs(S[ui * n + uj] - Rp[i][j]));
        }
    ck_assert_msg(err < 1e-10, "bym2 covariance: %g", err);
    gsl_eigen_symmv_free(ws);
    gsl_vector_free(ev);
    gsl_matrix_free(R);
    gsl_matrix_free(E);
    free(S);
    gmm_latent_free(l);
    gmm_graph_free(g);
}
END_TEST

/* Cyclic RW1 and RW2 against their definition: Q = sum over the m
 * intervals of the circle (the last from t_{m-1} back to t_0 over period -
 * (t_{m-1} - t_0)) of M_j' Sigma_j^-1 M_j, Sigma_j the innovation
 * covariance (RW1: v dt; RW2: v [dt^3/3 dt^2/2; dt^2/2 dt], inverted by
 * GSL here) and M_j the increment (s_{j+1} - F s_j); the dense
 * eigen-decomposition has exactly one zero eigenvalue, its eigenvector the
 * constant on x (zero on x'); the open RW2's slope direction (t on x, 1 on
 * x') is not null on the circle. */
START_TEST(test_cyclic_structure)
{
    double t[] = {0.5, 0.9, 1.0, 2.2, 2.25, 3.0, 4.6};
    size_t m = 7;
    double v = 0.7, period = 5.3;
    for (int two = 0; two < 2; two++) {
        gmm_stack_term tm = {.model = two ? GMM_STACK_RW2 : GMM_STACK_RW1, .name = "f.t",
                             .value = t, .variance = v, .cyclic = 1, .period = period};
        gmm_latent *l = NULL;
        ck_assert_int_eq(gmm_latent_stack_alloc(m, 1, &tm, 0, &l), GMM_OK);
        size_t s = two ? 2 : 1, n = s * m;
        ck_assert_uint_eq(gmm_latent_dim(l), n);
        ck_assert_uint_eq(gmm_latent_nconstr(l), 1);
        ck_assert(gmm_latent_stack_period(l, 0) == period);
        double *Q = dense_Q(l, &v), *D = calloc(n * n, sizeof *D);
        for (size_t j = 0; j < m; j++) {
            size_t j1 = (j + 1) % m;
            double dt = j + 1 < m ? t[j + 1] - t[j] : period - (t[m - 1] - t[0]);
            /* M (s x 2s) over local (state j, state j1) */
            double M[2][4] = {{0}}, Si[2][2];
            size_t loc[4];
            if (two) {
                double Mv[2][4] = {{-1.0, -dt, 1.0, 0.0}, {0.0, -1.0, 0.0, 1.0}};
                memcpy(M, Mv, sizeof M);
                gsl_matrix *C = gsl_matrix_alloc(2, 2);
                gsl_matrix_set(C, 0, 0, v * dt * dt * dt / 3);
                gsl_matrix_set(C, 0, 1, v * dt * dt / 2);
                gsl_matrix_set(C, 1, 0, v * dt * dt / 2);
                gsl_matrix_set(C, 1, 1, v * dt);
                ck_assert_int_eq(gsl_linalg_cholesky_decomp1(C), GSL_SUCCESS);
                gsl_linalg_cholesky_invert(C);
                for (size_t a = 0; a < 2; a++)
                    for (size_t b = 0; b < 2; b++)
                        Si[a][b] = gsl_matrix_get(C, a, b);
                gsl_matrix_free(C);
                loc[0] = 2 * j, loc[1] = 2 * j + 1, loc[2] = 2 * j1, loc[3] = 2 * j1 + 1;
            } else {
                M[0][0] = -1.0;
                M[0][1] = 1.0;
                Si[0][0] = 1.0 / (v * dt);
                loc[0] = j, loc[1] = j1;
            }
            for (size_t a = 0; a < 2 * s; a++)
                for (size_t b = 0; b < 2 * s; b++) {
                    double q = 0.0;
                    for (size_t p = 0; p < s; p++)
                        for (size_t r = 0; r < s; r++)
                            q += M[p][a] * Si[p][r] * M[r][b];
                    D[gmm_latent_stack_index(l, 0, loc[a]) * n +
                      gmm_latent_stack_index(l, 0, loc[b])] += q;
                }
        }
        double err = 0.0, qmax = 0.0;
        for (size_t i = 0; i < n * n; i++) {
            err = fmax(err, fabs(Q[i] - D[i]));
            qmax = fmax(qmax, fabs(D[i]));
        }
        ck_assert_msg(err < 1e-12 * qmax, "cyclic rw%d: Q vs definition %g", two + 1, err);
        /* the null space */
        gsl_matrix *E = gsl_matrix_alloc(n, n), *QM = gsl_matrix_alloc(n, n);
        gsl_vector *ev = gsl_vector_alloc(n);
        gsl_eigen_symmv_workspace *ws = gsl_eigen_symmv_alloc(n);
        memcpy(QM->data, Q, n * n * sizeof *Q);
        gsl_eigen_symmv(QM, ev, E, ws);
        gsl_eigen_symmv_sort(ev, E, GSL_EIGEN_SORT_ABS_ASC);
        double lmax = fabs(gsl_vector_get(ev, n - 1));
        if (report())
            fprintf(stderr, "cyclic rw%d: Q vs definition %.2e (max %.3g); eigenvalues %.2e, "
                            "%.2e, ..., %.3g\n",
                    two + 1, err, qmax, gsl_vector_get(ev, 0), gsl_vector_get(ev, 1), lmax);
        ck_assert_msg(fabs(gsl_vector_get(ev, 0)) < 1e-12 * lmax, "rw%d: smallest eigenvalue %g",
                      two + 1, gsl_vector_get(ev, 0));
        ck_assert_msg(fabs(gsl_vector_get(ev, 1)) > 1e-6 * lmax,
                      "rw%d: a second null direction (%g)", two + 1, gsl_vector_get(ev, 1));
        double nerr = 0.0, e0 = gsl_matrix_get(E, gmm_latent_stack_index(l, 0, 0), 0);
        for (size_t j = 0; j < m; j++) {
            nerr = fmax(nerr, fabs(gsl_matrix_get(E, gmm_latent_stack_index(l, 0, s * j), 0) -
                                   e0));
            if (two)
                nerr = fmax(nerr,
                            fabs(gsl_matrix_get(E, gmm_latent_stack_index(l, 0, 2 * j + 1), 0)));
        }
        ck_assert_msg(nerr < 1e-10 && fabs(e0) > 0.1, "rw%d: null vector not constant (%g)",
                      two + 1, nerr);
        if (two) { /* Q (t on x, 1 on x') = 0 on the open walk, not on the circle */
            double qs = 0.0, ss = 0.0;
            for (size_t i = 0; i < n; i++) {
                double r = 0.0;
                for (size_t j = 0; j < m; j++)
                    r += Q[i * n + gmm_latent_stack_index(l, 0, 2 * j)] * t[j] +
                         Q[i * n + gmm_latent_stack_index(l, 0, 2 * j + 1)];
                qs += r * r;
            }
            for (size_t j = 0; j < m; j++)
                ss += t[j] * t[j] + 1.0;
            ck_assert_msg(sqrt(qs / ss) > 1e-3 * fabs(gsl_vector_get(ev, 1)),
                          "the slope is null on the circle: %g", sqrt(qs / ss));
        }
        gsl_eigen_symmv_free(ws);
        gsl_vector_free(ev);
        gsl_matrix_free(E);
        gsl_matrix_free(QM);
        free(Q);
        free(D);
        gmm_latent_free(l);
    }
}
END_TEST

/* The wrap's long edge: the bandwidth of a cyclic walk alone stays O(1)
 * as m grows (RCM's zigzag over the cycle), and the default period of the
 * levels 1..m is m. */
START_TEST(test_cyclic_band)
{
    static const size_t ms[] = {5, 52, 1000};
    size_t bw[2][3];
    for (size_t a = 0; a < 3; a++) {
        size_t m = ms[a];
        double *w = malloc(m * sizeof *w);
        for (size_t j = 0; j < m; j++)
            w[j] = (double)(j + 1);
        for (int two = 0; two < 2; two++) {
            gmm_stack_term tm = {.model = two ? GMM_STACK_RW2 : GMM_STACK_RW1, .name = "f.w",
                                 .value = w, .cyclic = 1};
            gmm_latent *l = NULL;
            ck_assert_int_eq(gmm_latent_stack_alloc(m, 1, &tm, 0, &l), GMM_OK);
            ck_assert(gmm_latent_stack_period(l, 0) == (double)m);
            bw[two][a] = gmm_latent_bandwidth(l);
            gmm_latent_free(l);
        }
        free(w);
    }
    if (report())
        fprintf(stderr, "cyclic bandwidth m = 5, 52, 1000: rw1 %zu %zu %zu, rw2 %zu %zu %zu\n",
                bw[0][0], bw[0][1], bw[0][2], bw[1][0], bw[1][1], bw[1][2]);
    /* RCM folds a cycle into a zigzag: twice the open walk's band (rw1 1,
     * rw2 3), whatever m */
    for (size_t a = 0; a < 3; a++) {
        ck_assert_uint_le(bw[0][a], 2);
        ck_assert_uint_le(bw[1][a], 6);
    }
}
END_TEST

/* A seasonal Gaussian fit on weeks 1..52 (four years of noisy rows): the
 * cyclic RW2's posterior mean is equivariant under rotating the weeks (the
 * wrap is an interval like any other), so it is continuous with its
 * derivative from week 52 to week 1: the jump of the value past the
 * trapezoid step and of the derivative across the wrap are no larger
 * than the largest over the interior intervals.  The week numbers 1..208
 * with period 52 give the same fit (reduced onto 1..52). */
typedef struct {
    double x[52], dx[52];
} season;

static void season_fit(int cyclic, size_t shift, int raw, season *out)
{
    enum { M = 52, Y = 4 };
    double week[M * Y], y[M * Y];
    tu_rng r;
    tu_rng_seed(&r, 4242);
    for (size_t i = 0; i < M * Y; i++) {
        size_t w = i % M; /* true week w + 1 */
        double ph = 2.0 * M_PI * ((double)w + 1.0) / M;
        y[i] = sin(ph) + 0.5 * cos(2.0 * ph) + 0.3 * tu_normal(&r);
        week[i] = (double)((w + shift) % M + 1 + (raw ? M * (i / M) : 0));
    }
    gmm_stack_term tm = {.model = GMM_STACK_RW2, .name = "f.week_of_year", .value = week,
                         .cyclic = cyclic, .period = raw ? (double)M : 0.0};
    gmm_latent *l = NULL;
    ck_assert_int_eq(gmm_latent_stack_alloc(M * Y, 1, &tm, 0, &l), GMM_OK);
    ck_assert_uint_eq(gmm_latent_dim(l), 2 * M);
    if (cyclic) {
        ck_assert(gmm_latent_stack_period(l, 0) == (double)M);
        ck_assert(gmm_latent_stack_wrap(l, 0, 53.0) == 1.0);
        ck_assert(gmm_latent_stack_wrap(l, 0, 0.0) == 52.0);
        ck_assert(gmm_latent_stack_wrap(l, 0, 7.5) == 7.5);
    }
    size_t n = gmm_latent_dim(l);
    double th = 1e-3, f, *mean = malloc(n * sizeof *mean);
    ck_assert_int_eq(gmm_latent_gaussian(l, &th, y, 0.09, &f, NULL, NULL), GMM_OK);
    ck_assert_int_eq(gmm_latent_gaussian_posterior(l, mean, NULL), GMM_OK);
    for (size_t w = 0; w < M; w++) { /* true week w + 1 at level (w + shift) % M */
        size_t j = (w + shift) % M;
        out->x[w] = mean[gmm_latent_stack_index(l, 0, 2 * j)];
        out->dx[w] = mean[gmm_latent_stack_index(l, 0, 2 * j + 1)];
    }
    free(mean);
    gmm_latent_free(l);
}

/* The interval from true week w to w + 1 (mod 52): the value's departure
 * from the trapezoid step and the derivative's jump. */
static void season_jumps(const season *s, size_t w, double *jv, double *jd)
{
    size_t w1 = (w + 1) % 52;
    *jv = fabs(s->x[w1] - s->x[w] - 0.5 * (s->dx[w] + s->dx[w1]));
    *jd = fabs(s->dx[w1] - s->dx[w]);
}

START_TEST(test_cyclic_season)
{
    season a, b, o, p;
    season_fit(1, 0, 0, &a);
    season_fit(1, 17, 0, &b);
    season_fit(0, 0, 0, &o);
    season_fit(1, 0, 1, &p);
    double rerr = 0.0, amp = 0.0, perr = 0.0;
    for (size_t w = 0; w < 52; w++) {
        rerr = fmax(rerr, fmax(fabs(a.x[w] - b.x[w]), fabs(a.dx[w] - b.dx[w])));
        perr = fmax(perr, fmax(fabs(a.x[w] - p.x[w]), fabs(a.dx[w] - p.dx[w])));
        amp = fmax(amp, fabs(a.x[w]));
    }
    double iv = 0.0, id = 0.0, wv, wd, ov, od;
    for (size_t w = 0; w + 1 < 52; w++) {
        double jv, jd;
        season_jumps(&a, w, &jv, &jd);
        iv = fmax(iv, jv);
        id = fmax(id, jd);
    }
    season_jumps(&a, 51, &wv, &wd);
    season_jumps(&o, 51, &ov, &od);
    if (report())
        fprintf(stderr, "cyclic season: rotation %.2e (amplitude %.3f); wrap value %.2e "
                        "derivative %.2e, interior max %.2e %.2e; open rw2 across the wrap "
                        "%.2e %.2e; week numbers with period 52 %.2e\n",
                rerr, amp, wv, wd, iv, id, ov, od, perr);
    ck_assert_msg(amp > 0.5, "the seasonal fit is flat: %g", amp);
    ck_assert_msg(rerr < 1e-8 * amp, "rotation changes the fit: %g", rerr);
    ck_assert_msg(perr < 1e-8 * amp, "week numbers modulo 52 change the fit: %g", perr);
    ck_assert_msg(wv <= iv && wd <= id, "wrap jumps %g %g vs interior %g %g", wv, wd, iv, id);
}
END_TEST

/* Eigenvalues of the dense Q at theta; the product of those above tol. */
static double eig_logdet_nonzero(const double *Q, size_t n, size_t *nzero)
{
    gsl_matrix *M = gsl_matrix_alloc(n, n);
    gsl_vector *ev = gsl_vector_alloc(n);
    gsl_eigen_symm_workspace *ws = gsl_eigen_symm_alloc(n);
    for (size_t i = 0; i < n * n; i++)
        M->data[i] = Q[i];
    gsl_eigen_symm(M, ev, ws);
    double mx = 0.0, ld = 0.0;
    for (size_t i = 0; i < n; i++)
        mx = fmax(mx, fabs(gsl_vector_get(ev, i)));
    *nzero = 0;
    for (size_t i = 0; i < n; i++) {
        double e = gsl_vector_get(ev, i);
        if (fabs(e) < 1e-10 * mx)
            (*nzero)++;
        else
            ld += log(e);
    }
    gsl_eigen_symm_free(ws);
    gsl_vector_free(ev);
    gsl_matrix_free(M);
    return ld;
}

/* The banded generalised log-determinant against dense eigenvalues (RW1,
 * BESAG, cyclic RW1 and RW2: A spans the null space, so it is the product of the nonzero
 * eigenvalues -- the identity det(R_-S) det(N'N) / det(N_S)^2) and
 * against log det(V'QV) (every case). */
START_TEST(test_logdet)
{
    scase c;
    scase_make(&c, _i);
    size_t n = gmm_latent_dim(c.l), k = gmm_latent_nconstr(c.l);
    double ld, ldv;
    ck_assert_int_eq(gmm_latent_stack_logdet(c.l, c.p, &ld), GMM_OK);
    double *S = dense_sigma(c.l, c.p, &ldv);
    ck_assert_msg(fabs(ld - ldv) < 1e-9 * fmax(1.0, fabs(ldv)), "%s: %.15g vs %.15g",
                  case_name[_i], ld, ldv);
    if (_i == C_RW1_IID || _i == C_BESAG_IID || _i == C_RW1C_IID || _i == C_RW2C) {
        double *Q = dense_Q(c.l, c.p);
        size_t nz;
        double le = eig_logdet_nonzero(Q, n, &nz);
        ck_assert_uint_eq(nz, k);
        ck_assert_msg(fabs(ld - le) < 1e-9 * fmax(1.0, fabs(le)), "%s: eig %.15g vs %.15g",
                      case_name[_i], le, ld);
        free(Q);
    }
    free(S);
    scase_free(&c);
}
END_TEST

/* BESAG's scaling: per connected component, the geometric mean of the
 * diagonal of the pseudo-inverse of R* (Q at variance 1) is 1; the island
 * has variance 1; R* is the Laplacian times the component's factor. */
START_TEST(test_besag_scaling)
{
    gmm_graph *g = test_graph();
    size_t lev[11];
    for (size_t i = 0; i < 11; i++)
        lev[i] = i;
    gmm_stack_term t = {.model = GMM_STACK_BESAG, .name = "f.d", .level = lev, .graph = g};
    gmm_latent *l = NULL;
    ck_assert_int_eq(gmm_latent_stack_alloc(11, 1, &t, 0, &l), GMM_OK);
    ck_assert_uint_eq(gmm_latent_nconstr(l), 2);
    double one = 1.0;
    double *Q = dense_Q(l, &one);
    size_t n = 11;
    gsl_matrix *M = gsl_matrix_alloc(n, n), *E = gsl_matrix_alloc(n, n);
    gsl_vector *ev = gsl_vector_alloc(n);
    gsl_eigen_symmv_workspace *ws = gsl_eigen_symmv_alloc(n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            gsl_matrix_set(M, i, j,
                           Q[gmm_latent_stack_index(l, 0, i) * n + gmm_latent_stack_index(l, 0, j)]);
    gsl_eigen_symmv(M, ev, E, ws);
    double dg[11] = {0};
    for (size_t e = 0; e < n; e++) {
        double lam = gsl_vector_get(ev, e);
        if (lam < 1e-10)
            continue;
        for (size_t i = 0; i < n; i++)
            dg[i] += gsl_matrix_get(E, i, e) * gsl_matrix_get(E, i, e) / lam;
    }
    const size_t comp[3][2] = {{0, 6}, {6, 10}, {10, 11}};
    for (size_t k = 0; k < 3; k++) {
        double s = 0.0;
        for (size_t i = comp[k][0]; i < comp[k][1]; i++)
            s += log(dg[i]);
        s /= (double)(comp[k][1] - comp[k][0]);
        ck_assert_msg(fabs(s) < 1e-10, "component %zu: log geometric mean %g", k, s);
        double c = gmm_latent_stack_scale(l, 0, comp[k][0]);
        if (k < 2) /* R* = c (D - A): node 0's degree is 3 in the ring with a chord */
            ck_assert(fabs(Q[gmm_latent_stack_index(l, 0, comp[k][0]) * n +
                             gmm_latent_stack_index(l, 0, comp[k][0])] -
                           c * (k == 0 ? 3.0 : 1.0)) < 1e-12 * c);
        else
            ck_assert(c == 1.0);
    }
    gsl_eigen_symmv_free(ws);
    gsl_vector_free(ev);
    gsl_matrix_free(M);
    gsl_matrix_free(E);
    free(Q);
    gmm_latent_free(l);
    gmm_graph_free(g);
}
END_TEST

/* VI does not condition on constraints and refuses them; a band over the
 * limit is refused before allocating, with the bytes needed; bad input. */
START_TEST(test_refusals)
{
    scase c;
    scase_make(&c, C_RW1_IID);
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse("poisson", &lik), GMM_OK);
    gmm_problem *p = NULL;
    double cnt[NR] = {0};
    ck_assert_int_eq(gmm_problem_alloc(c.l, &lik, cnt, NULL, 1, 0.0, &p), GMM_OK);
    gmm_vi_params vp;
    gmm_vi_params_init(&vp);
    vp.prior = GMM_VI_PRIOR_ROWS;
    gmm_vi *vi = NULL;
    ck_assert_int_eq(gmm_vi_alloc(p, &vp, &vi), GMM_EINVAL);
    gmm_problem_free(p);
    scase_free(&c);

    scase_make(&c, C_IID_IID);
    gmm_stack_term t[2] = {
        {.model = GMM_STACK_IID, .name = "f.a", .nlevel = 7, .level = c.lev[0]},
        {.model = GMM_STACK_IID, .name = "f.b", .nlevel = 11, .level = c.lev[1]}};
    gmm_latent *l = NULL;
    ck_assert_int_eq(gmm_latent_stack_alloc(NR, 2, t, 64, &l), GMM_ENOMEM);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "MB"));
    ck_assert_ptr_null(l);
    t[1].nlevel = 5; /* levels up to 10 */
    ck_assert_int_eq(gmm_latent_stack_alloc(NR, 2, t, 0, &l), GMM_EINVAL);
    double one[2] = {1.0, 1.0};
    gmm_stack_term rw = {.model = GMM_STACK_RW1, .name = "f.t", .value = one};
    ck_assert_int_eq(gmm_latent_stack_alloc(2, 1, &rw, 0, &l), GMM_EINVAL);
    ck_assert_ptr_null(l);
    /* cyclic: at least 3 values, a period above their range, only on walks */
    double two[3] = {1.0, 2.0, 2.0};
    rw = (gmm_stack_term){.model = GMM_STACK_RW1, .name = "f.t", .value = two, .cyclic = 1};
    ck_assert_int_eq(gmm_latent_stack_alloc(3, 1, &rw, 0, &l), GMM_EINVAL);
    double three[3] = {1.0, 2.0, 3.0};
    rw = (gmm_stack_term){.model = GMM_STACK_RW2, .name = "f.t", .value = three, .cyclic = 1,
                          .period = -3.0};
    ck_assert_int_eq(gmm_latent_stack_alloc(3, 1, &rw, 0, &l), GMM_EINVAL);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "period"));
    rw.period = 2.0; /* 1, 2, 3 reduce onto 1, 2, 1 */
    ck_assert_int_eq(gmm_latent_stack_alloc(3, 1, &rw, 0, &l), GMM_EINVAL);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "3 distinct"));
    rw.period = NAN;
    ck_assert_int_eq(gmm_latent_stack_alloc(3, 1, &rw, 0, &l), GMM_EINVAL);
    rw.period = 3.5;
    rw.cyclic = 0;
    ck_assert_int_eq(gmm_latent_stack_alloc(3, 1, &rw, 0, &l), GMM_EINVAL);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "cyclic"));
    size_t lv[3] = {0, 1, 2};
    rw = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.g", .nlevel = 3, .level = lv,
                          .cyclic = 1};
    ck_assert_int_eq(gmm_latent_stack_alloc(3, 1, &rw, 0, &l), GMM_EINVAL);
    ck_assert_ptr_null(l);
    scase_free(&c);
}
END_TEST

extern Suite *model_stack_suite(void);
Suite *model_stack_suite(void)
{
    Suite *s = suite_create("model_stack");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_gaussian_vs_dense, 0, C_NCASE);
    tcase_add_loop_test(tc, test_logdet, 0, C_NCASE);
    tcase_add_test(tc, test_order);
    tcase_add_test(tc, test_sparse_map);
    tcase_add_loop_test(tc, test_whiten, 0, 5);
    tcase_add_test(tc, test_laplace_problem);
    tcase_add_loop_test(tc, test_laplace_constrained, 0, 8);
    tcase_add_loop_test(tc, test_vi_gaussian_constrained, 0, 8);
    tcase_add_loop_test(tc, test_vi_poisson_constrained, 0, 10);
    tcase_add_test(tc, test_rw2_structure);
    tcase_add_test(tc, test_rw1_structure);
    tcase_add_test(tc, test_bym2_structure);
    tcase_add_test(tc, test_besag_scaling);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_cyclic_structure);
    tcase_add_test(tc, test_cyclic_band);
    tcase_add_test(tc, test_cyclic_season);
    tcase_add_loop_test(tc, test_predict_new_rows, 0, 16);
    tcase_add_loop_test(tc, test_predict_forms_vi, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}
