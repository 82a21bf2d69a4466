/* stack_scale.c -- the scaling of BESAG and BYM2 components (Sorbye & Rue
 * 2014; stack_comp.c builds them).
 *
 * The marginal variances of the sum-to-zero field with precision R on a
 * connected component come from the pinned matrix R^ (one node s of the
 * component removed, i.e. its row and column replaced by the identity's):
 * with z ~ N(0, R^-1) and z_s = 0, the constrained field is x = z - 1 (1'z)
 * / m, so
 *
 *     var(x_i) = Sz_ii - 2 (Sz 1)_i / m + 1'Sz 1 / m^2,
 *
 * Sz = R^-1 less its pinned diagonal: an inverse subset (its diagonal) and
 * one solve for every component at once (R^ is block diagonal over them).
 * The component's R is then multiplied by the geometric mean of these
 * variances.
 *
 * TWO ROUTES.  Graphs whose RCM band is narrow (bandwidth up to
 * STACK_SCALE_BAND_MAX) take the band Cholesky and the band selected
 * inverse, as before; wider ones (2-D lattices: a k x k grid has bandwidth
 * k) the sparse Cholesky after a fill-reducing ordering and the sparse
 * selected inverse (factor.h), which never forms the band: a 1000 x 1000
 * lattice's band would be 8 GB, its sparse factor is a few hundred MB. */
#include <math.h>
#include <stdint.h>

#include "gmm/alloc.h"
#include "gmm/factor.h"
#include "stack_impl.h"

/* Above this RCM bandwidth the sparse route (the top): the band's n bw^2
 * flops and n bw doubles are then well past the sparse factor's on the
 * graphs users bring (lattices, maps), and below it the band is cheap
 * whatever the graph. */
#define STACK_SCALE_BAND_MAX 64

/* The pinned node of each connected component: its first (pin[v] set on
 * it and on islands). */
typedef struct {
    size_t n;
    const size_t *comp;
    size_t *first, *size;
} pins;

static int pinned(const pins *p, size_t v) { return p->first[p->comp[v]] == v; }

/* Band route: dg[v] = (R^-1)_vv and w[v] = (R^-1 1_free)_v, node order;
 * *ld = log det R^. */
static gmm_status scale_band(stack_comp *c, const gmm_graph *g, const pins *P,
                             const size_t *iperm, size_t bw, size_t limit, double *dg,
                             double *w, double *ld)
{
    gmm_status st;
    size_t n = g->n, lim = limit ? limit : GMM_GMRF_BAND_LIMIT;
    if ((double)(bw + 1) * (double)n * sizeof(double) > (double)lim)
        return gmm_error(GMM_ENOMEM, "'%s': the graph's band (%zu nodes, bandwidth %zu) needs "
                                     "%.0f MB",
                         c->name, n, bw, (double)(bw + 1) * (double)n * 8.0 / 1e6);
    gmm_band *L = gmm_band_alloc(n, bw, 0, GMM_BAND_SYMMETRIC);
    gmm_band *S = gmm_band_alloc(n, bw, 0, GMM_BAND_SYMMETRIC);
    double *pw = gmm_malloc(2 * (n ? n : 1), sizeof *pw), *pd = pw ? pw + n : NULL;
    if (!L || !S || !pw) {
        st = gmm_error(GMM_ENOMEM, "out of memory scaling '%s'", c->name);
        goto done;
    }
    /* R^: the Laplacian with each component's first node (and each island)
     * pinned; rhs 1 on the other nodes */
    for (size_t v = 0; v < n; v++) {
        size_t rv = iperm[v];
        int pin = pinned(P, v);
        pw[rv] = pin ? 0.0 : 1.0;
        *gmm_band_ptr(L, rv, rv) = pin ? 1.0 : (double)(g->ptr[v + 1] - g->ptr[v]);
        for (size_t p = g->ptr[v]; p < g->ptr[v + 1] && !pin; p++) {
            size_t u = g->adj[p], ru = iperm[u];
            if (u < v || pinned(P, u))
                continue;
            *gmm_band_ptr(L, ru > rv ? ru : rv, ru > rv ? rv : ru) = -1.0;
        }
    }
    if ((st = gmm_band_chol_decomp(L, L)) || (st = gmm_band_chol_selinv(L, S)) ||
        (st = gmm_band_tri_solve_vec(L, GMM_NOTRANS, pw)) ||
        (st = gmm_band_tri_solve_vec(L, GMM_TRANS, pw)))
        goto done;
    *ld = gmm_band_chol_logdet(L);
    gmm_band_diag(S, pd);
    for (size_t v = 0; v < n; v++) {
        dg[v] = pd[iperm[v]];
        w[v] = pw[iperm[v]];
    }
done:
    gmm_band_free(L);
    gmm_band_free(S);
    gmm_free(pw);
    return st;
}

/* Sparse route: the same dg, w and *ld from R^'s sparse factor.  R^ is
 * made in the RCM order (perm, iperm) that the stack gives a lone
 * component, with the pinned rows' edges kept as zeros: the pattern of
 * such a model's Q and posterior precision, whose analysis (factor.h's
 * memo) is then this one's. */
static gmm_status scale_sparse(stack_comp *c, const gmm_graph *g, const pins *P,
                               const size_t *perm, const size_t *iperm, double *dg, double *w,
                               double *ld)
{
    gmm_status st;
    size_t n = g->n, m = 0;
    gmm_sparse *R = NULL, *S = NULL;
    gmm_factor *f = NULL;
    size_t *ei = gmm_malloc(2 * (g->nedge ? g->nedge : 1), sizeof *ei);
    if (!ei)
        return gmm_error(GMM_ENOMEM, "out of memory scaling '%s'", c->name);
    size_t *ej = ei + (g->nedge ? g->nedge : 1);
    for (size_t v = 0; v < n; v++)
        for (size_t p = g->ptr[v]; p < g->ptr[v + 1]; p++)
            if (g->adj[p] > v) {
                ei[m] = iperm[g->adj[p]];
                ej[m++] = iperm[v];
            }
    if ((st = gmm_sparse_from_entries(n, m, ei, ej, &R)))
        goto done;
    for (size_t v = 0; v < n; v++) { /* the diagonal first in each column */
        size_t j = iperm[v];
        R->val[R->colptr[j]] = pinned(P, v) ? 1.0 : (double)(g->ptr[v + 1] - g->ptr[v]);
        for (size_t k = R->colptr[j] + 1; k < R->colptr[j + 1]; k++)
            R->val[k] = pinned(P, v) || pinned(P, perm[R->rowind[k]]) ? 0.0 : -1.0;
        dg[j] = pinned(P, v) ? 0.0 : 1.0; /* the right-hand side, RCM order */
    }
    if (!(f = gmm_factor_sparse_alloc(R)) || !(S = gmm_sparse_alloc_like(R))) {
        st = f ? gmm_error(GMM_ENOMEM, "out of memory scaling '%s'", c->name) : GMM_ENOMEM;
        goto done;
    }
    if ((st = gmm_factor_decomp_sparse(f, R)) || (st = gmm_factor_selinv_sparse(f, S)) ||
        (st = gmm_factor_solve(f, dg)))
        goto done;
    for (size_t v = 0; v < n; v++)
        w[v] = dg[iperm[v]];
    for (size_t v = 0; v < n; v++)
        dg[v] = S->val[S->colptr[iperm[v]]];
    *ld = gmm_factor_logdet(f);
done:
    gmm_sparse_free(R);
    gmm_sparse_free(S);
    gmm_factor_free(f);
    gmm_free(ei);
    return st;
}

gmm_status stack_besag_scale(stack_comp *c, const gmm_graph *g, const size_t *comp,
                             size_t ncomp, size_t limit, int route)
{
    gmm_status st;
    size_t n = g->n;
    size_t *perm = gmm_malloc(2 * (n ? n : 1), sizeof *perm), *iperm = perm ? perm + n : NULL;
    size_t *first = gmm_malloc(2 * (ncomp ? ncomp : 1), sizeof *first);
    double *w = gmm_malloc(3 * n + ncomp + 1, sizeof *w), *dg = w ? w + n : NULL;
    double *lsum = w ? dg + n : NULL, *wsum = w ? lsum + n : NULL;
    if (!perm || !first || !w) {
        st = gmm_error(GMM_ENOMEM, "out of memory scaling '%s'", c->name);
        goto done;
    }
    pins P = {.n = n, .comp = comp, .first = first, .size = first + ncomp};
    for (size_t k = 0; k < ncomp; k++) {
        first[k] = SIZE_MAX;
        P.size[k] = 0;
        wsum[k] = 0.0;
    }
    for (size_t v = 0; v < n; v++) {
        if (first[comp[v]] == SIZE_MAX)
            first[comp[v]] = v;
        P.size[comp[v]]++;
    }
    if ((st = gmm_graph_rcm(g, perm, iperm)))
        goto done;
    size_t bw = gmm_graph_bandwidth(g, iperm);
    int sparse = route ? route > 0 : bw > STACK_SCALE_BAND_MAX;
    double ldr = NAN;
    c->ldpin = NAN;
    if ((st = sparse ? scale_sparse(c, g, &P, perm, iperm, dg, w, &ldr)
                     : scale_band(c, g, &P, iperm, bw, limit, dg, w, &ldr)))
        goto done;
    for (size_t v = 0; v < n; v++)
        wsum[comp[v]] += w[v];
    for (size_t k = 0; k < ncomp; k++)
        lsum[k] = 0.0;
    for (size_t v = 0; v < n; v++) {
        size_t k = comp[v];
        if (P.size[k] < 2)
            continue;
        double m = (double)P.size[k];
        double sz = first[k] == v ? 0.0 : dg[v];
        double var = sz - 2.0 * w[v] / m + wsum[k] / (m * m);
        lsum[k] += log(var);
        c->mvar[v] = var;
    }
    for (size_t v = 0; v < n; v++) {
        size_t k = comp[v];
        c->scale[v] = P.size[k] < 2 ? 1.0 : exp(lsum[k] / (double)P.size[k]);
        c->mvar[v] = P.size[k] < 2 ? 1.0 : c->mvar[v] / c->scale[v];
    }
    /* the component's structure pinned at the same nodes is R^ with each
     * connected component of m >= 2 nodes multiplied by its scale, its
     * pinned diagonal left at 1 (an island's too): (m - 1) log scale more */
    for (size_t v = 0; v < n; v++)
        if (P.size[comp[v]] >= 2 && !pinned(&P, v))
            ldr += log(c->scale[v]);
    c->ldpin = ldr;
done:
    gmm_free(perm);
    gmm_free(first);
    gmm_free(w);
    return st;
}
