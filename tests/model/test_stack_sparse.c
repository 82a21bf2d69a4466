/* test_stack_sparse.c -- the latents' prior in sparse storage (latent.h,
 * prior in sparse storage; stack_sparse.c, latent_gmrf.c) against the band
 * path on formula-like stacks (iid crossed with iid, rw1 + iid, besag with
 * its constraint + iid, bym2 + rw1, a correlated term, ar1 grouped by an
 * rw1, besag grouped by an ar1, a graph precision + iid, a matern32 kernel
 * + iid) and the graph family:
 *
 *   - Q entry by entry, exactly (both assemble the same slots in the same
 *     order, in the latent's order), into the prior's own pattern and into
 *     a larger one (a P-like pattern: the rest of it 0);
 *   - the reverse mode against the band's (1e-12 relative, Qbar on the
 *     pattern) and against central differences of <Qbar, Q(theta)> +
 *     ldbar log det;
 *   - with constraints the normaliser on the subspace (log det Q^ + the
 *     constants, from the sparse factor) against the band's (1e-10) with
 *     its gradient;
 *   - besag's scaling by the sparse route against the band route (1e-10) on
 *     graphs both can do;
 *   - the band's limit waits for the band path: a graph and a stack whose
 *     band is over GMM_GMRF_BAND_LIMIT build, give their sparse prior, and
 *     gmm_latent_band_check refuses them; a family without a sparse prior
 *     (state-space) and a stack in the square-root form (a damped kernel)
 *     say so; every allocation of the symbolic work failing in turn.
 * GMM_TEST_REPORT=1 prints the measured errors. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/band.h"
#include "gmm/gmrf.h"
#include "gmm/graph.h"
#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/sparse.h"
#include "gmm/spec.h"
#include "gmm/stack.h"
#include "support/testutil.h"
#include "support/tu_model.h"

#include "../../src/model/stack/stack_impl.h"

static int report(void) { return getenv("GMM_TEST_REPORT") != NULL; }

#define NR 48

enum { C_IID_IID, C_RW1_IID, C_BESAG_IID, C_BYM2_RW1, C_CORR_IID, C_AR1_GROUP, C_BESAG_AR1,
       C_GRAPH_IID, C_KERNEL_IID, NCASE };
static const char *case_name[] = {"iid x iid",       "rw1 + iid",   "besag + iid",
                                  "bym2 + rw1",      "corr + iid",  "ar1 group rw1",
                                  "besag group ar1", "graph + iid", "matern32 + iid"};

typedef struct {
    gmm_graph *graph;
    gmm_spec_node *spec;
    gmm_gmrf *gmrf;
    gmm_kernel *kern;
    gmm_latent *l;
    size_t lev[2][NR];
    double val[NR], grp[NR], z[2 * NR];
    double th[8];
    size_t np;
} scase;

/* A graph of 14 nodes: a 3 x 4 grid (nodes 0 .. 11), a pair (12, 13). */
static gmm_graph *test_graph(void)
{
    size_t ei[32], ej[32], m = 0;
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 4; j++) {
            if (j + 1 < 4) {
                ei[m] = 4 * i + j;
                ej[m++] = 4 * i + j + 1;
            }
            if (i + 1 < 3) {
                ei[m] = 4 * i + j;
                ej[m++] = 4 * (i + 1) + j;
            }
        }
    ei[m] = 12;
    ej[m++] = 13;
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(14, m, ei, ej, NULL, NULL, NULL, &g), GMM_OK);
    return g;
}

static const char *const eff[] = {"(Intercept)", "x"};

static void scase_make(scase *c, int which)
{
    memset(c, 0, sizeof *c);
    gmm_stack_term t[2];
    memset(t, 0, sizeof t);
    for (size_t i = 0; i < NR; i++) {
        c->lev[0][i] = (i * 5 + 1) % 7;
        c->lev[1][i] = (i * 7 + 2) % 14;
        c->val[i] = (double)((i * 7) % 9) + 0.25 * (double)(i % 2); /* repeats */
        c->grp[i] = (double)(1 + (i * 5) % 4);
        c->z[2 * i] = 1.0;
        c->z[2 * i + 1] = sin(0.7 * (double)i);
    }
    size_t K = 2;
    switch (which) {
    case C_IID_IID:
        t[0] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.a", .nlevel = 7,
                                .level = c->lev[0], .variance = 0.7};
        t[1] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.b", .nlevel = 14,
                                .level = c->lev[1], .variance = 1.3};
        break;
    case C_RW1_IID:
        t[0] = (gmm_stack_term){.model = GMM_STACK_RW1, .name = "f.t", .value = c->val,
                                .variance = 0.9};
        t[1] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.b", .nlevel = 14,
                                .level = c->lev[1], .variance = 0.4};
        break;
    case C_BESAG_IID:
        c->graph = test_graph();
        t[0] = (gmm_stack_term){.model = GMM_STACK_BESAG, .name = "f.d", .level = c->lev[1],
                                .graph = c->graph, .variance = 0.8};
        t[1] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.a", .nlevel = 7,
                                .level = c->lev[0], .variance = 0.5};
        break;
    case C_BYM2_RW1:
        c->graph = test_graph();
        t[0] = (gmm_stack_term){.model = GMM_STACK_BYM2, .name = "f.d", .level = c->lev[1],
                                .graph = c->graph, .variance = 1.1, .phi = 0.6};
        t[1] = (gmm_stack_term){.model = GMM_STACK_RW1, .name = "f.t", .value = c->val,
                                .variance = 0.3};
        break;
    case C_CORR_IID:
        t[0] = (gmm_stack_term){.model = GMM_STACK_CORR, .name = "f.g", .nlevel = 7,
                                .level = c->lev[0], .neffect = 2, .z = c->z, .effect = eff};
        t[1] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.b", .nlevel = 14,
                                .level = c->lev[1], .variance = 0.6};
        break;
    case C_AR1_GROUP:
        for (size_t i = 0; i < NR; i++)
            c->val[i] = (double)(3 + (i * 7) % 12);
        K = 1;
        t[0] = (gmm_stack_term){.model = GMM_STACK_AR1, .name = "f.t", .value = c->val,
                                .variance = 0.8, .rho = 0.6, .group = c->grp,
                                .control = GMM_STACK_RW1};
        break;
    case C_BESAG_AR1:
        c->graph = test_graph();
        t[0] = (gmm_stack_term){.model = GMM_STACK_BESAG, .name = "f.d", .level = c->lev[1],
                                .graph = c->graph, .variance = 1.3, .group = c->grp,
                                .control = GMM_STACK_AR1, .group_rho = 0.7};
        t[1] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.a", .nlevel = 7,
                                .level = c->lev[0], .variance = 0.5};
        break;
    case C_GRAPH_IID: {
        const char *txt = "edge-ou(variance = 1.4, lengthscale = 2.5) + laplacian(precision = "
                          "0.3, ridge = 0.2)";
        c->graph = test_graph();
        ck_assert_int_eq(gmm_spec_parse(txt, &c->spec), GMM_OK);
        ck_assert_int_eq(gmm_gmrf_alloc(c->graph, c->spec, txt, &c->gmrf), GMM_OK);
        t[0] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.a", .nlevel = 7,
                                .level = c->lev[0], .variance = 0.7};
        t[1] = (gmm_stack_term){.model = GMM_STACK_GRAPH, .name = "f.node",
                                .level = c->lev[1], .gmrf = c->gmrf};
        break;
    }
    case C_KERNEL_IID:
        c->kern = tu_kernel_of("matern32(variance = 1.3, lengthscale = 2.0)");
        t[0] = (gmm_stack_term){.model = GMM_STACK_KERNEL, .name = "f.t", .value = c->val,
                                .kernel = c->kern};
        t[1] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.b", .nlevel = 14,
                                .level = c->lev[1], .variance = 0.6};
        break;
    }
    ck_assert_int_eq(gmm_latent_stack_alloc(NR, K, t, 0, &c->l), GMM_OK);
    c->np = gmm_latent_nparam(c->l);
    memcpy(c->th, gmm_latent_param_start(c->l), c->np * sizeof *c->th);
    for (size_t p = 0; p < c->np; p++) /* away from the defaults, inside the domains */
        c->th[p] = gmm_latent_param_domain(c->l, p) == GMM_PARAM_POSITIVE
                       ? c->th[p] * (1.0 + 0.17 * (double)(p + 1))
                       : 0.8 * c->th[p] + 0.05;
}

static void scase_free(scase *c)
{
    gmm_latent_free(c->l);
    gmm_kernel_free(c->kern);
    gmm_gmrf_free(c->gmrf);
    gmm_spec_free(c->spec);
    gmm_graph_free(c->graph);
}

/* A pattern containing Q's: its entries and (i, i + 1), (i, i + 5). */
static gmm_sparse *wider(const gmm_sparse *Q)
{
    size_t n = Q->n, m = 0;
    size_t *ei = malloc((Q->nnz + 2 * n + 1) * sizeof *ei);
    size_t *ej = malloc((Q->nnz + 2 * n + 1) * sizeof *ej);
    for (size_t j = 0; j < n; j++)
        for (size_t k = Q->colptr[j]; k < Q->colptr[j + 1]; k++) {
            ei[m] = Q->rowind[k];
            ej[m++] = j;
        }
    for (size_t i = 0; i + 1 < n; i++) {
        ei[m] = i;
        ej[m++] = i + 1;
        if (i + 5 < n) {
            ei[m] = i + 5;
            ej[m++] = i;
        }
    }
    gmm_sparse *P = NULL;
    ck_assert_int_eq(gmm_sparse_from_entries(n, m, ei, ej, &P), GMM_OK);
    free(ei);
    free(ej);
    return P;
}

/* A Qbar on S's pattern and the same in a band: smooth values of (i, j). */
static void fill_qbar(gmm_sparse *S, gmm_band *B)
{
    gmm_band_set_zero(B);
    for (size_t j = 0; j < S->n; j++)
        for (size_t k = S->colptr[j]; k < S->colptr[j + 1]; k++) {
            size_t i = S->rowind[k];
            S->val[k] = cos(0.3 * (double)i + 0.11 * (double)j) + (i == j ? 0.5 : 0.0);
            if (i - j <= B->kl)
                *gmm_band_ptr(B, i, j) = S->val[k];
        }
}

static double rel(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-300); }

/* <Qbar, Q(theta)> + ldbar log det (symmetric convention) for the
 * differences. */
static double sparse_objective(gmm_latent *l, const double *th, gmm_sparse *Q,
                               const gmm_sparse *Qbar, double ldbar)
{
    double ld = 0.0, s = 0.0;
    ck_assert_int_eq(gmm_latent_prior_sparse(l, th, Q, &ld), GMM_OK);
    for (size_t k = 0; k < Q->nnz; k++)
        s += Qbar->val[k] * Q->val[k];
    return s + (ldbar != 0.0 ? ldbar * ld : 0.0);
}

/* Q, its reverse and the constrained normaliser: sparse against band. */
START_TEST(test_sparse_vs_band)
{
    scase c;
    scase_make(&c, _i);
    gmm_latent *l = c.l;
    size_t n = gmm_latent_dim(l), kl = gmm_latent_bandwidth(l), np = c.np;
    int con = gmm_latent_nconstr(l) > 0;
    gmm_band *QB = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    gmm_band *QbarB = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    gmm_sparse *Q = NULL;
    double ldb = NAN, lds = NAN;
    ck_assert_int_eq(gmm_latent_prior_pattern(l, &Q), GMM_OK);
    ck_assert_uint_eq(Q->n, n);
    ck_assert_int_eq(gmm_latent_prior(l, c.th, QB, &ldb), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_sparse(l, c.th, Q, &lds), GMM_OK);
    /* every stored sparse entry is the band's, and nothing of the band is missed */
    double bsum = 0.0, ssum = 0.0;
    for (size_t j = 0; j < n; j++)
        for (size_t k = Q->colptr[j]; k < Q->colptr[j + 1]; k++) {
            ck_assert_uint_le(Q->rowind[k] - j, kl);
            ck_assert_msg(Q->val[k] == gmm_band_get(QB, Q->rowind[k], j),
                          "%s: Q(%zu, %zu) = %.17g, band %.17g", case_name[_i], Q->rowind[k],
                          j, Q->val[k], gmm_band_get(QB, Q->rowind[k], j));
            ssum += fabs(Q->val[k]);
        }
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + kl; i++)
            bsum += fabs(gmm_band_get(QB, i, j));
    ck_assert_double_eq(bsum, ssum); /* the same entries, summed in the same order */
    ck_assert_int_eq(isnan(lds), !con);
    if (con)
        ck_assert_double_le(rel(lds, ldb), 1e-10);
    /* into a wider pattern: Q's values, 0 elsewhere */
    gmm_sparse *P = wider(Q);
    double ldp = NAN;
    for (size_t k = 0; k < P->nnz; k++)
        P->val[k] = 99.0;
    ck_assert_int_eq(gmm_latent_prior_sparse(l, c.th, P, &ldp), GMM_OK);
    for (size_t j = 0; j < n; j++)
        for (size_t k = P->colptr[j]; k < P->colptr[j + 1]; k++) {
            size_t q = gmm_sparse_find(Q, P->rowind[k], j);
            ck_assert(P->val[k] == (q == SIZE_MAX ? 0.0 : Q->val[q]));
        }
    /* the reverse, Qbar on Q's pattern and on the wider one, against the band's */
    gmm_sparse *Qbar = gmm_sparse_alloc_like(Q), *Pbar = gmm_sparse_alloc_like(P);
    double tb[8], ts[8], tp[8], worst = 0.0, worst_ld = 0.0;
    double ldbar = con ? 0.7 : 0.0;
    fill_qbar(Qbar, QbarB);
    for (size_t j = 0; j < n; j++) /* Pbar: Qbar's values on Q's entries, noise elsewhere */
        for (size_t k = P->colptr[j]; k < P->colptr[j + 1]; k++) {
            size_t q = gmm_sparse_find(Q, P->rowind[k], j);
            Pbar->val[k] = q == SIZE_MAX ? 1e3 : Qbar->val[q];
        }
    for (int withld = 0; withld <= con; withld++) {
        double lb = withld ? ldbar : 0.0;
        memset(tb, 0, sizeof tb);
        memset(ts, 0, sizeof ts);
        memset(tp, 0, sizeof tp);
        ck_assert_int_eq(gmm_latent_prior(l, c.th, QB, &ldb), GMM_OK);
        ck_assert_int_eq(gmm_latent_prior_rev(l, QbarB, lb, tb), GMM_OK);
        ck_assert_int_eq(gmm_latent_prior_sparse(l, c.th, Q, &lds), GMM_OK);
        ck_assert_int_eq(gmm_latent_prior_rev_sparse(l, Qbar, lb, ts), GMM_OK);
        ck_assert_int_eq(gmm_latent_prior_sparse(l, c.th, P, &ldp), GMM_OK);
        ck_assert_int_eq(gmm_latent_prior_rev_sparse(l, Pbar, lb, tp), GMM_OK);
        for (size_t p = 0; p < np; p++) {
            double e = rel(ts[p], tb[p]), e2 = rel(tp[p], tb[p]);
            ck_assert_msg(e <= (withld ? 1e-10 : 1e-12) && e2 <= (withld ? 1e-10 : 1e-12),
                          "%s: thetabar[%zu] sparse %.17g band %.17g", case_name[_i], p, ts[p],
                          tb[p]);
            if (withld)
                worst_ld = fmax(worst_ld, fmax(e, e2));
            else
                worst = fmax(worst, fmax(e, e2));
        }
    }
    /* at a second theta, where a scale-only stack's log det and its
     * gradient come from the first one's by formula (stack_sparse.c,
     * SCALE-ONLY NORMALISER), against the band's factorisation there */
    double th2[8];
    for (size_t p = 0; p < np; p++)
        th2[p] = gmm_latent_param_domain(l, p) == GMM_PARAM_POSITIVE
                     ? c.th[p] * (0.55 + 0.35 * (double)p)
                     : c.th[p];
    memset(tb, 0, sizeof tb);
    memset(ts, 0, sizeof ts);
    ck_assert_int_eq(gmm_latent_prior(l, th2, QB, &ldb), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rev(l, QbarB, ldbar, tb), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_sparse(l, th2, Q, &lds), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rev_sparse(l, Qbar, ldbar, ts), GMM_OK);
    double worst2 = con ? rel(lds, ldb) : 0.0;
    if (con)
        ck_assert_msg(rel(lds, ldb) <= 1e-10, "%s: log det at theta2 sparse %.17g band %.17g",
                      case_name[_i], lds, ldb);
    for (size_t p = 0; p < np; p++) {
        ck_assert_msg(rel(ts[p], tb[p]) <= 1e-10, "%s: thetabar[%zu] at theta2 sparse %.17g "
                      "band %.17g", case_name[_i], p, ts[p], tb[p]);
        worst2 = fmax(worst2, rel(ts[p], tb[p]));
    }
    memset(ts, 0, sizeof ts);
    ck_assert_int_eq(gmm_latent_prior(l, c.th, QB, &ldb), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_sparse(l, c.th, Q, &lds), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rev_sparse(l, Qbar, ldbar, ts), GMM_OK);
    /* against central differences of <Qbar, Q> + ldbar log det */
    double worst_fd = 0.0;
    for (size_t p = 0; p < np; p++) {
        double th[8], h = 1e-5 * fmax(fabs(c.th[p]), 0.1);
        memcpy(th, c.th, np * sizeof *th);
        th[p] = c.th[p] + h;
        double fp = sparse_objective(l, th, Q, Qbar, ldbar);
        th[p] = c.th[p] - h;
        double fm = sparse_objective(l, th, Q, Qbar, ldbar);
        double fd = (fp - fm) / (2.0 * h);
        double e = fabs(fd - ts[p]) / fmax(fabs(fd), 1e-3);
        ck_assert_msg(e <= 1e-7, "%s: thetabar[%zu] %.12g, differences %.12g", case_name[_i],
                      p, ts[p], fd);
        worst_fd = fmax(worst_fd, e);
    }
    if (report())
        printf("sparse prior %-16s n %3zu nnz %4zu: Q exact, rev %.1e, with log det %.1e, "
               "log det %.1e, at theta2 %.1e, differences %.1e\n",
               case_name[_i], n, Q->nnz, worst, worst_ld, con ? rel(lds, ldb) : 0.0, worst2,
               worst_fd);
    gmm_sparse_free(Q);
    gmm_sparse_free(P);
    gmm_sparse_free(Qbar);
    gmm_sparse_free(Pbar);
    gmm_band_free(QB);
    gmm_band_free(QbarB);
    scase_free(&c);
}
END_TEST

/* The whitening from the sparse factor (gmm_latent_whiten_setup_sparse)
 * against the band's: the same covariance W W' of x = W v (the prior's,
 * on {A x = 0} with constraints) though W differs, whiten_t its transpose
 * (<g, W v> = <W' g, v>), unwhiten its inverse on the free coordinates,
 * and no reverse mode.  Dense n x n products: tests only. */
START_TEST(test_sparse_whiten)
{
    scase c;
    scase_make(&c, _i);
    gmm_latent *l = c.l;
    size_t n = gmm_latent_dim(l);
    double *Wb = calloc(n * n, sizeof *Wb), *Ws = calloc(n * n, sizeof *Ws);
    double *v = calloc(n, sizeof *v), *x = calloc(n, sizeof *x), *u = calloc(n, sizeof *u),
           *w = calloc(n, sizeof *w), tb[8] = {0};
    ck_assert(Wb && Ws && v && x && u && w);
    for (int sp = 0; sp < 2; sp++) {
        double *W = sp ? Ws : Wb;
        ck_assert_int_eq(sp ? gmm_latent_whiten_setup_sparse(l, c.th)
                            : gmm_latent_whiten_setup(l, c.th),
                         GMM_OK);
        for (size_t j = 0; j < n; j++) { /* column j of W */
            memset(v, 0, n * sizeof *v);
            v[j] = 1.0;
            ck_assert_int_eq(gmm_latent_whiten(l, v, x), GMM_OK);
            for (size_t i = 0; i < n; i++)
                W[i * n + j] = x[i];
        }
    }
    /* C = W W' for both, compared entry by entry */
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k <= i; k++) {
            double cb = 0.0, cs = 0.0;
            for (size_t j = 0; j < n; j++) {
                cb += Wb[i * n + j] * Wb[k * n + j];
                cs += Ws[i * n + j] * Ws[k * n + j];
            }
            worst = fmax(worst, fabs(cb - cs));
            scale = fmax(scale, fabs(cb));
        }
    ck_assert_msg(worst <= 1e-12 * scale, "%s: W W' sparse against band %.3g (of %.3g)",
                  case_name[_i], worst, scale);
    /* transpose and inverse, on the sparse setup (still the latest) */
    for (size_t i = 0; i < n; i++) {
        v[i] = sin(1.3 * (double)i + 0.2);
        w[i] = cos(0.7 * (double)i);
    }
    ck_assert_int_eq(gmm_latent_whiten(l, v, x), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten_t(l, w, u), GMM_OK);
    double gx = 0.0, uv = 0.0, mag = 0.0;
    for (size_t i = 0; i < n; i++) {
        gx += w[i] * x[i];
        uv += u[i] * v[i];
        mag += fabs(w[i] * x[i]) + fabs(u[i] * v[i]);
    }
    ck_assert_msg(fabs(gx - uv) <= 1e-12 * mag, "%s: <g, W v> %.17g, <W' g, v> %.17g",
                  case_name[_i], gx, uv);
    /* W W^-1 x = x (v's coordinates on the pinned latents are never read) */
    ck_assert_int_eq(gmm_latent_unwhiten(l, x, u), GMM_OK);
    ck_assert_int_eq(gmm_latent_whiten(l, u, w), GMM_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(w[i] - x[i]) <= 1e-10 * (1.0 + fabs(x[i])),
                      "%s: whiten(unwhiten(x))[%zu] %.17g, x %.17g", case_name[_i], i, w[i],
                      x[i]);
    ck_assert_int_eq(gmm_latent_whiten_rev(l, NULL, w, tb), GMM_EINVAL);
    if (report())
        printf("sparse whitening %-16s n %3zu: W W' %.1e of %.1e, transpose %.1e\n",
               case_name[_i], n, worst, scale, fabs(gx - uv) / mag);
    free(Wb);
    free(Ws);
    free(v);
    free(x);
    free(u);
    free(w);
    scase_free(&c);
}
END_TEST

/* Every allocation of the sparse prior's symbolic work failing in turn
 * (a count-down allocator): GMM_ENOMEM, nothing kept, and the next call
 * builds it (valgrind: no leak). */
START_TEST(test_out_of_memory)
{
    static const int cases[] = {C_BESAG_IID, C_GRAPH_IID};
    for (size_t w = 0; w < 2; w++) {
        scase c;
        scase_make(&c, cases[w]);
        gmm_sparse *Q = NULL;
        double ld;
        int failed = 0;
        for (long k = 0; k < 200; k++) {
            gmm_alloc_fail_after(k);
            gmm_status st = gmm_latent_prior_pattern(c.l, &Q);
            if (st == GMM_OK)
                st = gmm_latent_prior_sparse(c.l, c.th, Q, &ld);
            gmm_alloc_fail_after(-1);
            if (st == GMM_OK)
                break;
            ck_assert_int_eq(st, GMM_ENOMEM);
            gmm_sparse_free(Q);
            Q = NULL;
            failed++;
        }
        ck_assert_int_gt(failed, 3);
        ck_assert_ptr_nonnull(Q);
        ck_assert_int_eq(gmm_latent_prior_sparse(c.l, c.th, Q, &ld), GMM_OK);
        gmm_sparse_free(Q);
        scase_free(&c);
    }
}
END_TEST

/* A k x k 4-neighbour grid, plus an island (node k^2) when island. */
static gmm_graph *grid(size_t k, int island)
{
    size_t m = 0, *ei = malloc(2 * k * k * sizeof *ei), *ej = malloc(2 * k * k * sizeof *ej);
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < k; j++) {
            if (j + 1 < k) {
                ei[m] = i * k + j;
                ej[m++] = i * k + j + 1;
            }
            if (i + 1 < k) {
                ei[m] = i * k + j;
                ej[m++] = (i + 1) * k + j;
            }
        }
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(k * k + (island ? 1 : 0), m, ei, ej, NULL, NULL,
                                          NULL, &g),
                     GMM_OK);
    free(ei);
    free(ej);
    return g;
}

/* besag's scaling, and its pinned structure's log det: the sparse route
 * against the band route. */
START_TEST(test_scale_routes)
{
    gmm_graph *gs[2] = {test_graph(), grid(9, 1)};
    for (size_t t = 0; t < 2; t++) {
        const gmm_graph *g = gs[t];
        size_t n = g->n, ncomp = 0, *comp = malloc(n * sizeof *comp);
        ck_assert_int_eq(gmm_graph_components(g, comp, &ncomp), GMM_OK);
        stack_comp a = {.name = "f.d"}, b = {.name = "f.d"};
        a.scale = malloc(n * sizeof(double));
        a.mvar = malloc(n * sizeof(double));
        b.scale = malloc(n * sizeof(double));
        b.mvar = malloc(n * sizeof(double));
        ck_assert_int_eq(stack_besag_scale(&a, g, comp, ncomp, 0, -1), GMM_OK);
        ck_assert_int_eq(stack_besag_scale(&b, g, comp, ncomp, 0, 1), GMM_OK);
        double worst = 0.0;
        for (size_t v = 0; v < n; v++) {
            ck_assert_double_le(rel(b.scale[v], a.scale[v]), 1e-10);
            ck_assert_double_le(rel(b.mvar[v], a.mvar[v]), 1e-10);
            worst = fmax(worst, fmax(rel(b.scale[v], a.scale[v]), rel(b.mvar[v], a.mvar[v])));
        }
        ck_assert_double_eq(a.scale[n - 1], 1.0 * (t == 1) + b.scale[n - 1] * (t == 0));
        /* the pinned structure's log det (the sparse normaliser's reference) */
        ck_assert(isfinite(a.ldpin));
        ck_assert_double_le(rel(b.ldpin, a.ldpin), 1e-10);
        if (report())
            printf("besag scaling, %zu nodes: sparse route vs band %.1e\n", n, worst);
        free(a.scale);
        free(a.mvar);
        free(b.scale);
        free(b.mvar);
        free(comp);
        gmm_graph_free(gs[t]);
    }
}
END_TEST

/* The graph family: its sparse prior against its band, and the refusal of
 * a family without one. */
START_TEST(test_graph_family)
{
    gmm_graph *g = test_graph();
    gmm_spec_node *spec = NULL;
    gmm_gmrf *m = NULL;
    const char *txt = "edge-ou(variance = 1.4, lengthscale = 2.5) + iid(variance = 2)";
    ck_assert_int_eq(gmm_spec_parse(txt, &spec), GMM_OK);
    ck_assert_int_eq(gmm_gmrf_alloc(g, spec, txt, &m), GMM_OK);
    size_t node[NR];
    for (size_t r = 0; r < NR; r++)
        node[r] = (r * 5) % g->n;
    gmm_latent *l = NULL;
    ck_assert_int_eq(gmm_latent_gmrf_alloc(m, NR, node, &l), GMM_OK);
    size_t n = gmm_latent_dim(l), kl = gmm_latent_bandwidth(l), np = gmm_latent_nparam(l);
    double th[3] = {1.1, 1.9, 0.6}, ld = 0.0, tb[3] = {0}, ts[3] = {0};
    gmm_band *QB = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    gmm_band *QbarB = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    gmm_sparse *Q = NULL;
    ck_assert_int_eq(gmm_latent_prior_pattern(l, &Q), GMM_OK);
    ck_assert_uint_eq(Q->nnz, n + g->nedge);
    ck_assert_int_eq(gmm_latent_prior(l, th, QB, &ld), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_sparse(l, th, Q, &ld), GMM_OK);
    ck_assert(isnan(ld));
    for (size_t j = 0; j < n; j++)
        for (size_t k = Q->colptr[j]; k < Q->colptr[j + 1]; k++)
            ck_assert(Q->val[k] == gmm_band_get(QB, Q->rowind[k], j));
    gmm_sparse *Qbar = gmm_sparse_alloc_like(Q);
    fill_qbar(Qbar, QbarB);
    ck_assert_int_eq(gmm_latent_prior_rev_sparse(l, Qbar, 0.0, ts), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior(l, th, QB, &ld), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rev(l, QbarB, 0.0, tb), GMM_OK);
    for (size_t p = 0; p < np; p++) {
        ck_assert_double_le(rel(ts[p], tb[p]), 1e-12);
        double t2[3], h = 1e-5 * th[p];
        memcpy(t2, th, sizeof t2);
        t2[p] = th[p] + h;
        double fp = sparse_objective(l, t2, Q, Qbar, 0.0);
        t2[p] = th[p] - h;
        double fd = (fp - sparse_objective(l, t2, Q, Qbar, 0.0)) / (2.0 * h);
        ck_assert_double_le(fabs(fd - ts[p]) / fmax(fabs(fd), 1e-3), 1e-7);
    }
    /* the reverse needs a sparse prior last (a band one does not count) */
    ck_assert_int_eq(gmm_latent_prior(l, th, QB, &ld), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rev_sparse(l, Qbar, 0.0, ts), GMM_EINVAL);
    /* a pattern that misses an entry */
    gmm_sparse *D = NULL;
    ck_assert_int_eq(gmm_sparse_from_entries(n, 0, NULL, NULL, &D), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_sparse(l, th, D, &ld), GMM_EDIM);
    gmm_sparse_free(D);
    gmm_sparse_free(Q);
    gmm_sparse_free(Qbar);
    gmm_band_free(QB);
    gmm_band_free(QbarB);
    gmm_latent_free(l);

    /* a state-space latent has none */
    gmm_kernel *kern = tu_kernel_of("matern32(variance = 1.3, lengthscale = 2.0)");
    double t[4] = {0.0, 1.0, 2.5, 3.0};
    ck_assert_int_eq(gmm_latent_ssm_alloc(kern, t, 4, NULL, &l), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_pattern(l, &Q), GMM_EINVAL);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "no sparse prior"));
    ck_assert_int_eq(gmm_latent_band_check(l), GMM_OK);
    gmm_latent_free(l);
    gmm_kernel_free(kern);
    /* a stack in the square-root form (a damped kernel) has none either */
    kern = tu_kernel_of("matern32 + constant");
    double *kv = gmm_kernel_values(kern), tt[NR];
    for (size_t i = 0; i < gmm_kernel_nparam(kern); i++)
        if (isnan(kv[i]))
            kv[i] = 1.0;
    for (size_t r = 0; r < NR; r++)
        tt[r] = (double)(r % 9);
    gmm_stack_term kt = {.model = GMM_STACK_KERNEL, .name = "f.t", .value = tt, .kernel = kern};
    ck_assert_int_eq(gmm_latent_stack_alloc(NR, 1, &kt, 0, &l), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_pattern(l, &Q), GMM_EINVAL);
    ck_assert_msg(strstr(gmm_error_message(), "'f.t'") &&
                      strstr(gmm_error_message(), "square-root form"),
                  "%s", gmm_error_message());
    ck_assert_int_eq(gmm_sparse_from_entries(gmm_latent_dim(l), 0, NULL, NULL, &D), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_sparse(l, kv, D, &ld), GMM_EINVAL);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "square-root form"));
    gmm_sparse_free(D);
    gmm_latent_free(l);
    gmm_kernel_free(kern);
    gmm_gmrf_free(m);
    gmm_spec_free(spec);
    gmm_graph_free(g);
}
END_TEST

/* A 520 x 520 grid: its band (bandwidth 520, 1.1 GB) is over the default
 * limit, yet the graph latent and a stack over it build and give their
 * sparse prior; the band path's check refuses them. */
START_TEST(test_wide_builds)
{
    size_t k = 520;
    gmm_graph *g = grid(k, 0);
    gmm_spec_node *spec = NULL;
    gmm_gmrf *m = NULL;
    const char *txt = "laplacian(precision = 2, ridge = 0.5)";
    ck_assert_int_eq(gmm_spec_parse(txt, &spec), GMM_OK);
    ck_assert_int_eq(gmm_gmrf_alloc(g, spec, txt, &m), GMM_OK);
    ck_assert_int_eq(gmm_gmrf_band_check(m, 0), GMM_ENOMEM);
    size_t nr = 100, node[100];
    for (size_t r = 0; r < nr; r++)
        node[r] = (r * 2711) % g->n;
    gmm_latent *l = NULL;
    ck_assert_int_eq(gmm_latent_gmrf_alloc(m, nr, node, &l), GMM_OK);
    ck_assert_int_eq(gmm_latent_band_check(l), GMM_ENOMEM);
    gmm_sparse *Q = NULL;
    double th[2] = {2.0, 0.5}, ld;
    ck_assert_int_eq(gmm_latent_prior_pattern(l, &Q), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_sparse(l, th, Q, &ld), GMM_OK);
    double tr = 0.0; /* trace: 2 deg + ridge summed */
    for (size_t j = 0; j < Q->n; j++)
        tr += Q->val[Q->colptr[j]];
    ck_assert_double_eq_tol(tr, 2.0 * 2.0 * (double)g->nedge + 0.5 * (double)g->n, 1e-6);
    gmm_sparse_free(Q);
    gmm_latent_free(l);

    gmm_stack_term t = {.model = GMM_STACK_GRAPH, .name = "f.s", .level = node, .gmrf = m};
    ck_assert_int_eq(gmm_latent_stack_alloc(nr, 1, &t, 0, &l), GMM_OK);
    ck_assert_int_eq(gmm_latent_band_check(l), GMM_ENOMEM);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "MB"));
    ck_assert_int_eq(gmm_latent_prior_pattern(l, &Q), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_sparse(l, th, Q, &ld), GMM_OK);
    double tr2 = 0.0;
    for (size_t j = 0; j < Q->n; j++)
        tr2 += Q->val[Q->colptr[j]];
    ck_assert_double_eq_tol(tr2, tr, 1e-6);
    gmm_sparse_free(Q);
    gmm_latent_free(l);
    gmm_gmrf_free(m);
    gmm_spec_free(spec);
    gmm_graph_free(g);
}
END_TEST

Suite *model_stack_sparse_suite(void)
{
    Suite *s = suite_create("model_stack_sparse");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_sparse_vs_band, 0, NCASE);
    tcase_add_loop_test(tc, test_sparse_whiten, 0, NCASE);
    tcase_add_test(tc, test_scale_routes);
    tcase_add_test(tc, test_out_of_memory);
    tcase_add_test(tc, test_graph_family);
    tcase_add_test(tc, test_wide_builds);
    suite_add_tcase(s, tc);
    return s;
}
