/* stack_comp.c -- the structure of each component of a stacked latent
 * (stack.h): its slots, constraints and the coefficients of its groups.
 *
 * GROUPS.  IID, RW1, RW2, BESAG: Q = M_0 / variance.  BYM2 over (b, u):
 * M_0 = I on b, M_1 = I on (u_v, b_v), M_2 = R* on u, M_3 = I on u, with
 * c = (1 / (s (1 - phi)), -sqrt(phi / s) / (1 - phi), 1, phi / (1 - phi)).
 *
 * SCALING (BESAG, BYM2; Sorbye & Rue 2014): stack_scale.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "stack_impl.h"

void stack_comp_free(stack_comp *c)
{
    if (!c)
        return;
    gmm_free(c->name);
    gmm_free(c->pname[0]);
    gmm_free(c->pname[1]);
    for (size_t i = 0; c->gname && i < c->npar; i++)
        gmm_free(c->gname[i]);
    gmm_free(c->gname);
    gmm_free(c->gstart);
    gmm_free(c->zrow);
    gmm_free(c->row_loc);
    gmm_free(c->slot_row);
    gmm_free(c->slot_col);
    gmm_free(c->slot_group);
    gmm_free(c->joint_row);
    gmm_free(c->joint_col);
    gmm_free(c->own_row);
    gmm_free(c->own_col);
    gmm_free(c->slot_value);
    gmm_free(c->con_start);
    gmm_free(c->con_latent);
    gmm_free(c->con_pin);
    gmm_free(c->con_value);
    gmm_free(c->null_start);
    gmm_free(c->null_latent);
    gmm_free(c->null_value);
    gmm_free(c->null_is_b);
    gmm_free(c->val);
    gmm_free(c->scale);
    gmm_free(c->mvar);
    gmm_band_free(c->gQ);
    gmm_band_free(c->gQbar);
    gmm_free(c->hidx);
    gmm_free(c->hval);
    gmm_ssm_free(c->ssm);
    gmm_free(c->lvl_off);
    gmm_kernel_work_free(c->kw);
    gmm_free(c->kscr);
    memset(c, 0, sizeof *c);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The sorted distinct values of the rows and each row's rank among them;
 * values within c->merge_tol of their group's first are that first's (the
 * grouping of ssm.c's states, so that a KERNEL's levels are its states). */
static gmm_status distinct_values(stack_comp *c, const double *value, size_t nrows,
                                  size_t *rank)
{
    for (size_t r = 0; r < nrows; r++)
        if (!isfinite(value[r]))
            return gmm_error_at(GMM_EINVAL, r, "row %zu: '%s' index value %g is not finite", r,
                                c->name, value[r]);
    c->val = gmm_malloc(nrows ? nrows : 1, sizeof *c->val);
    if (!c->val)
        return gmm_error(GMM_ENOMEM, "out of memory for the values of '%s'", c->name);
    memcpy(c->val, value, nrows * sizeof *value);
    qsort(c->val, nrows, sizeof *c->val, cmp_double);
    size_t m = 0;
    for (size_t r = 0; r < nrows; r++)
        if (m == 0 || c->val[r] > c->val[m - 1] + c->merge_tol)
            c->val[m++] = c->val[r];
    c->m = m;
    for (size_t r = 0; r < nrows; r++) { /* the last group's first <= value[r] */
        size_t j = stack_lower_bound(c->val, m, value[r]);
        rank[r] = j < m && c->val[j] == value[r] ? j : j - 1;
    }
    return GMM_OK;
}

double stack_wrap(double t0, double period, double t)
{
    double r = fmod(t - t0, period);
    return t0 + (r < 0.0 ? r + period : r);
}

/* Cyclic with an explicit period: the values reduced onto [t_min, t_min +
 * period) (latent_stack.c, COMPONENTS) into *out (nrows, the caller
 * frees). */
static gmm_status wrap_values(stack_comp *c, const double *value, size_t nrows, double period,
                              double **out)
{
    *out = NULL;
    if (!isfinite(period) || !(period > 0.0))
        return gmm_error(GMM_EINVAL, "'%s': cyclic period %g must be positive and finite",
                         c->name, period);
    double lo = INFINITY;
    for (size_t r = 0; r < nrows; r++) {
        if (!isfinite(value[r]))
            return gmm_error_at(GMM_EINVAL, r, "row %zu: '%s' index value %g is not finite", r,
                                c->name, value[r]);
        lo = value[r] < lo ? value[r] : lo;
    }
    double *w = gmm_malloc(nrows ? nrows : 1, sizeof *w);
    if (!w)
        return gmm_error(GMM_ENOMEM, "out of memory for the values of '%s'", c->name);
    for (size_t r = 0; r < nrows; r++)
        w[r] = stack_wrap(lo, period, value[r]);
    *out = w;
    return GMM_OK;
}

/* The wrap-around distance of a cyclic walk from the last value back to
 * the first (latent_stack.c, COMPONENTS): period - (t_{m-1} - t_0), the
 * period by default range (m / (m - 1)): the wrap one mean spacing long. */
static gmm_status wrap_distance(stack_comp *c, double period, double *d)
{
    size_t m = c->m;
    double range = c->val[m - 1] - c->val[0];
    if (period == 0.0) {
        *d = range / (double)(m - 1);
        c->period = range + *d;
        return GMM_OK;
    }
    if (!(period > range)) /* the reduction rounded onto t_min + period */
        return gmm_error(GMM_EINVAL, "'%s': cyclic period %g: the index values reduced onto "
                                     "one period span %g to %g, a full period",
                         c->name, period, c->val[0], c->val[m - 1]);
    c->period = period;
    *d = period - range;
    return GMM_OK;
}

/* The two-state transition over dt from state a to state b (local pairs
 * (2a, 2a + 1), (2b, 2b + 1)): r = s_b - F s_a = M (x_a, x'_a, x_b, x'_b)',
 * M = [-1 -dt 1 0; 0 -1 0 1], precision K = [12/dt^3 -6/dt^2; . 4/dt]. */
static void rw2_transition(stack_comp *c, size_t a0, size_t b0, double dt)
{
    double K[2][2] = {{12.0 / (dt * dt * dt), -6.0 / (dt * dt)}, {-6.0 / (dt * dt), 4.0 / dt}};
    double M[2][4] = {{-1.0, -dt, 1.0, 0.0}, {0.0, -1.0, 0.0, 1.0}};
    size_t loc[4] = {2 * a0, 2 * a0 + 1, 2 * b0, 2 * b0 + 1};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b <= a; b++) {
            double v = 0.0;
            for (size_t p = 0; p < 2; p++)
                for (size_t q = 0; q < 2; q++)
                    v += M[p][a] * K[p][q] * M[q][b];
            stack_comp_slot(c, loc[a], loc[b], v, 0);
        }
}

static gmm_status build_rw(stack_comp *c, const gmm_stack_term *t, size_t nrows)
{
    gmm_status st;
    int two = t->model == GMM_STACK_RW2, cyc = t->cyclic != 0;
    if (!t->value)
        return gmm_error(GMM_EINVAL, "'%s': a random walk needs the index values", c->name);
    const double *value = t->value;
    double *wv = NULL;
    if (cyc && t->period != 0.0 && (st = wrap_values(c, t->value, nrows, t->period, &wv)))
        return st;
    st = distinct_values(c, wv ? wv : value, nrows, c->row_loc);
    gmm_free(wv);
    if (st)
        return st;
    size_t m = c->m, mmin = two || cyc ? 3 : 2;
    if (m < mmin)
        return gmm_error(GMM_EINVAL, "'%s': %s%s needs at least %zu distinct index values, "
                                     "got %zu",
                         c->name, two ? "rw2" : "rw1", cyc ? " cyclic" : "", mmin, m);
    double dwrap = 0.0;
    if (cyc && (st = wrap_distance(c, t->period, &dwrap)))
        return st;
    c->n = two ? 2 * m : m;
    /* the cyclic walks' null space is the constant alone (x' = b around
     * the circle gives b period = 0) */
    size_t ncon = two && !cyc ? 2 : 1, nint = cyc ? m : m - 1;
    if ((st = stack_comp_arrays(c, two ? 10 * nint : 3 * nint, ncon, ncon * m)))
        return st;
    for (size_t j = 0; j < nint; j++) {
        size_t j1 = j + 1 < m ? j + 1 : 0;
        double dt = j + 1 < m ? c->val[j + 1] - c->val[j] : dwrap;
        if (two) {
            rw2_transition(c, j, j1, dt);
        } else {
            stack_comp_slot(c, j, j, 1.0 / dt, 0);
            stack_comp_slot(c, j1, j1, 1.0 / dt, 0);
            stack_comp_slot(c, j1, j, -1.0 / dt, 0);
        }
    }
    if (two)
        for (size_t r = 0; r < nrows; r++)
            c->row_loc[r] *= 2;
    /* sum x_j = 0 (and sum (t_j - tbar) x_j = 0); N = [1, t - tbar] on x (and
     * [0, 1] on x'), S = {x_0} (and x'_0): det N_S = 1 */
    double tbar = 0.0, tt = 0.0;
    for (size_t j = 0; j < m; j++)
        tbar += c->val[j];
    tbar /= (double)m;
    size_t e = 0;
    c->ncon = ncon;
    for (size_t j = 0; j < m; j++) {
        c->con_latent[e] = two ? 2 * j : j;
        c->con_value[e++] = 1.0;
    }
    c->con_pin[0] = 0;
    c->con_start[1] = e;
    c->ldconst = 2.0 * log((double)m);
    c->ldaa = log((double)m);
    if (ncon == 2) {
        for (size_t j = 0; j < m; j++) {
            double d = c->val[j] - tbar;
            tt += d * d;
            c->con_latent[e] = 2 * j;
            c->con_value[e++] = d;
        }
        c->con_pin[1] = 1;
        c->con_start[2] = e;
        c->ldconst += 2.0 * log(tt);
        c->ldaa += log(tt);
    }
    /* N: 1 on x (and t - tbar on x, 1 on x') */
    e = 0;
    for (size_t j = 0; j < m; j++) {
        c->null_latent[e] = two ? 2 * j : j;
        c->null_value[e++] = 1.0;
    }
    c->null_start[1] = e;
    for (size_t j = 0; j < m && ncon == 2; j++) {
        c->null_latent[e] = 2 * j;
        c->null_value[e++] = c->val[j] - tbar;
        c->null_latent[e] = 2 * j + 1;
        c->null_value[e++] = 1.0;
    }
    if (ncon == 2)
        c->null_start[2] = e;
    return GMM_OK;
}

/* BESAG (u0 = 0, group 0) or BYM2 (u at m + v, R* in group 2). */
static gmm_status build_besag(stack_comp *c, const gmm_stack_term *t, size_t nrows,
                              size_t limit)
{
    gmm_status st;
    const gmm_graph *g = t->graph;
    int bym = t->model == GMM_STACK_BYM2;
    if (!g)
        return gmm_error(GMM_EINVAL, "'%s': %s needs a graph", c->name, bym ? "bym2" : "besag");
    size_t m = g->n, ncomp = 0;
    for (size_t r = 0; r < nrows; r++) {
        if (!t->level || t->level[r] >= m)
            return gmm_error_at(GMM_EINVAL, r, "row %zu: '%s' node out of range (graph of %zu "
                                               "nodes)",
                                r, c->name, m);
        c->row_loc[r] = t->level[r];
    }
    size_t *comp = gmm_malloc(m ? m : 1, sizeof *comp);
    c->scale = gmm_malloc(m ? m : 1, sizeof *c->scale);
    c->mvar = gmm_malloc(m ? m : 1, sizeof *c->mvar);
    if (!comp || !c->scale || !c->mvar) {
        gmm_free(comp);
        return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
    }
    if ((st = gmm_graph_components(g, comp, &ncomp)) ||
        (st = stack_besag_scale(c, g, comp, ncomp, limit, 0)))
        goto done;
    /* constraints: one per component of two or more nodes */
    size_t *first = gmm_malloc(2 * ncomp + 1, sizeof *first), *cnt = first ? first + ncomp : NULL;
    if (!first) {
        st = gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
        goto done;
    }
    for (size_t k = 0; k < ncomp; k++) {
        first[k] = SIZE_MAX;
        cnt[k] = 0;
    }
    for (size_t v = 0; v < m; v++) {
        if (first[comp[v]] == SIZE_MAX)
            first[comp[v]] = v;
        cnt[comp[v]]++;
    }
    size_t ncon = 0, nent = 0;
    for (size_t k = 0; k < ncomp; k++)
        if (cnt[k] >= 2) {
            ncon++;
            nent += cnt[k];
        }
    c->n = bym ? 2 * m : m;
    size_t u0 = bym ? m : 0;
    if ((st = stack_comp_arrays(c, m + g->nedge + (bym ? 3 * m : 0), ncon, nent)))
        goto done_first;
    for (size_t v = 0; v < m; v++) {
        double s = c->scale[v];
        size_t deg = g->ptr[v + 1] - g->ptr[v];
        stack_comp_slot(c, u0 + v, u0 + v, deg ? s * (double)deg : 1.0, bym ? 2 : 0);
        for (size_t p = g->ptr[v]; p < g->ptr[v + 1]; p++)
            if (g->adj[p] < v)
                stack_comp_slot(c, u0 + v, u0 + g->adj[p], -s, bym ? 2 : 0);
        if (bym) {
            stack_comp_slot(c, v, v, 1.0, 0);
            stack_comp_slot(c, u0 + v, v, 1.0, 1);
            stack_comp_slot(c, u0 + v, u0 + v, 1.0, 3);
        }
    }
    /* constraint of component k: the sum of its u is 0, pinned at its
     * first node; N_k its indicator on u (and, for BYM2, sqrt(variance phi)
     * times it on b): A N = m_k, N_S = 1 */
    c->ncon = ncon;
    size_t ci = 0, e = 0;
    for (size_t k = 0; k < ncomp; k++) {
        if (cnt[k] < 2)
            continue;
        c->con_start[ci] = e;
        c->con_pin[ci] = u0 + first[k];
        c->null_start[ci] = 2 * e;
        for (size_t v = first[k]; v < m; v++)
            if (comp[v] == k) {
                c->null_latent[2 * e] = u0 + v;
                c->null_value[2 * e] = 1.0;
                c->null_latent[2 * e + 1] = v; /* BYM2's b; unused for BESAG */
                c->null_value[2 * e + 1] = 1.0;
                c->null_is_b[2 * e + 1] = 1;
                c->con_latent[e] = u0 + v;
                c->con_value[e++] = 1.0;
            }
        c->ldconst += 2.0 * log((double)cnt[k]);
        c->ldaa += log((double)cnt[k]);
        ci++;
    }
    c->con_start[ci] = e;
    c->null_start[ci] = 2 * e;
    /* BESAG: N = A' (drop the b entries) */
    for (size_t i = 0; i < c->null_start[ci] && !bym; i++)
        if (c->null_is_b[i]) {
            c->null_is_b[i] = 0;
            c->null_value[i] = 0.0;
        }
done_first:
    gmm_free(first);
done:
    gmm_free(comp);
    return st;
}

static gmm_status build_graph(stack_comp *c, const gmm_stack_term *t, size_t nrows,
                              size_t limit)
{
    gmm_status st;
    const gmm_gmrf *g = t->gmrf;
    if (!g)
        return gmm_error(GMM_EINVAL, "'%s': a graph precision needs its gmrf", c->name);
    for (size_t r = 0; r < nrows; r++) {
        if (!t->level || t->level[r] >= g->n)
            return gmm_error_at(GMM_EINVAL, r, "row %zu: '%s' node out of range (graph of %zu "
                                               "nodes)",
                                r, c->name, g->n);
        c->row_loc[r] = t->level[r];
    }
    c->n = g->n;
    c->g = g;
    size_t ns = g->n + g->nedge;
    if ((st = stack_comp_arrays(c, ns, 0, 0)))
        return st;
    c->own_row = gmm_malloc(ns ? ns : 1, sizeof *c->own_row);
    c->own_col = gmm_malloc(ns ? ns : 1, sizeof *c->own_col);
    if (!c->own_row || !c->own_col)
        return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
    /* its own band only when the band path first assembles
     * (stack_graph_bands): the sparse path reads the graph's entries */
    if (limit && (st = gmm_gmrf_band_check(g, limit)))
        return st;
    for (size_t r = 0; r < g->n; r++) {
        c->own_row[c->nslot] = c->own_col[c->nslot] = r;
        stack_comp_slot(c, g->perm[r], g->perm[r], 0.0, 0);
    }
    for (size_t e = 0; e < g->nedge; e++) {
        c->own_row[c->nslot] = g->ehi[e];
        c->own_col[c->nslot] = g->elo[e];
        stack_comp_slot(c, g->perm[g->ehi[e]], g->perm[g->elo[e]], 0.0, 0);
    }
    c->npar = g->nparam;
    c->gname = gmm_calloc(c->npar ? c->npar : 1, sizeof *c->gname);
    if (!c->gname)
        return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
    for (size_t i = 0; i < c->npar; i++) {
        size_t len = strlen(c->name) + strlen(g->param_name[i]) + 2;
        if (!(c->gname[i] = gmm_malloc(len, 1)))
            return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
        snprintf(c->gname[i], len, "%s.%s", c->name, g->param_name[i]);
    }
    return GMM_OK;
}

gmm_status stack_graph_bands(stack_comp *c)
{
    if (c->gQ)
        return GMM_OK;
    c->gQ = gmm_gmrf_band_alloc(c->g, 0);
    c->gQbar = c->gQ ? gmm_gmrf_band_alloc(c->g, 0) : NULL;
    return c->gQbar ? GMM_OK : GMM_ENOMEM; /* recorded by gmm_gmrf_band_alloc */
}

/* A stationary GP through its state-space model: the SSM's band as slots
 * (its own slot (own_row, own_col) = local (slot_row, slot_col): the local
 * order is the band's), the rows reading H's nonzero entries at their
 * value's state. */
static gmm_status build_kernel(stack_comp *c, const gmm_stack_term *t, size_t nrows)
{
    gmm_status st;
    if (!t->kernel || !t->value)
        return gmm_error(GMM_EINVAL, "'%s': a kernel term needs its kernel and index values",
                         c->name);
    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    par.merge_tol = c->merge_tol;
    size_t *rank = gmm_malloc(nrows ? nrows : 1, sizeof *rank);
    if (!rank)
        return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
    if ((st = distinct_values(c, t->value, nrows, rank))) {
        gmm_free(rank);
        return st;
    }
    if ((st = gmm_ssm_alloc(t->kernel, t->value, nrows, &par, &c->ssm))) {
        gmm_free(rank);
        return gmm_error(st, "'%s': %s", c->name, gmm_error_message());
    }
    c->kern = t->kernel;
    /* a damped zero-noise factor's precision has entries ~ K / damp_rel:
     * the stack takes the square-root form (stack_sqrt.c); a demodulated
     * one's rows h(t) vary with theta, read over the whole state */
    c->damped = gmm_kernel_damped(t->kernel);
    c->modulated = gmm_ssm_obs_varies(c->ssm);
    size_t d = gmm_ssm_dim(c->ssm), N = gmm_ssm_dimension(c->ssm);
    size_t kl = gmm_ssm_bandwidth(c->ssm), np = gmm_kernel_nparam(t->kernel);
    c->n = N;
    c->d = d;
    c->lvl_off = gmm_malloc(c->m ? c->m : 1, sizeof *c->lvl_off);
    c->hidx = gmm_malloc(d, sizeof *c->hidx);
    c->hval = gmm_malloc(d, sizeof *c->hval);
    double *h = gmm_malloc(nrows * d + 1, sizeof *h);
    c->kw = gmm_kernel_work_alloc(t->kernel);
    c->kscr = gmm_malloc(12 * d * d + 8 * d + 1, sizeof *c->kscr);
    if (!c->lvl_off || !c->hidx || !c->hval || !h || !c->kw || !c->kscr) {
        gmm_free(rank);
        gmm_free(h);
        return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
    }
    if ((st = gmm_ssm_obs_rows(c->ssm, gmm_kernel_values_const(t->kernel), h))) {
        gmm_free(rank);
        gmm_free(h);
        return st;
    }
    c->nread = 0;
    for (size_t p = 0; p < d; p++)
        if (h[p] != 0.0 || c->modulated) {
            c->hidx[c->nread] = p;
            c->hval[c->nread++] = h[p];
        }
    gmm_free(h);
    for (size_t r = 0; r < nrows; r++) {
        c->row_loc[r] = gmm_ssm_row_offset(c->ssm, r);
        c->lvl_off[rank[r]] = c->row_loc[r];
    }
    gmm_free(rank);
    size_t ns = 0;
    for (size_t j = 0; j < N; j++)
        ns += (j < kl ? j : kl) + 1;
    if ((st = stack_comp_arrays(c, ns, 0, 0)))
        return st;
    c->own_row = gmm_malloc(ns ? ns : 1, sizeof *c->own_row);
    c->own_col = gmm_malloc(ns ? ns : 1, sizeof *c->own_col);
    c->gQ = gmm_band_alloc(N, kl, 0, GMM_BAND_SYMMETRIC);
    c->gQbar = c->gQ ? gmm_band_alloc(N, kl, 0, GMM_BAND_SYMMETRIC) : NULL;
    if (!c->own_row || !c->own_col || !c->gQ || !c->gQbar)
        return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
    for (size_t j = 0; j < N; j++)
        for (size_t i = j; i < N && i <= j + kl; i++) {
            c->own_row[c->nslot] = i;
            c->own_col[c->nslot] = j;
            stack_comp_slot(c, i, j, 0.0, 0);
        }
    c->npar = np;
    c->gname = gmm_calloc(np ? np : 1, sizeof *c->gname);
    if (!c->gname)
        return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
    for (size_t i = 0; i < np; i++) {
        const char *pn = gmm_ssm_param_name(c->ssm, i);
        size_t len = strlen(c->name) + strlen(pn) + 2;
        if (!(c->gname[i] = gmm_malloc(len, 1)))
            return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
        snprintf(c->gname[i], len, "%s.%s", c->name, pn);
    }
    return GMM_OK;
}

static char *param_name(const char *prefix, const char *p)
{
    size_t len = strlen(prefix) + strlen(p) + 2;
    char *s = gmm_malloc(len, 1);
    if (s)
        snprintf(s, len, "%s.%s", prefix, p);
    return s;
}

gmm_status stack_comp_common(stack_comp *c, const gmm_stack_term *t, size_t nrows)
{
    c->model = t->model;
    c->name = gmm_strdup(t->name ? t->name : "f");
    c->row_loc = gmm_malloc(nrows ? nrows : 1, sizeof *c->row_loc);
    if (!c->name || !c->row_loc)
        return gmm_error(GMM_ENOMEM, "out of memory for a latent component");
    c->nread = 1;
    c->hidx = gmm_calloc(1, sizeof *c->hidx);
    c->hval = gmm_malloc(1, sizeof *c->hval);
    if (!c->hidx || !c->hval)
        return gmm_error(GMM_ENOMEM, "out of memory for a latent component");
    c->hval[0] = 1.0;
    c->control = GMM_STACK_NO_MODEL;
    c->start[0] = t->variance == 0.0 ? 1.0 : t->variance;
    c->start[1] = t->model == GMM_STACK_AR1 ? (t->rho == 0.0 ? 0.5 : t->rho)
                                            : (t->phi == 0.0 ? 0.5 : t->phi);
    if ((t->rho != 0.0 && t->model != GMM_STACK_AR1) ||
        (t->season != 0 && t->model != GMM_STACK_SEASONAL) ||
        ((t->group || t->replicate) &&
         (t->model == GMM_STACK_GRAPH || t->model == GMM_STACK_KERNEL ||
          t->model == GMM_STACK_CORR)) ||
        (!t->group && t->group_rho != 0.0))
        return gmm_error(GMM_EINVAL, "'%s': rho, season, group or replicate on a model that "
                                     "has none",
                         c->name);
    if (t->model != GMM_STACK_GRAPH && t->model != GMM_STACK_KERNEL && (!isfinite(c->start[0]) || !(c->start[0] > 0.0)))
        return gmm_error(GMM_EINVAL, "'%s': variance %g must be positive and finite", c->name,
                         c->start[0]);
    if (t->model == GMM_STACK_BYM2 && !(c->start[1] > 0.0 && c->start[1] < 1.0))
        return gmm_error(GMM_EINVAL, "'%s': phi %g must be in (0, 1)", c->name, c->start[1]);
    c->cyclic = t->cyclic != 0;
    c->period = NAN;
    int rw = t->model == GMM_STACK_RW1 || t->model == GMM_STACK_RW2;
    if (!rw && c->cyclic)
        return gmm_error(GMM_EINVAL, "'%s': only rw1 and rw2 can be cyclic", c->name);
    if (!c->cyclic && t->period != 0.0)
        return gmm_error(GMM_EINVAL, "'%s': a period (%g) needs a cyclic rw1 or rw2", c->name,
                         t->period);
    if (!(t->merge_tol >= 0.0) || !isfinite(t->merge_tol) ||
        (t->merge_tol != 0.0 && t->model != GMM_STACK_KERNEL))
        return gmm_error(GMM_EINVAL, "'%s': merge_tol %g must be finite and >= 0, on a kernel "
                                     "term",
                         c->name, t->merge_tol);
    c->merge_tol = t->merge_tol;
    return GMM_OK;
}

gmm_status stack_comp_build(stack_comp *c, const gmm_stack_term *t, size_t nrows, size_t limit)
{
    gmm_status st;
    if ((st = stack_comp_common(c, t, nrows)))
        return st;
    switch (t->model) {
    case GMM_STACK_IID:
        for (size_t r = 0; r < nrows; r++) {
            if (!t->level || t->level[r] >= t->nlevel)
                return gmm_error_at(GMM_EINVAL, r, "row %zu: '%s' level out of range (%zu "
                                                   "levels)",
                                    r, c->name, t->nlevel);
            c->row_loc[r] = t->level[r];
        }
        c->n = t->nlevel;
        if ((st = stack_comp_arrays(c, c->n, 0, 0)))
            return st;
        for (size_t v = 0; v < c->n; v++)
            stack_comp_slot(c, v, v, 1.0, 0);
        break;
    case GMM_STACK_RW1:
    case GMM_STACK_RW2:
        if ((st = build_rw(c, t, nrows)))
            return st;
        break;
    case GMM_STACK_BESAG:
    case GMM_STACK_BYM2:
        if ((st = build_besag(c, t, nrows, limit)))
            return st;
        break;
    case GMM_STACK_AR1:
    case GMM_STACK_SEASONAL:
        if ((st = stack_ts_build(c, t, nrows)))
            return st;
        break;
    case GMM_STACK_GRAPH:
        return build_graph(c, t, nrows, limit);
    case GMM_STACK_KERNEL:
        gmm_free(c->hidx);
        gmm_free(c->hval);
        c->hidx = NULL;
        c->hval = NULL;
        return build_kernel(c, t, nrows);
    default:
        return gmm_error(GMM_EINVAL, "'%s': unknown latent model %d", c->name, (int)t->model);
    }
    int ar = t->model == GMM_STACK_AR1;
    c->npar = t->model == GMM_STACK_BYM2 || ar ? 2 : 1;
    c->pname[0] = param_name(c->name, "variance");
    c->pname[1] = c->npar == 2 ? param_name(c->name, ar ? "rho" : "phi") : NULL;
    if (!c->pname[0] || (c->npar == 2 && !c->pname[1]))
        return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
    if (t->group || t->replicate)
        return stack_kron_build(c, t, nrows);
    return GMM_OK;
}



/* The main model's coefficients (a grouped component's before its group
 * structure's, stack_kron_coef). */
static gmm_status main_coef(const stack_comp *c, const double *theta, double *cg, double *dc)
{
    if (c->model == GMM_STACK_AR1 || c->model == GMM_STACK_SEASONAL)
        return stack_ts_coef(c, theta, cg, dc);
    double s = theta[0];
    memset(cg, 0, STACK_NGROUP * sizeof *cg);
    memset(dc, 0, STACK_NPAR * STACK_NGROUP * sizeof *dc);
    if (c->model != GMM_STACK_BYM2) {
        cg[0] = 1.0 / s;
        dc[0] = -1.0 / (s * s);
        return GMM_OK;
    }
    double phi = theta[1];
    if (!(phi > 0.0 && phi < 1.0))
        return gmm_error_at(GMM_EDOM, c->par0 + 1, "%s = %g must be in (0, 1)", c->pname[1],
                            phi);
    double q = 1.0 - phi;
    cg[0] = 1.0 / (s * q);
    dc[0] = -cg[0] / s;
    dc[1] = cg[0] / q;
    cg[1] = -sqrt(phi / s) / q;
    dc[STACK_NPAR] = -0.5 * cg[1] / s;
    dc[STACK_NPAR + 1] = cg[1] * (0.5 / phi + 1.0 / q);
    cg[2] = 1.0;
    cg[3] = phi / q;
    dc[3 * STACK_NPAR + 1] = 1.0 / (q * q);
    return GMM_OK;
}

gmm_status stack_comp_coef(const stack_comp *c, const double *theta, double *cg, double *dc)
{
    gmm_status st = main_coef(c, theta, cg, dc);
    if (st || c->control == GMM_STACK_NO_MODEL)
        return st;
    return stack_kron_coef(c, theta, cg, dc);
}
