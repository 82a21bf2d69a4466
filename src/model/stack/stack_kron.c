/* stack_kron.c -- interactions of the stacked latent (stack.h GROUP,
 * REPLICATE): a built component with precision Q_main (n latents) becomes
 * Q = C (x) Q_main over G groups, latent (g, i) at local g n + i
 * (group-major: the joint order's RCM then keeps a band of about
 * (bandwidth of C + 1) n), C the group structure:
 *
 *   IID   C = I (replicate: independent copies)
 *   RW1   the first differences' precision on positions 0 .. G - 1 (unit
 *         spacing, no variance of its own; null space the constant)
 *   RW2   the second differences' D'D (INLA's rw2 on the index; null space
 *         the lines a + b g)
 *   AR1   the AR(1) precision with unit marginal variance and its own rho,
 *         "<name>.group.rho" (as INLA's control.group ar1)
 *
 * The main model keeps its parameters (the variance scales Q), so x is a
 * matrix-normal field: Cov = C^-1 (x) Q_main^-1.  Coefficients: with
 * Q_main = sum_g c_g M_g and C = sum_h d_h C_h, Q = sum c_g d_h (C_h (x)
 * M_g); a component holds one list of groups, so either the main model or
 * C has a single one (AR1 (x) AR1 and BYM2 (x) AR1 are refused).
 *
 * CONSTRAINTS: those spanning the null space of the product.  C proper
 * (IID, AR1): null(C (x) Q_main) = I (x) null(Q_main): the main model's
 * constraints within each group (a sum-to-zero within each group for an
 * intrinsic main model, INLA's), pinned in each group.  C intrinsic (RW1,
 * RW2) with a proper main model: null(C) (x) I: for each main latent i,
 * sum_g x_(g,i) = 0 (RW1; and sum_g (g - gbar) x_(g,i) = 0, RW2), pinned
 * at groups 0 (and 1).  Both intrinsic: the null space is the sum of the
 * two products, not spanned by per-block constraints; refused. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "stack_impl.h"

/* The group structure C on G positions as slots (a temporary component's
 * slot arrays) and its number of coefficient groups. */
static gmm_status control_slots(stack_comp *k, gmm_stack_model ctrl, size_t G)
{
    gmm_status st;
    size_t need = ctrl == GMM_STACK_RW1 ? 2 : ctrl == GMM_STACK_RW2 ? 3 : ctrl == GMM_STACK_AR1 ? 2 : 1;
    if (G < need)
        return gmm_error(GMM_EINVAL, "'%s': the group structure needs at least %zu groups, got "
                                     "%zu",
                         k->name, need, G);
    if ((st = stack_comp_arrays(k, 6 * G, 0, 0)))
        return st;
    for (size_t g = 0; g < G; g++) {
        if (ctrl == GMM_STACK_IID) {
            stack_comp_slot(k, g, g, 1.0, 0);
        } else if (ctrl == GMM_STACK_AR1) {
            stack_comp_slot(k, g, g, 1.0, 0);
            if (g > 0 && g + 1 < G)
                stack_comp_slot(k, g, g, 1.0, 1);
            if (g > 0)
                stack_comp_slot(k, g, g - 1, 1.0, 2);
        } else if (ctrl == GMM_STACK_RW1 && g + 1 < G) {
            stack_comp_slot(k, g, g, 1.0, 0);
            stack_comp_slot(k, g + 1, g + 1, 1.0, 0);
            stack_comp_slot(k, g + 1, g, -1.0, 0);
        } else if (ctrl == GMM_STACK_RW2 && g + 2 < G) {
            static const double d[3] = {1.0, -2.0, 1.0};
            for (size_t a = 0; a < 3; a++)
                for (size_t b = 0; b <= a; b++)
                    stack_comp_slot(k, g + a, g + b, d[a] * d[b], 0);
        }
    }
    return GMM_OK;
}

static void drop_arrays(stack_comp *o)
{
    gmm_free(o->slot_row);
    gmm_free(o->slot_col);
    gmm_free(o->slot_group);
    gmm_free(o->slot_value);
    gmm_free(o->joint_row);
    gmm_free(o->joint_col);
    gmm_free(o->con_start);
    gmm_free(o->con_pin);
    gmm_free(o->con_latent);
    gmm_free(o->con_value);
    gmm_free(o->null_start);
    gmm_free(o->null_latent);
    gmm_free(o->null_value);
    gmm_free(o->null_is_b);
}

static void unset_arrays(stack_comp *c)
{
    c->slot_row = c->slot_col = c->slot_group = c->joint_row = c->joint_col = NULL;
    c->con_start = c->con_pin = c->con_latent = c->null_start = c->null_latent = NULL;
    c->slot_value = c->con_value = c->null_value = NULL;
    c->null_is_b = NULL;
    c->nslot = 0;
}

/* The constraints of C intrinsic (RW1, RW2) times a proper main model of
 * n latents: per main latent i, sum_g x_(g,i) = 0 (and the slope's). */
static void control_constraints(stack_comp *c, const stack_comp *o, gmm_stack_model ctrl,
                                size_t G)
{
    size_t n = o->n, two = ctrl == GMM_STACK_RW2, ci = 0, e = 0;
    double gbar = 0.5 * (double)(G - 1), tt = 0.0;
    for (size_t g = 0; g < G; g++)
        tt += ((double)g - gbar) * ((double)g - gbar);
    for (size_t i = 0; i < n; i++)
        for (size_t s = 0; s <= two; s++, ci++) {
            c->con_start[ci] = c->null_start[ci] = e;
            c->con_pin[ci] = s * n + i;
            for (size_t g = 0; g < G; g++, e++) {
                c->con_latent[e] = c->null_latent[e] = g * n + i;
                c->con_value[e] = c->null_value[e] = s ? (double)g - gbar : 1.0;
            }
            /* AN = diag(G, tt), det N_S = 1 (rows g = 0, 1 of [1, g - gbar]) */
            double ld = s ? log(tt) : log((double)G);
            c->ldaa += ld;
            c->ldconst += 2.0 * ld;
        }
    c->ncon = ci;
    c->con_start[ci] = c->null_start[ci] = e;
}

/* c := C (x) c over G groups at the rows' positions pos (nrows). */
static gmm_status kron(stack_comp *c, gmm_stack_model ctrl, size_t G, const size_t *pos,
                       size_t nrows)
{
    gmm_status st;
    stack_comp k = {.name = c->name};
    int cmulti = ctrl == GMM_STACK_AR1, mmulti = 0, cint = ctrl == GMM_STACK_RW1 || ctrl == GMM_STACK_RW2;
    for (size_t s = 0; s < c->nslot; s++)
        mmulti |= c->slot_group[s] != 0;
    if (cmulti && mmulti)
        return gmm_error(GMM_EINVAL, "'%s': an ar1 group structure needs a main model of one "
                                     "variance (iid, rw1, rw2, besag, seasonal), not ar1 or bym2",
                         c->name);
    if (cint && c->ncon)
        return gmm_error(GMM_EINVAL, "'%s': an intrinsic main model with an intrinsic group "
                                     "structure (rw1, rw2) has a null space that per-group "
                                     "constraints do not span; use iid or ar1 for the groups",
                         c->name);
    if ((double)G * (double)c->n > 1e9)
        return gmm_error(GMM_ENOMEM, "'%s': %zu groups of %zu latents are too many", c->name, G,
                         c->n);
    if ((st = control_slots(&k, ctrl, G))) {
        drop_arrays(&k);
        return st;
    }
    stack_comp o = *c;
    size_t n = o.n, ncon = cint ? (ctrl == GMM_STACK_RW2 ? 2 : 1) * n : G * o.ncon;
    size_t nent = cint ? ncon * G : G * (o.ncon ? o.con_start[o.ncon] : 0);
    unset_arrays(c);
    if ((st = stack_comp_arrays(c, 2 * k.nslot * o.nslot, ncon, nent)))
        goto done;
    for (size_t a = 0; a < k.nslot; a++)
        for (size_t s = 0; s < o.nslot; s++) {
            size_t g = k.slot_row[a], h = k.slot_col[a], i = o.slot_row[s], j = o.slot_col[s];
            size_t grp = cmulti ? k.slot_group[a] : o.slot_group[s];
            double v = k.slot_value[a] * o.slot_value[s];
            stack_comp_slot(c, g * n + i, h * n + j, v, grp);
            if (g != h && i != j) /* block (g, h) holds all of M, not its lower half */
                stack_comp_slot(c, g * n + j, h * n + i, v, grp);
        }
    if (cint) {
        c->ldaa = c->ldconst = 0.0;
        control_constraints(c, &o, ctrl, G);
    } else {
        size_t ci = 0, e = 0, en = 0;
        for (size_t g = 0; g < G; g++)
            for (size_t t = 0; t < o.ncon; t++, ci++) {
                c->con_start[ci] = e;
                c->null_start[ci] = en;
                c->con_pin[ci] = g * n + o.con_pin[t];
                for (size_t p = o.con_start[t]; p < o.con_start[t + 1]; p++, e++) {
                    c->con_latent[e] = g * n + o.con_latent[p];
                    c->con_value[e] = o.con_value[p];
                }
                for (size_t p = o.null_start[t]; p < o.null_start[t + 1]; p++, en++) {
                    c->null_latent[en] = g * n + o.null_latent[p];
                    c->null_value[en] = o.null_value[p];
                    c->null_is_b[en] = o.null_is_b[p];
                }
            }
        c->ncon = ci;
        c->con_start[ci] = e;
        c->null_start[ci] = en;
        c->ldaa = (double)G * o.ldaa;
        c->ldconst = (double)G * o.ldconst;
    }
    for (size_t r = 0; r < nrows; r++)
        c->row_loc[r] += pos[r] * n;
    c->n = G * n;
done:
    drop_arrays(&o);
    drop_arrays(&k);
    return st;
}

gmm_status stack_kron_build(stack_comp *c, const gmm_stack_term *t, size_t nrows)
{
    gmm_status st = GMM_OK;
    size_t G, *pos = gmm_malloc(nrows ? nrows : 1, sizeof *pos);
    if (!pos)
        return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
    if (t->model == GMM_STACK_GRAPH || t->model == GMM_STACK_KERNEL) {
        st = gmm_error(GMM_EINVAL, "'%s': group and replicate apply to iid, rw1, rw2, besag, "
                                   "bym2, ar1 and seasonal",
                       c->name);
        goto done;
    }
    c->nmain = c->n;
    c->npar_main = c->npar;
    if (t->group) {
        gmm_stack_model ct = t->control;
        if (ct != GMM_STACK_IID && ct != GMM_STACK_RW1 && ct != GMM_STACK_RW2 &&
            ct != GMM_STACK_AR1) {
            st = gmm_error(GMM_EINVAL, "'%s': the group structure must be iid, rw1, rw2 or ar1",
                           c->name);
            goto done;
        }
        if ((st = stack_positions(c->name, "group", t->group, nrows, pos, &c->group0, &G)) ||
            (st = kron(c, ct, G, pos, nrows)))
            goto done;
        c->control = ct;
        c->ngroup = G;
        if (ct == GMM_STACK_AR1) {
            size_t len = strlen(c->name) + 12;
            double r0 = t->group_rho == 0.0 ? 0.5 : t->group_rho;
            if (!(r0 > -1.0 && r0 < 1.0)) {
                st = gmm_error(GMM_EINVAL, "'%s': group rho %g must be in (-1, 1)", c->name, r0);
                goto done;
            }
            if (!(c->pname[c->npar] = gmm_malloc(len, 1))) {
                st = gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
                goto done;
            }
            snprintf(c->pname[c->npar], len, "%s.group.rho", c->name);
            c->start[c->npar++] = r0;
        }
    }
    if (t->replicate) {
        c->nrep_one = c->n;
        if ((st = stack_positions(c->name, "replicate", t->replicate, nrows, pos, &c->rep0,
                                  &G)) ||
            (st = kron(c, GMM_STACK_IID, G, pos, nrows)))
            goto done;
        c->nrep = G;
    }
done:
    gmm_free(pos);
    return st;
}

gmm_status stack_kron_coef(const stack_comp *c, const double *theta, double *cg, double *dc)
{
    if (c->control != GMM_STACK_AR1)
        return GMM_OK; /* iid, rw1, rw2: constant structures */
    /* the main model has one group here (kron): c_0 = 1/variance */
    double rho = theta[c->npar_main], d[3], dv[3], dr[3];
    if (!(rho > -1.0 && rho < 1.0))
        return gmm_error_at(GMM_EDOM, c->par0 + c->npar_main, "%s = %g must be in (-1, 1)",
                            c->pname[c->npar_main], rho);
    stack_ar1_coef(1.0, rho, d, dv, dr);
    double c0 = cg[0], d0[2] = {dc[0], dc[1]};
    size_t pr = c->npar_main;
    memset(dc, 0, STACK_NPAR * STACK_NGROUP * sizeof *dc);
    for (size_t h = 0; h < 3; h++) {
        cg[h] = c0 * d[h];
        for (size_t p = 0; p < c->npar_main; p++)
            dc[h * STACK_NPAR + p] = d0[p] * d[h];
        dc[h * STACK_NPAR + pr] = c0 * dr[h];
    }
    return GMM_OK;
}

/* An integer value's position from v0 into *p; -1 below, 1 above 0 ..
 * np - 1 (*p then the distance past the edge), 0 within. */
static int position(double t, double v0, size_t np, double *p)
{
    double d = t - v0, last = (double)(np - 1);
    *p = d < 0.0 ? -d : d > last ? d - last : d;
    return d < 0.0 ? -1 : d > last ? 1 : 0;
}

/* The main model's local latent at a data level or value. */
static gmm_status main_local(const stack_comp *q, const gmm_stack_at *at, size_t *i)
{
    switch (q->model) {
    case GMM_STACK_IID:
    case GMM_STACK_BESAG:
    case GMM_STACK_BYM2: {
        size_t m = q->model == GMM_STACK_BYM2 ? q->nmain / 2 : q->nmain;
        if (at->level >= m)
            return gmm_error(GMM_EINVAL, "'%s': level %zu is not one of its %zu", q->name,
                             at->level, m);
        *i = at->level;
        return GMM_OK;
    }
    case GMM_STACK_RW1:
    case GMM_STACK_RW2: {
        size_t j = stack_lower_bound(q->val, q->m, at->value);
        if (j == q->m || q->val[j] != at->value)
            return gmm_error(GMM_EINVAL, "'%s': value %g is not one of the fitted values", q->name,
                             at->value);
        *i = q->model == GMM_STACK_RW2 ? 2 * j : j;
        return GMM_OK;
    }
    default: { /* AR1, SEASONAL */
        double p;
        if (!isfinite(at->value) || at->value != floor(at->value) ||
            position(at->value, q->pos0, q->m, &p))
            return gmm_error(GMM_EINVAL, "'%s': value %g is not one of the positions %g .. %g",
                             q->name, at->value, q->pos0, q->pos0 + (double)(q->m - 1));
        *i = (size_t)p;
        return GMM_OK;
    }
    }
}

/* The main model's prior marginal variance at local latent i, where known
 * (IID, AR1: the variance; BESAG: the variance times the scaled field's);
 * NAN otherwise. */
static double main_var(const stack_comp *q, const double *theta, size_t i)
{
    if (q->model == GMM_STACK_IID || q->model == GMM_STACK_AR1)
        return theta[0];
    if (q->model == GMM_STACK_BESAG)
        return theta[0] * q->mvar[i];
    return NAN;
}

/* NEW ROWS.  A group within the fitted positions reads its latent.  A
 * group beyond them: AR1, rho^h x_(edge, i) + N(0, (1 - rho^{2h}) s_i); IID
 * a new group, N(0, s_i); RW1, x_(edge, i) + N(0, h s_i); s_i the main
 * model's prior marginal variance (known for IID, AR1 and BESAG main
 * models; the others are refused, as RW2 groups are).  A replicate must be
 * a fitted one. */
gmm_status stack_kron_row(const stack_comp *q, const double *theta, const gmm_stack_at *at,
                          double group, double replicate, size_t *li, double *lw, size_t *ne,
                          double *evar)
{
    gmm_status st;
    size_t i = 0, off = 0;
    double p;
    if ((st = main_local(q, at, &i)))
        return st;
    if (q->nrep) {
        if (!isfinite(replicate) || replicate != floor(replicate) ||
            position(replicate, q->rep0, q->nrep, &p))
            return gmm_error(GMM_EINVAL, "'%s': replicate %g is not a fitted one", q->name,
                             replicate);
        off = (size_t)p * q->nrep_one;
    }
    if (q->control == GMM_STACK_NO_MODEL) {
        li[*ne] = off + i;
        lw[(*ne)++] = 1.0;
        return GMM_OK;
    }
    if (!isfinite(group) || group != floor(group))
        return gmm_error(GMM_EINVAL, "'%s': group %g is not an integer", q->name, group);
    int side = position(group, q->group0, q->ngroup, &p);
    if (!side) {
        li[*ne] = off + (size_t)p * q->nmain + i;
        lw[(*ne)++] = 1.0;
        return GMM_OK;
    }
    double s = main_var(q, theta, i);
    if (isnan(s) || q->control == GMM_STACK_RW2)
        return gmm_error(GMM_EINVAL, "'%s': group %g is beyond the fitted groups (new groups "
                                     "need an iid, ar1 or besag main model and iid, rw1 or ar1 "
                                     "groups)",
                         q->name, group);
    size_t edge = side < 0 ? 0 : q->ngroup - 1;
    if (q->control == GMM_STACK_IID) {
        *evar += s;
        return GMM_OK;
    }
    double w = q->control == GMM_STACK_AR1 ? pow(theta[q->npar_main], p) : 1.0;
    li[*ne] = off + edge * q->nmain + i;
    lw[(*ne)++] = w;
    *evar += q->control == GMM_STACK_AR1 ? (1.0 - w * w) * s : p * s;
    return GMM_OK;
}
