/* test_gmrf.c -- graph precisions: the assembled band against a dense
 * construction of the same formula (in the graph's own numbering, then
 * compared through the permutation), positive definiteness (GSL dense
 * Cholesky and eigenvalues), parameter gradients against central
 * differences of a random linear functional of Q's stored band, spec
 * errors, the memory check and the observation map. */
#include <check.h>
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/gmrf.h"
#include "support/testutil.h"

/* ---- hand-built spec trees (the parser is another module's) --------------- */

typedef struct {
    gmm_spec_node leaf[4];
    gmm_spec_arg arg[4][2];
    gmm_spec_node sum;
    gmm_spec_node *kids[4];
} spec_buf;

static void set_leaf(spec_buf *b, size_t i, const char *name, size_t pos, const char *k0,
                     double v0, const char *k1, double v1)
{
    gmm_spec_node *f = &b->leaf[i];
    memset(f, 0, sizeof *f);
    f->type = GMM_SPEC_FACTOR;
    f->name = (char *)name;
    f->index = i;
    f->pos = pos;
    f->arg = b->arg[i];
    if (k0) {
        b->arg[i][f->narg].key = (char *)k0;
        b->arg[i][f->narg].value = v0;
        b->arg[i][f->narg].pos = pos + strlen(name) + 1;
        f->narg++;
    }
    if (k1) {
        b->arg[i][f->narg].key = (char *)k1;
        b->arg[i][f->narg].value = v1;
        b->arg[i][f->narg].pos = pos + strlen(name) + 12;
        f->narg++;
    }
}

static gmm_spec_node *make_sum(spec_buf *b, gmm_spec_type type, size_t nkids)
{
    memset(&b->sum, 0, sizeof b->sum);
    b->sum.type = type;
    b->sum.nchild = nkids;
    for (size_t i = 0; i < nkids; i++)
        b->kids[i] = &b->leaf[i];
    b->sum.child = b->kids;
    return &b->sum;
}

/* ---- test graphs ------------------------------------------------------------- */

/* A random connected-ish graph on n nodes (a scrambled path plus random
 * chords), lengths in [0.2, 3), and `iso` extra isolated nodes. */
static gmm_graph *random_graph(tu_rng *r, size_t n, size_t chords, size_t iso, int lengths)
{
    size_t m = (n - 1) + chords;
    size_t *ei = malloc(m * sizeof *ei), *ej = malloc(m * sizeof *ej);
    double *len = malloc(m * sizeof *len);
    size_t *p = malloc((n + iso) * sizeof *p);
    for (size_t v = 0; v < n + iso; v++)
        p[v] = v;
    for (size_t v = n + iso; v-- > 1;) {
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
        /* Repeated pairs need identical lengths: a function of the pair. */
        size_t lo = ei[k] < ej[k] ? ei[k] : ej[k], hi = ei[k] ^ ej[k] ^ lo;
        len[k] = 0.2 + fmod(0.37 * (double)lo + 0.91 * (double)hi, 2.8);
    }
    gmm_graph *g = NULL;
    ck_assert_int_eq(
        gmm_graph_from_edges(n + iso, m, ei, ej, lengths ? len : NULL, NULL, NULL, &g), GMM_OK);
    free(ei);
    free(ej);
    free(len);
    free(p);
    return g;
}

/* Dense Q (graph numbering, column-major n x n) of one term, straight from
 * the formulas in gmrf.h, written independently of gmrf.c (1 - rho^2 taken
 * directly: fine for the moderate d / l used here). */
static void dense_add(const gmm_graph *g, const char *family, const double *th, double *D)
{
    size_t n = g->n;
    for (size_t u = 0; u < n; u++) {
        size_t deg = g->ptr[u + 1] - g->ptr[u];
        if (!strcmp(family, "edge-ou") && deg == 0)
            D[u * n + u] += 1.0 / th[0];
        if (!strcmp(family, "laplacian"))
            D[u * n + u] += th[0] * (double)deg + th[1];
        for (size_t p = g->ptr[u]; p < g->ptr[u + 1]; p++) {
            size_t w = g->adj[p];
            if (w < u)
                continue;
            if (!strcmp(family, "edge-ou")) {
                double v = th[0], rho = exp(-g->len[p] / th[1]), s = 1.0 - rho * rho;
                D[u * n + u] += 1.0 / (v * s) - 0.5 / v;
                D[w * n + w] += 1.0 / (v * s) - 0.5 / v;
                D[u * n + w] += -rho / (v * s);
                D[w * n + u] += -rho / (v * s);
            } else {
                D[u * n + w] -= th[0];
                D[w * n + u] -= th[0];
            }
        }
    }
}

/* max |Q(perm) - D| / max |D| over the full matrix, in and outside the band. */
static double compare_permuted(const gmm_gmrf *m, const gmm_band *Q, const double *D)
{
    size_t n = m->n;
    double scale = 0.0, err = 0.0;
    for (size_t k = 0; k < n * n; k++)
        if (fabs(D[k]) > scale)
            scale = fabs(D[k]);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double e = fabs(gmm_band_get(Q, m->iperm[i], m->iperm[j]) - D[j * n + i]);
            if (!(e <= err))
                err = e;
        }
    return err / scale;
}

/* Smallest eigenvalue of a dense symmetric matrix (destroyed). */
static double min_eig(double *D, size_t n)
{
    gsl_matrix_view A = gsl_matrix_view_array(D, n, n);
    gsl_vector *ev = gsl_vector_alloc(n);
    gsl_eigen_symm_workspace *w = gsl_eigen_symm_alloc(n);
    ck_assert_int_eq(gsl_eigen_symm(&A.matrix, ev, w), GSL_SUCCESS);
    double lo = gsl_vector_min(ev);
    gsl_eigen_symm_free(w);
    gsl_vector_free(ev);
    return lo;
}

static int dense_chol_ok(const double *D, size_t n)
{
    double *C = malloc(n * n * sizeof *C);
    memcpy(C, D, n * n * sizeof *C);
    gsl_matrix_view A = gsl_matrix_view_array(C, n, n);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int ok = gsl_linalg_cholesky_decomp1(&A.matrix) == GSL_SUCCESS;
    gsl_set_error_handler(old);
    free(C);
    return ok;
}

START_TEST(test_assembly_matches_dense)
{
    tu_rng r;
    tu_rng_seed(&r, 31);
    const char *which[] = {"edge-ou", "laplacian", "sum"};
    for (int rep = 0; rep < 12; rep++) {
        size_t n = 3 + (size_t)(tu_uniform(&r) * 25), iso = rep % 3;
        gmm_graph *g = random_graph(&r, n, n / 2 + 1, iso, rep % 4 != 3);
        for (int c = 0; c < 3; c++) {
            double th[4] = {0.3 + 2.0 * tu_uniform(&r), 0.5 + 2.0 * tu_uniform(&r),
                            0.2 + tu_uniform(&r), 0.1 + tu_uniform(&r)};
            spec_buf sb;
            gmm_spec_node *spec;
            if (c == 0) {
                set_leaf(&sb, 0, "edge-ou", 0, "variance", th[0], "lengthscale", th[1]);
                spec = &sb.leaf[0];
            } else if (c == 1) {
                set_leaf(&sb, 0, "laplacian", 0, "precision", th[0], "ridge", th[1]);
                spec = &sb.leaf[0];
            } else {
                set_leaf(&sb, 0, "edge-ou", 0, "lengthscale", th[1], "variance", th[0]);
                set_leaf(&sb, 1, "laplacian", 30, "ridge", th[3], "precision", th[2]);
                spec = make_sum(&sb, GMM_SPEC_SUM, 2);
            }
            gmm_gmrf *m = NULL;
            ck_assert_int_eq(gmm_gmrf_alloc(g, spec, NULL, &m), GMM_OK);
            ck_assert_uint_eq(m->nparam, c == 2 ? 4 : 2);
            /* Values come from the spec, in the family's parameter order
             * (the sum's spec gives them in another order). */
            const double *want = th;
            for (size_t k = 0; k < m->nparam; k++)
                ck_assert(m->param_value[k] == want[k]);
            ck_assert(gmm_graph_perm_check(m->n, m->perm, m->iperm));
            ck_assert_uint_eq(m->bw, gmm_graph_bandwidth(g, m->iperm));

            gmm_band *Q = gmm_gmrf_band_alloc(m, 0);
            ck_assert_ptr_nonnull(Q);
            tu_band_fill_random(Q, &r); /* assembly must overwrite everything */
            ck_assert_int_eq(gmm_gmrf_assemble(m, m->param_value, Q), GMM_OK);

            size_t N = m->n;
            double *D = calloc(N * N, sizeof *D);
            if (c == 0 || c == 2)
                dense_add(g, "edge-ou", want, D);
            if (c == 1)
                dense_add(g, "laplacian", want, D);
            if (c == 2)
                dense_add(g, "laplacian", want + 2, D);
            /* Tolerance: a handful of roundings per entry, and the dense
             * formula's 1 - rho^2 loses up to eps / (1 - rho^2) ~ 1e-15. */
            double err = compare_permuted(m, Q, D);
            ck_assert_msg(err < 1e-13, "%s n=%zu: rel err %g", which[c], N, err);
            ck_assert(dense_chol_ok(D, N));
            ck_assert_double_gt(min_eig(D, N), 0.0);
            /* And the band Cholesky the marginal likelihood uses. */
            gmm_band *L = gmm_band_alloc(N, m->bw, 0, GMM_BAND_LOWER);
            ck_assert_int_eq(gmm_band_chol_decomp(Q, L), GMM_OK);
            gmm_band_free(L);
            free(D);
            gmm_band_free(Q);
            gmm_gmrf_free(m);
        }
        gmm_graph_free(g);
    }
}
END_TEST

START_TEST(test_edge_ou_pair_eigenvalues_and_isolated)
{
    /* One edge plus an isolated node: the 2 x 2 block has eigenvalues
     * (1/(1 -/+ rho) - 1/2)/v, the isolated node 1/v. */
    size_t ei[] = {0}, ej[] = {2};
    double len[] = {0.7};
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(3, 1, ei, ej, len, NULL, NULL, &g), GMM_OK);
    spec_buf sb;
    set_leaf(&sb, 0, "edge-ou", 0, "variance", 2.5, "lengthscale", 1.3);
    gmm_gmrf *m = NULL;
    ck_assert_int_eq(gmm_gmrf_alloc(g, &sb.leaf[0], NULL, &m), GMM_OK);
    gmm_band *Q = gmm_gmrf_band_alloc(m, 0);
    ck_assert_int_eq(gmm_gmrf_assemble(m, m->param_value, Q), GMM_OK);
    double v = 2.5, rho = exp(-0.7 / 1.3);
    double a = gmm_band_get(Q, m->iperm[0], m->iperm[0]);
    double b = gmm_band_get(Q, m->iperm[0], m->iperm[2]);
    ck_assert_double_eq_tol(a + b, (1.0 / (1.0 + rho) - 0.5) / v, 1e-15);
    ck_assert_double_eq_tol(a - b, (1.0 / (1.0 - rho) - 0.5) / v, 1e-15);
    ck_assert_double_eq_tol(gmm_band_get(Q, m->iperm[1], m->iperm[1]), 1.0 / v, 1e-16);
    gmm_band_free(Q);
    gmm_gmrf_free(m);
    gmm_graph_free(g);
}
END_TEST

START_TEST(test_edge_ou_short_edges_accurate)
{
    /* d / l = 1e-10: 1 - rho^2 = 2e-10 would lose 7 digits if formed
     * directly; the off-diagonal must be -1/(2 t v) to (nearly) full
     * precision: -rho/s = -1/(2t) (1 + O(t^2)). */
    size_t ei[] = {0}, ej[] = {1};
    double len[] = {1e-10};
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(2, 1, ei, ej, len, NULL, NULL, &g), GMM_OK);
    spec_buf sb;
    set_leaf(&sb, 0, "edge-ou", 0, "variance", 1.0, "lengthscale", 1.0);
    gmm_gmrf *m = NULL;
    ck_assert_int_eq(gmm_gmrf_alloc(g, &sb.leaf[0], NULL, &m), GMM_OK);
    gmm_band *Q = gmm_gmrf_band_alloc(m, 0);
    ck_assert_int_eq(gmm_gmrf_assemble(m, m->param_value, Q), GMM_OK);
    double off = gmm_band_get(Q, 1, 0), want = -1.0 / (2.0 * 1e-10);
    ck_assert_msg(fabs(off - want) / fabs(want) < 1e-13, "off %.17g want %.17g", off, want);
    gmm_band_free(Q);
    gmm_gmrf_free(m);
    gmm_graph_free(g);
}
END_TEST

/* c(theta) = sum over stored (i, j) of W(i, j) Q_stored(i, j). */
typedef struct {
    const gmm_gmrf *m;
    const gmm_band *W;
    gmm_band *Q;
    double *theta;
} fd_ctx;

static double functional(void *vctx)
{
    fd_ctx *c = vctx;
    ck_assert_int_eq(gmm_gmrf_assemble(c->m, c->theta, c->Q), GMM_OK);
    double s = 0.0;
    for (size_t j = 0; j < c->Q->n; j++)
        for (size_t i = j; i <= j + c->Q->kl && i < c->Q->n; i++)
            s += gmm_band_get(c->W, i, j) * gmm_band_get(c->Q, i, j);
    return s;
}

START_TEST(test_gradient_vs_finite_differences)
{
    tu_rng r;
    tu_rng_seed(&r, 32);
    for (int rep = 0; rep < 10; rep++) {
        size_t n = 4 + (size_t)(tu_uniform(&r) * 30);
        gmm_graph *g = random_graph(&r, n, n, rep % 2, rep % 5 != 4);
        spec_buf sb;
        set_leaf(&sb, 0, "edge-ou", 0, "variance", 0.5 + tu_uniform(&r), "lengthscale",
                 0.3 + 2.0 * tu_uniform(&r));
        set_leaf(&sb, 1, "laplacian", 30, "precision", 0.2 + tu_uniform(&r), "ridge",
                 0.05 + tu_uniform(&r));
        set_leaf(&sb, 2, "edge-ou", 60, "variance", 1.0 + tu_uniform(&r), "lengthscale",
                 3.0 + tu_uniform(&r));
        gmm_gmrf *m = NULL;
        ck_assert_int_eq(gmm_gmrf_alloc(g, make_sum(&sb, GMM_SPEC_SUM, 3), NULL, &m), GMM_OK);
        ck_assert_uint_eq(m->nparam, 6);
        ck_assert_str_eq(m->param_name[0], "0.edge-ou.variance");
        ck_assert_str_eq(m->param_name[3], "1.laplacian.ridge");
        ck_assert_str_eq(m->param_name[5], "2.edge-ou.lengthscale");

        /* W wider than Q's band: entries outside it must not matter. */
        gmm_band *W = gmm_band_alloc(m->n, m->bw + 2, 0, GMM_BAND_SYMMETRIC);
        tu_band_fill_random(W, &r);
        gmm_band *Q = gmm_gmrf_band_alloc(m, 0);
        double theta[6], grad[6];
        memcpy(theta, m->param_value, sizeof theta);
        for (int k = 0; k < 6; k++)
            grad[k] = 0.25; /* accumulated into */
        ck_assert_int_eq(gmm_gmrf_assemble_rev(m, theta, W, grad), GMM_OK);
        for (int k = 0; k < 6; k++)
            grad[k] -= 0.25;
        fd_ctx ctx = {m, W, Q, theta};
        size_t worst = 0;
        double err = tu_fd_check(theta, 6, grad, functional, &ctx, 1e-6, 1e-8, &worst);
        ck_assert_msg(err < 1e-6, "rep %d: FD rel err %g at %s", rep, err,
                      m->param_name[worst]);
        gmm_band_free(W);
        gmm_band_free(Q);
        gmm_gmrf_free(m);
        gmm_graph_free(g);
    }
}
END_TEST

START_TEST(test_spec_errors)
{
    size_t ei[] = {0}, ej[] = {1};
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(2, 1, ei, ej, NULL, NULL, NULL, &g), GMM_OK);
    gmm_gmrf *m = (gmm_gmrf *)1;
    spec_buf sb;

    set_leaf(&sb, 0, "matern", 4, NULL, 0, NULL, 0);
    ck_assert_int_eq(gmm_gmrf_alloc(g, &sb.leaf[0], NULL, &m), GMM_EPARSE);
    ck_assert_ptr_null(m);
    ck_assert_uint_eq(gmm_error_index(), 4);
    ck_assert(strstr(gmm_error_message(), "unknown precision 'matern'"));

    set_leaf(&sb, 0, "edge-ou", 0, "variance", 1.0, "scale", 2.0);
    ck_assert_int_eq(gmm_gmrf_alloc(g, &sb.leaf[0], NULL, &m), GMM_EPARSE);
    ck_assert_uint_eq(gmm_error_index(), sb.arg[0][1].pos);
    ck_assert(strstr(gmm_error_message(), "edge-ou has no parameter 'scale'"));

    set_leaf(&sb, 0, "edge-ou", 0, "variance", 1.0, "variance", 2.0);
    ck_assert_int_eq(gmm_gmrf_alloc(g, &sb.leaf[0], NULL, &m), GMM_EPARSE);
    ck_assert(strstr(gmm_error_message(), "'variance' given twice"));

    set_leaf(&sb, 0, "edge-ou", 0, "lengthscale", 0.0, NULL, 0);
    ck_assert_int_eq(gmm_gmrf_alloc(g, &sb.leaf[0], NULL, &m), GMM_EPARSE);
    ck_assert(strstr(gmm_error_message(), "lengthscale = 0 must be > 0"));

    set_leaf(&sb, 0, "laplacian", 0, "ridge", -1.0, NULL, 0);
    ck_assert_int_eq(gmm_gmrf_alloc(g, &sb.leaf[0], NULL, &m), GMM_EPARSE);
    ck_assert(strstr(gmm_error_message(), "ridge = -1 must be >= 0"));

    /* A product: the error points at the '*'. */
    const char *text = "edge-ou() * laplacian";
    set_leaf(&sb, 0, "edge-ou", 0, NULL, 0, NULL, 0);
    set_leaf(&sb, 1, "laplacian", 12, NULL, 0, NULL, 0);
    ck_assert_int_eq(gmm_gmrf_alloc(g, make_sum(&sb, GMM_SPEC_PRODUCT, 2), text, &m),
                     GMM_EPARSE);
    ck_assert_uint_eq(gmm_error_index(), 10);
    ck_assert(strstr(gmm_error_message(), "products are not defined for precisions"));

    /* Defaults, and ridge = 0 accepted in the spec. */
    set_leaf(&sb, 0, "laplacian", 0, "ridge", 0.0, NULL, 0);
    ck_assert_int_eq(gmm_gmrf_alloc(g, &sb.leaf[0], NULL, &m), GMM_OK);
    ck_assert(m->param_value[0] == 1.0 && m->param_value[1] == 0.0);
    size_t k;
    ck_assert_int_eq(gmm_gmrf_param_find(m, "0.laplacian.ridge", &k), GMM_OK);
    ck_assert_uint_eq(k, 1);
    ck_assert_int_eq(gmm_gmrf_param_find(m, "0.laplacian.nope", &k), GMM_EINVAL);
    double bad[2] = {-1.0, 0.0};
    ck_assert_int_eq(gmm_gmrf_theta_check(m, bad), GMM_EDOM);
    ck_assert(strstr(gmm_error_message(), "0.laplacian.precision = -1 must be > 0"));
    gmm_band *Q = gmm_gmrf_band_alloc(m, 0);
    ck_assert_int_eq(gmm_gmrf_assemble(m, bad, Q), GMM_EDOM);
    bad[0] = 1.0;
    bad[1] = NAN;
    ck_assert_int_eq(gmm_gmrf_assemble(m, bad, Q), GMM_EDOM);
    gmm_band *Qw = gmm_band_alloc(2, 1, 0, GMM_BAND_GENERAL);
    ck_assert_int_eq(gmm_gmrf_assemble(m, m->param_value, Qw), GMM_EDIM);
    gmm_band_free(Qw);
    gmm_band_free(Q);
    gmm_gmrf_free(m);
    gmm_graph_free(g);
}
END_TEST

START_TEST(test_laplacian_ridge_zero_singular)
{
    /* Without a ridge the Laplacian is singular: the constant vector is in
     * its kernel (check the assembled band through the dense oracle). */
    tu_rng r;
    tu_rng_seed(&r, 33);
    gmm_graph *g = random_graph(&r, 15, 8, 0, 1);
    spec_buf sb;
    set_leaf(&sb, 0, "laplacian", 0, "ridge", 0.0, NULL, 0);
    gmm_gmrf *m = NULL;
    ck_assert_int_eq(gmm_gmrf_alloc(g, &sb.leaf[0], NULL, &m), GMM_OK);
    gmm_band *Q = gmm_gmrf_band_alloc(m, 0);
    /* Alone, it is refused rather than factored on rounding noise. */
    ck_assert_int_eq(gmm_gmrf_assemble(m, m->param_value, Q), GMM_EDOM);
    ck_assert(strstr(gmm_error_message(), "singular"));
    /* Its Laplacian part is singular: assemble with ridge 1, remove I. */
    double theta[2] = {m->param_value[0], 1.0};
    ck_assert_str_eq(m->param_name[1], "0.laplacian.ridge");
    ck_assert_int_eq(gmm_gmrf_assemble(m, theta, Q), GMM_OK);
    double *D = tu_band_to_dense(Q);
    for (size_t i = 0; i < m->n; i++)
        D[i * m->n + i] -= 1.0;
    ck_assert_double_lt(fabs(min_eig(D, m->n)), 1e-12);
    free(D);
    gmm_band_free(Q);
    gmm_gmrf_free(m);
    gmm_graph_free(g);
}
END_TEST

START_TEST(test_memory_check_message)
{
    tu_rng r;
    tu_rng_seed(&r, 34);
    gmm_graph *g = random_graph(&r, 40, 30, 0, 1);
    spec_buf sb;
    set_leaf(&sb, 0, "edge-ou", 0, NULL, 0, NULL, 0);
    gmm_gmrf *m = NULL;
    ck_assert_int_eq(gmm_gmrf_alloc(g, &sb.leaf[0], NULL, &m), GMM_OK);
    size_t bytes = gmm_gmrf_band_bytes(m);
    ck_assert_uint_eq(bytes, (m->bw + 1) * 40 * sizeof(double));
    ck_assert_int_eq(gmm_gmrf_band_check(m, bytes), GMM_OK);
    ck_assert_int_eq(gmm_gmrf_band_check(m, bytes - 1), GMM_ENOMEM);
    char want[64];
    snprintf(want, sizeof want, "n = 40 nodes, bandwidth %zu after reordering", m->bw);
    ck_assert_msg(strstr(gmm_error_message(), want), "%s", gmm_error_message());
    ck_assert_ptr_null(gmm_gmrf_band_alloc(m, 100));
    ck_assert_int_eq(gmm_error_status(), GMM_ENOMEM);
    char line[256];
    gmm_gmrf_describe(m, line, sizeof line);
    ck_assert(strstr(line, "n = 40 nodes"));
    gmm_gmrf_free(m);
    gmm_graph_free(g);
}
END_TEST

START_TEST(test_observation_selection)
{
    tu_rng r;
    tu_rng_seed(&r, 35);
    gmm_graph *g = random_graph(&r, 10, 5, 2, 1);
    spec_buf sb;
    set_leaf(&sb, 0, "edge-ou", 0, NULL, 0, NULL, 0);
    gmm_gmrf *m = NULL;
    ck_assert_int_eq(gmm_gmrf_alloc(g, &sb.leaf[0], NULL, &m), GMM_OK);
    size_t node[] = {3, 7, 3, 11, 0};
    double y[] = {1.5, NAN, -2.0, 0.25, 4.0};
    gmm_gmrf_obs *o = NULL;
    ck_assert_int_eq(gmm_gmrf_obs_alloc(m, 5, node, y, &o), GMM_OK);
    ck_assert_uint_eq(o->obs.nobs, 4);
    ck_assert_uint_eq(o->obs.n, 12);
    ck_assert_uint_eq(o->obs.width, 1);
    ck_assert_uint_eq(o->obs.coef_stride, 0);
    ck_assert(o->obs.coef[0] == 1.0);
    size_t rows[] = {0, 2, 3, 4};
    for (size_t k = 0; k < 4; k++) {
        ck_assert_uint_eq(o->row[k], rows[k]);
        ck_assert_uint_eq(o->obs.offset[k], m->iperm[node[rows[k]]]);
        ck_assert(o->obs.y[k] == y[rows[k]]);
    }
    gmm_gmrf_obs_free(o);
    node[1] = 12;
    ck_assert_int_eq(gmm_gmrf_obs_alloc(m, 5, node, y, &o), GMM_EINVAL);
    gmm_gmrf_free(m);
    gmm_graph_free(g);
}
END_TEST

START_TEST(test_gmrf_out_of_memory)
{
    tu_rng r;
    tu_rng_seed(&r, 36);
    gmm_graph *g = random_graph(&r, 20, 10, 1, 1);
    spec_buf sb;
    set_leaf(&sb, 0, "edge-ou", 0, NULL, 0, NULL, 0);
    set_leaf(&sb, 1, "laplacian", 10, NULL, 0, NULL, 0);
    gmm_spec_node *spec = make_sum(&sb, GMM_SPEC_SUM, 2);
    int failed = 0;
    for (long k = 0; k < 60; k++) {
        gmm_gmrf *m = NULL;
        gmm_alloc_fail_after(k);
        gmm_status st = gmm_gmrf_alloc(g, spec, NULL, &m);
        gmm_alloc_fail_after(-1);
        if (st == GMM_OK) {
            gmm_gmrf_free(m);
            break;
        }
        ck_assert_int_eq(st, GMM_ENOMEM);
        ck_assert_ptr_null(m);
        failed++;
    }
    ck_assert_int_gt(failed, 10);
    gmm_graph_free(g);
}
END_TEST


START_TEST(test_parsed_specs)
{
    /* Through the real parser: names, values, and the '*' located in the
     * text however the product is bracketed. */
    size_t ei[] = {0, 1}, ej[] = {1, 2};
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(3, 2, ei, ej, NULL, NULL, NULL, &g), GMM_OK);
    const char *ok = "edge-ou(variance=2, lengthscale=30) + laplacian(ridge=0.1)";
    gmm_spec_node *s = NULL;
    gmm_gmrf *m = NULL;
    ck_assert_int_eq(gmm_spec_parse(ok, &s), GMM_OK);
    ck_assert_int_eq(gmm_gmrf_alloc(g, s, ok, &m), GMM_OK);
    const char *names[] = {"0.edge-ou.variance", "0.edge-ou.lengthscale",
                           "1.laplacian.precision", "1.laplacian.ridge"};
    double values[] = {2.0, 30.0, 1.0, 0.1};
    ck_assert_uint_eq(m->nparam, 4);
    for (size_t k = 0; k < 4; k++) {
        ck_assert_str_eq(m->param_name[k], names[k]);
        ck_assert(m->param_value[k] == values[k]);
    }
    gmm_gmrf_free(m);
    gmm_spec_free(s);

    const struct {
        const char *text;
        size_t pos;
    } bad[] = {{"edge-ou() * laplacian", 10},
               {"edge-ou +  ( laplacian*edge-ou )", 22},
               {"laplacian * (edge-ou)", 10},
               {"foo(a=1) + edge-ou", 0},
               {"edge-ou + edge-ou(lengthscale=-1)", 18}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ck_assert_int_eq(gmm_spec_parse(bad[k].text, &s), GMM_OK);
        m = (gmm_gmrf *)1;
        ck_assert_int_eq(gmm_gmrf_alloc(g, s, bad[k].text, &m), GMM_EPARSE);
        ck_assert_ptr_null(m);
        ck_assert_msg(gmm_error_index() == bad[k].pos, "'%s': error at %zu, want %zu",
                      bad[k].text, gmm_error_index(), bad[k].pos);
        gmm_spec_free(s);
    }
    gmm_graph_free(g);
}
END_TEST

extern Suite *model_gmrf_suite(void);
Suite *model_gmrf_suite(void)
{
    Suite *s = suite_create("model_gmrf");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_assembly_matches_dense);
    tcase_add_test(tc, test_edge_ou_pair_eigenvalues_and_isolated);
    tcase_add_test(tc, test_edge_ou_short_edges_accurate);
    tcase_add_test(tc, test_gradient_vs_finite_differences);
    tcase_add_test(tc, test_spec_errors);
    tcase_add_test(tc, test_parsed_specs);
    tcase_add_test(tc, test_laplacian_ridge_zero_singular);
    tcase_add_test(tc, test_memory_check_message);
    tcase_add_test(tc, test_observation_selection);
    tcase_add_test(tc, test_gmrf_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}
