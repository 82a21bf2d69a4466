/* gmrf.c -- graph precisions: the spec walk and the symbolic step (RCM,
 * band slots), numeric assembly into the permuted band, its reverse mode.
 *
 * Each family is one row of `families` with an `add` (Q += term) and a `rev`
 * (thetabar += Qbar . dterm/dtheta under band.h's symmetric convention: the
 * stored entry Q(hi, lo) stands for both mirrored entries, so an edge's
 * off-diagonal derivative is taken once, never doubled).
 *
 * edge-ou is positive definite: each edge's 2 x 2 block has eigenvalues
 * (1/(1 -/+ rho) - 1/2) / variance > 0.  Its `variance` scales the whole
 * precision (Q is proportional to 1/variance); it is not the marginal
 * variance of a node, which depends on the node's degree and its
 * neighbourhood (a node of degree k with long edges has precision about
 * k / (2 variance)).
 *
 * edge-ou, per edge of length d, t = d/l, rho = exp(-t), s = 1 - rho^2 =
 * -expm1(-2t) (accurate for short edges, where 1 - rho^2 would cancel):
 *     diagonal   c_d = (1/s - 1/2) / v          (both ends)
 *     off-diag   c_o = -rho / (s v)
 *     dc_d/dv = -c_d / v,  dc_o/dv = -c_o / v
 *     dc_d/dl = 2 t rho^2 / (l s^2 v)           (ds/dl = -2 t rho^2 / l)
 *     dc_o/dl = -t rho (1 + rho^2) / (l s^2 v)  (drho/dl = t rho / l)
 * and 1/v on an isolated node (d/dv = -1/v^2).
 */
#include "gmm/gmrf.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"

#define MAXP 2

/* Where the families read and write Q's stored entries: the permuted band
 * (B), or a list of values (val) with row r's diagonal at pos[r] and edge
 * e's entry at pos[n + e] (gmm_gmrf_assemble_at: the sparse path).  The
 * families do the same arithmetic in the same order on either, so both
 * hold the same numbers. */
typedef struct {
    gmm_band *B;
    double *val;
    const size_t *pos;
    size_t n;
} slots;

static double *diag_at(const slots *t, size_t r)
{
    return t->B ? gmm_band_ptr(t->B, r, r) : t->val + t->pos[r];
}

static double *edge_at(const gmm_gmrf *m, const slots *t, size_t e)
{
    return t->B ? gmm_band_ptr(t->B, m->ehi[e], m->elo[e]) : t->val + t->pos[t->n + e];
}

struct gmm_precision_type {
    const char *name;
    size_t nparam;
    const char *param[MAXP];
    double def[MAXP];
    int zero_ok[MAXP];
    void (*add)(const gmm_gmrf *m, const double *th, const slots *Q);
    void (*rev)(const gmm_gmrf *m, const double *th, const slots *Qbar, double *thbar);
};

/* ---- edge-ou ----------------------------------------------------------------- */

static void edge_ou_add(const gmm_gmrf *m, const double *th, const slots *Q)
{
    double v = th[0], l = th[1];
    for (size_t e = 0; e < m->nedge; e++) {
        double t = m->elen[e] / l, rho = exp(-t), s = -expm1(-2.0 * t);
        double cd = (1.0 / s - 0.5) / v, co = -rho / (s * v);
        *diag_at(Q, m->ehi[e]) += cd;
        *diag_at(Q, m->elo[e]) += cd;
        *edge_at(m, Q, e) += co;
    }
    for (size_t r = 0; r < m->n; r++)
        if (m->deg[r] == 0)
            *diag_at(Q, r) += 1.0 / v;
}

static void edge_ou_rev(const gmm_gmrf *m, const double *th, const slots *Qbar,
                        double *thbar)
{
    double v = th[0], l = th[1], vbar = 0.0, lbar = 0.0;
    for (size_t e = 0; e < m->nedge; e++) {
        size_t hi = m->ehi[e], lo = m->elo[e];
        double t = m->elen[e] / l, rho = exp(-t), s = -expm1(-2.0 * t), q = rho / s;
        double cd = (1.0 / s - 0.5) / v, co = -q / v;
        double gd = *diag_at(Qbar, hi) + *diag_at(Qbar, lo);
        double go = *edge_at(m, Qbar, e);
        vbar -= (gd * cd + go * co) / v;
        lbar += (t / (l * v)) * (2.0 * gd * q * q - go * q * (1.0 + rho * rho) / s);
    }
    for (size_t r = 0; r < m->n; r++)
        if (m->deg[r] == 0)
            vbar -= *diag_at(Qbar, r) / (v * v);
    thbar[0] += vbar;
    thbar[1] += lbar;
}

/* ---- laplacian ----------------------------------------------------------------- */

static void laplacian_add(const gmm_gmrf *m, const double *th, const slots *Q)
{
    double p = th[0], ridge = th[1];
    for (size_t e = 0; e < m->nedge; e++)
        *edge_at(m, Q, e) -= p;
    for (size_t r = 0; r < m->n; r++)
        *diag_at(Q, r) += p * (double)m->deg[r] + ridge;
}

static void laplacian_rev(const gmm_gmrf *m, const double *th, const slots *Qbar,
                          double *thbar)
{
    (void)th;
    double pbar = 0.0, rbar = 0.0;
    for (size_t e = 0; e < m->nedge; e++)
        pbar -= *edge_at(m, Qbar, e);
    for (size_t r = 0; r < m->n; r++) {
        double d = *diag_at(Qbar, r);
        pbar += d * (double)m->deg[r];
        rbar += d;
    }
    thbar[0] += pbar;
    thbar[1] += rbar;
}

/* ---- iid --------------------------------------------------------------------- */

/* One N(0, variance) effect per node, whatever the edges: the random
 * intercept of a grouping column (its levels as nodes of an edgeless
 * graph, lme4's (1 | g)). */
static void iid_add(const gmm_gmrf *m, const double *th, const slots *Q)
{
    for (size_t r = 0; r < m->n; r++)
        *diag_at(Q, r) += 1.0 / th[0];
}

static void iid_rev(const gmm_gmrf *m, const double *th, const slots *Qbar, double *thbar)
{
    double d = 0.0;
    for (size_t r = 0; r < m->n; r++)
        d += *diag_at(Qbar, r);
    thbar[0] -= d / (th[0] * th[0]);
}

static const gmm_precision_type families[] = {
    {"edge-ou", 2, {"variance", "lengthscale"}, {1.0, 1.0}, {0, 0}, edge_ou_add, edge_ou_rev},
    {"laplacian", 2, {"precision", "ridge"}, {1.0, 1.0}, {0, 1}, laplacian_add, laplacian_rev},
    {"iid", 1, {"variance", NULL}, {1.0, 0.0}, {0, 0}, iid_add, iid_rev},
};
#define NFAMILY (sizeof families / sizeof families[0])

const char *gmm_gmrf_family_at(size_t i) { return i < NFAMILY ? families[i].name : NULL; }
const char *gmm_gmrf_term_family(const gmm_gmrf *m, size_t t)
{
    return m && t < m->nterm ? m->term[t]->name : NULL;
}

/* ---- spec walk ------------------------------------------------------------------ */

/* Offset of the '*' before a product's second factor: scan back from that
 * factor over blanks and '(' (the parser records node starts, not
 * operators). */
static size_t star_pos(const gmm_spec_node *prod, const char *text)
{
    if (!text || prod->nchild < 2)
        return prod->pos;
    size_t p = prod->child[1]->pos, len = strlen(text);
    if (p > len)
        return prod->pos;
    while (p > 0) {
        p--;
        if (text[p] == '*')
            return p;
        if (text[p] != ' ' && text[p] != '\t' && text[p] != '(' && text[p] != '\n')
            break;
    }
    return prod->pos;
}

/* Count leaves and reject products (error at the '*'). */
static gmm_status count_terms(const gmm_spec_node *node, const char *text, size_t *nterm)
{
    switch (node->type) {
    case GMM_SPEC_FACTOR:
        (*nterm)++;
        return GMM_OK;
    case GMM_SPEC_PRODUCT: {
        size_t p = star_pos(node, text);
        return gmm_error_at(GMM_EPARSE, p,
                            "precision: products are not defined for precisions (the '*' at "
                            "%zu); add precisions with '+'",
                            p);
    }
    case GMM_SPEC_SUM:
        for (size_t c = 0; c < node->nchild; c++) {
            gmm_status st = count_terms(node->child[c], text, nterm);
            if (st != GMM_OK)
                return st;
        }
        return GMM_OK;
    }
    return gmm_error(GMM_EINVAL, "precision: malformed spec tree");
}

static const gmm_precision_type *find_family(const char *name)
{
    for (size_t f = 0; f < NFAMILY; f++)
        if (!strcmp(families[f].name, name))
            return &families[f];
    return NULL;
}

/* Fill term t from leaf `node` (parameters at m->term_off[t]). */
static gmm_status fill_term(gmm_gmrf *m, size_t t, const gmm_spec_node *node)
{
    const gmm_precision_type *T = find_family(node->name);
    if (!T) {
        char known[256];
        size_t at = 0;
        for (size_t f = 0; f < NFAMILY && at < sizeof known; f++)
            at += (size_t)snprintf(known + at, sizeof known - at, "%s%s", f ? ", " : "",
                                   families[f].name);
        return gmm_error_at(GMM_EPARSE, node->pos,
                            "precision: unknown precision '%s' at %zu (known: %s)", node->name,
                            node->pos, known);
    }
    m->term[t] = T;
    size_t off = m->nparam;
    m->term_off[t] = off;
    m->nparam += T->nparam; /* before the names, so a failure frees them */
    int given[MAXP] = {0};
    for (size_t k = 0; k < T->nparam; k++)
        m->param_value[off + k] = T->def[k];
    for (size_t a = 0; a < node->narg; a++) {
        const gmm_spec_arg *arg = &node->arg[a];
        size_t k = 0;
        while (k < T->nparam && strcmp(T->param[k], arg->key))
            k++;
        if (k == T->nparam)
            return gmm_error_at(GMM_EPARSE, arg->pos,
                                "precision: %s has no parameter '%s' (parameters: %s%s%s)",
                                T->name, arg->key, T->param[0], T->nparam > 1 ? ", " : "",
                                T->nparam > 1 ? T->param[1] : "");
        if (given[k])
            return gmm_error_at(GMM_EPARSE, arg->pos, "precision: %s: '%s' given twice",
                                T->name, arg->key);
        given[k] = 1;
        double x = arg->value;
        if (!isfinite(x) || (T->zero_ok[k] ? !(x >= 0.0) : !(x > 0.0)))
            return gmm_error_at(GMM_EPARSE, arg->pos, "precision: %s: %s = %g must be %s",
                                T->name, arg->key, x, T->zero_ok[k] ? ">= 0" : "> 0");
        m->param_value[off + k] = x;
    }
    for (size_t k = 0; k < T->nparam; k++) {
        int len = snprintf(NULL, 0, "%zu.%s.%s", node->index, T->name, T->param[k]);
        char *name = gmm_malloc((size_t)len + 1, 1);
        if (!name)
            return gmm_error(GMM_ENOMEM, "precision: out of memory");
        snprintf(name, (size_t)len + 1, "%zu.%s.%s", node->index, T->name, T->param[k]);
        m->param_name[off + k] = name;
        m->param_zero_ok[off + k] = T->zero_ok[k];
    }
    return GMM_OK;
}

static gmm_status fill_terms(gmm_gmrf *m, const gmm_spec_node *node, size_t *t)
{
    if (node->type == GMM_SPEC_FACTOR)
        return fill_term(m, (*t)++, node);
    for (size_t c = 0; c < node->nchild; c++) {
        gmm_status st = fill_terms(m, node->child[c], t);
        if (st != GMM_OK)
            return st;
    }
    return GMM_OK;
}

/* ---- symbolic step ------------------------------------------------------------- */

/* Permuted edges sorted by (lo, hi): two stable counting sorts. */
static gmm_status permute_edges(gmm_gmrf *m, const gmm_graph *g)
{
    size_t n = m->n, ne = g->nedge;
    size_t *cnt = gmm_calloc(n + 1, sizeof *cnt);
    size_t *thi = gmm_malloc(ne, sizeof *thi), *tlo = gmm_malloc(ne, sizeof *tlo);
    double *tlen = gmm_malloc(ne, sizeof *tlen);
    gmm_status st = GMM_OK;
    if (!cnt || !thi || !tlo || !tlen) {
        st = GMM_ENOMEM;
        goto done;
    }
    /* Pass 1: by hi into t*. */
    for (size_t u = 0; u < g->n; u++)
        for (size_t p = g->ptr[u]; p < g->ptr[u + 1]; p++)
            if (g->adj[p] > u) {
                size_t a = m->iperm[u], b = m->iperm[g->adj[p]];
                cnt[(a > b ? a : b) + 1]++;
            }
    for (size_t r = 0; r < n; r++)
        cnt[r + 1] += cnt[r];
    for (size_t u = 0; u < g->n; u++)
        for (size_t p = g->ptr[u]; p < g->ptr[u + 1]; p++)
            if (g->adj[p] > u) {
                size_t a = m->iperm[u], b = m->iperm[g->adj[p]];
                size_t k = cnt[a > b ? a : b]++;
                thi[k] = a > b ? a : b;
                tlo[k] = a > b ? b : a;
                tlen[k] = g->len[p];
            }
    /* Pass 2: stable by lo into m->e*. */
    memset(cnt, 0, (n + 1) * sizeof *cnt);
    for (size_t k = 0; k < ne; k++)
        cnt[tlo[k] + 1]++;
    for (size_t r = 0; r < n; r++)
        cnt[r + 1] += cnt[r];
    for (size_t k = 0; k < ne; k++) {
        size_t e = cnt[tlo[k]]++;
        m->ehi[e] = thi[k];
        m->elo[e] = tlo[k];
        m->elen[e] = tlen[k];
    }
done:
    gmm_free(cnt);
    gmm_free(thi);
    gmm_free(tlo);
    gmm_free(tlen);
    return st;
}

gmm_status gmm_gmrf_alloc(const gmm_graph *g, const gmm_spec_node *spec, const char *text,
                          gmm_gmrf **out)
{
    if (!g || !spec || !out)
        return gmm_error(GMM_EINVAL, "precision: NULL argument to gmm_gmrf_alloc");
    *out = NULL;
    if (g->n == 0)
        return gmm_error(GMM_EINVAL, "precision: the graph has no nodes");
    size_t nterm = 0;
    gmm_status st = count_terms(spec, text, &nterm);
    if (st != GMM_OK)
        return st;

    gmm_gmrf *m = gmm_calloc(1, sizeof *m);
    if (!m)
        return gmm_error(GMM_ENOMEM, "precision: out of memory");
    size_t n = g->n, ne = g->nedge;
    m->n = n;
    m->nedge = ne;
    m->nterm = nterm;
    size_t cap = nterm * MAXP; /* m->nparam counts up to the real total */
    m->perm = gmm_malloc(n, sizeof *m->perm);
    m->iperm = gmm_malloc(n, sizeof *m->iperm);
    m->ehi = gmm_malloc(ne, sizeof *m->ehi);
    m->elo = gmm_malloc(ne, sizeof *m->elo);
    m->elen = gmm_malloc(ne, sizeof *m->elen);
    m->deg = gmm_malloc(n, sizeof *m->deg);
    m->term = gmm_calloc(nterm, sizeof *m->term);
    m->term_off = gmm_calloc(nterm, sizeof *m->term_off);
    m->param_name = gmm_calloc(cap, sizeof *m->param_name);
    m->param_value = gmm_calloc(cap, sizeof *m->param_value);
    m->param_zero_ok = gmm_calloc(cap, sizeof *m->param_zero_ok);
    if (!m->perm || !m->iperm || !m->ehi || !m->elo || !m->elen || !m->deg || !m->term ||
        !m->term_off || !m->param_name || !m->param_value || !m->param_zero_ok) {
        st = gmm_error(GMM_ENOMEM, "precision: out of memory (n = %zu, %zu edges)", n, ne);
        goto fail;
    }
    size_t t = 0;
    if ((st = fill_terms(m, spec, &t)) != GMM_OK)
        goto fail;

    if ((st = gmm_graph_rcm(g, m->perm, m->iperm)) != GMM_OK)
        goto fail;
    m->bw = gmm_graph_bandwidth(g, m->iperm);
    m->bw_before = gmm_graph_bandwidth(g, NULL);
    for (size_t r = 0; r < n; r++)
        m->deg[r] = g->ptr[m->perm[r] + 1] - g->ptr[m->perm[r]];
    if (permute_edges(m, g) != GMM_OK) {
        st = gmm_error(GMM_ENOMEM, "precision: out of memory (n = %zu, %zu edges)", n, ne);
        goto fail;
    }
    *out = m;
    return GMM_OK;

fail:
    gmm_gmrf_free(m);
    return st;
}

void gmm_gmrf_free(gmm_gmrf *m)
{
    if (!m)
        return;
    gmm_free(m->perm);
    gmm_free(m->iperm);
    gmm_free(m->ehi);
    gmm_free(m->elo);
    gmm_free(m->elen);
    gmm_free(m->deg);
    gmm_free(m->term);
    gmm_free(m->term_off);
    if (m->param_name)
        for (size_t k = 0; k < m->nparam; k++)
            gmm_free(m->param_name[k]);
    gmm_free(m->param_name);
    gmm_free(m->param_value);
    gmm_free(m->param_zero_ok);
    gmm_free(m);
}

gmm_status gmm_gmrf_param_find(const gmm_gmrf *m, const char *name, size_t *k)
{
    for (size_t j = 0; j < m->nparam; j++)
        if (!strcmp(m->param_name[j], name)) {
            *k = j;
            return GMM_OK;
        }
    return gmm_error(GMM_EINVAL, "precision: no parameter '%s'", name);
}

gmm_status gmm_gmrf_theta_check(const gmm_gmrf *m, const double *theta)
{
    for (size_t k = 0; k < m->nparam; k++) {
        double x = theta[k];
        if (!isfinite(x) || (m->param_zero_ok[k] ? !(x >= 0.0) : !(x > 0.0)))
            return gmm_error(GMM_EDOM, "precision parameter %s = %g must be %s",
                             m->param_name[k], x, m->param_zero_ok[k] ? ">= 0" : "> 0");
    }
    /* A term whose zero-allowed parameter (a laplacian's ridge) is 0 is only
     * semi-definite (D - A annihilates constants on each component); the
     * sum is definite only if some other term is.  Without that check the
     * Cholesky succeeds on rounding noise and the likelihood is noise. */
    int definite = 0;
    for (size_t t = 0; t < m->nterm && !definite; t++) {
        size_t end = t + 1 < m->nterm ? m->term_off[t + 1] : m->nparam;
        int singular = 0;
        for (size_t k = m->term_off[t]; k < end; k++)
            singular |= m->param_zero_ok[k] && theta[k] == 0.0;
        definite = !singular;
    }
    if (m->nterm && !definite)
        return gmm_error(GMM_EDOM, "the precision is singular: a laplacian with ridge 0 needs "
                                   "a ridge > 0 or another term such as edge-ou");
    return GMM_OK;
}

/* ---- memory ---------------------------------------------------------------------- */

size_t gmm_gmrf_band_bytes(const gmm_gmrf *m)
{
    size_t w = m->bw + 1;
    if (m->n && w > SIZE_MAX / sizeof(double) / m->n)
        return SIZE_MAX;
    return w * m->n * sizeof(double);
}

static void human_bytes(double b, char *buf, size_t size)
{
    const char *unit[] = {"bytes", "kB", "MB", "GB", "TB", "PB"};
    size_t u = 0;
    while (b >= 1000.0 && u + 1 < sizeof unit / sizeof unit[0]) {
        b /= 1000.0;
        u++;
    }
    snprintf(buf, size, u ? "%.3g %s" : "%.0f %s", b, unit[u]);
}

gmm_status gmm_gmrf_band_check(const gmm_gmrf *m, size_t limit)
{
    if (!limit)
        limit = GMM_GMRF_BAND_LIMIT;
    size_t bytes = gmm_gmrf_band_bytes(m);
    if (bytes <= limit)
        return GMM_OK;
    char need[32], lim[32];
    /* (bw + 1) n 8 in floating point: exact enough, and no overflow. */
    human_bytes((double)(m->bw + 1) * (double)m->n * 8.0, need, sizeof need);
    human_bytes((double)limit, lim, sizeof lim);
    return gmm_error(GMM_ENOMEM,
                     "the band of the graph precision would need %s (n = %zu nodes, bandwidth "
                     "%zu after reordering: (bandwidth + 1) x n x 8 bytes), over the limit of "
                     "%s per band",
                     need, m->n, m->bw, lim);
}

gmm_band *gmm_gmrf_band_alloc(const gmm_gmrf *m, size_t limit)
{
    if (gmm_gmrf_band_check(m, limit) != GMM_OK)
        return NULL;
    gmm_band *Q = gmm_band_alloc(m->n, m->bw, 0, GMM_BAND_SYMMETRIC);
    if (!Q) {
        char need[32];
        human_bytes((double)gmm_gmrf_band_bytes(m), need, sizeof need);
        gmm_error(GMM_ENOMEM,
                  "out of memory allocating the band of the graph precision: %s (n = %zu "
                  "nodes, bandwidth %zu)",
                  need, m->n, m->bw);
    }
    return Q;
}

void gmm_gmrf_describe(const gmm_gmrf *m, char *buf, size_t size)
{
    char b[32];
    human_bytes((double)(m->bw + 1) * (double)m->n * 8.0, b, sizeof b);
    snprintf(buf, size,
             "n = %zu nodes, %zu edges, bandwidth %zu (%zu before reordering), band of Q: %s",
             m->n, m->nedge, m->bw, m->bw_before, b);
}

/* ---- numeric step --------------------------------------------------------------- */

static gmm_status check_band(const gmm_gmrf *m, const gmm_band *B, const char *what, int exact)
{
    if (!B || B->kind != GMM_BAND_SYMMETRIC || B->n != m->n ||
        (exact ? B->kl != m->bw : B->kl < m->bw))
        return gmm_error(GMM_EDIM,
                         "precision: %s must be SYMMETRIC %zu x %zu with kl %s %zu (got n = %zu, "
                         "kl = %zu)",
                         what, m->n, m->n, exact ? "==" : ">=", m->bw, B ? B->n : 0,
                         B ? B->kl : 0);
    return GMM_OK;
}

gmm_status gmm_gmrf_assemble(const gmm_gmrf *m, const double *theta, gmm_band *Q)
{
    gmm_status st = check_band(m, Q, "Q", 1);
    if (st != GMM_OK)
        return st;
    if ((st = gmm_gmrf_theta_check(m, theta)) != GMM_OK)
        return st;
    gmm_band_set_zero(Q);
    slots at = {.B = Q};
    for (size_t t = 0; t < m->nterm; t++)
        m->term[t]->add(m, theta + m->term_off[t], &at);
    return GMM_OK;
}

gmm_status gmm_gmrf_assemble_at(const gmm_gmrf *m, const double *theta, const size_t *pos,
                                double *val)
{
    if (!m || !theta || !pos || !val)
        return gmm_error(GMM_EINVAL, "gmm_gmrf_assemble_at: NULL argument");
    gmm_status st = gmm_gmrf_theta_check(m, theta);
    if (st != GMM_OK)
        return st;
    slots at = {.val = val, .pos = pos, .n = m->n};
    for (size_t t = 0; t < m->nterm; t++)
        m->term[t]->add(m, theta + m->term_off[t], &at);
    return GMM_OK;
}

gmm_status gmm_gmrf_assemble_at_rev(const gmm_gmrf *m, const double *theta, const size_t *pos,
                                    const double *valbar, double *thetabar)
{
    if (!m || !theta || !pos || !valbar || !thetabar)
        return gmm_error(GMM_EINVAL, "gmm_gmrf_assemble_at_rev: NULL argument");
    gmm_status st = gmm_gmrf_theta_check(m, theta);
    if (st != GMM_OK)
        return st;
    slots at = {.val = (double *)valbar, .pos = pos, .n = m->n}; /* read only */
    for (size_t t = 0; t < m->nterm; t++)
        m->term[t]->rev(m, theta + m->term_off[t], &at, thetabar + m->term_off[t]);
    return GMM_OK;
}

gmm_status gmm_gmrf_assemble_rev(const gmm_gmrf *m, const double *theta, const gmm_band *Qbar,
                                 double *thetabar)
{
    gmm_status st = check_band(m, Qbar, "Qbar", 0);
    if (st != GMM_OK)
        return st;
    if ((st = gmm_gmrf_theta_check(m, theta)) != GMM_OK)
        return st;
    slots at = {.B = (gmm_band *)Qbar}; /* read only */
    for (size_t t = 0; t < m->nterm; t++)
        m->term[t]->rev(m, theta + m->term_off[t], &at, thetabar + m->term_off[t]);
    return GMM_OK;
}

/* ---- observations ----------------------------------------------------------------- */

static const double unit_coef = 1.0;

gmm_status gmm_gmrf_obs_alloc(const gmm_gmrf *m, size_t nrow, const size_t *node,
                              const double *y, gmm_gmrf_obs **out)
{
    if (!m || !out || (nrow && (!node || !y)))
        return gmm_error(GMM_EINVAL, "precision: NULL argument to gmm_gmrf_obs_alloc");
    *out = NULL;
    size_t nobs = 0;
    for (size_t r = 0; r < nrow; r++) {
        if (node[r] >= m->n)
            return gmm_error(GMM_EINVAL, "data row %zu: node %zu out of range (n = %zu)", r,
                             node[r], m->n);
        if (isinf(y[r]))
            return gmm_error(GMM_EINVAL, "data row %zu: outcome is infinite", r);
        if (!isnan(y[r]))
            nobs++;
    }
    gmm_gmrf_obs *o = gmm_calloc(1, sizeof *o);
    if (!o)
        return gmm_error(GMM_ENOMEM, "precision: out of memory");
    o->offset = gmm_malloc(nobs, sizeof *o->offset);
    o->y = gmm_malloc(nobs, sizeof *o->y);
    o->row = gmm_malloc(nobs, sizeof *o->row);
    if (!o->offset || !o->y || !o->row) {
        gmm_gmrf_obs_free(o);
        return gmm_error(GMM_ENOMEM, "precision: out of memory (%zu observations)", nobs);
    }
    size_t k = 0;
    for (size_t r = 0; r < nrow; r++)
        if (!isnan(y[r])) {
            o->offset[k] = m->iperm[node[r]];
            o->y[k] = y[r];
            o->row[k++] = r;
        }
    o->obs.n = m->n;
    o->obs.nobs = nobs;
    o->obs.width = 1;
    o->obs.offset = o->offset;
    o->obs.coef = &unit_coef;
    o->obs.coef_stride = 0;
    o->obs.y = o->y;
    *out = o;
    return GMM_OK;
}

void gmm_gmrf_obs_free(gmm_gmrf_obs *o)
{
    if (!o)
        return;
    gmm_free(o->offset);
    gmm_free(o->y);
    gmm_free(o->row);
    gmm_free(o);
}
