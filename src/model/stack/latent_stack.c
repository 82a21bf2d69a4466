/* latent_stack.c -- the stacked latent (stack.h) as a gmm_latent: the
 * object built from its terms (components, joint order, sparse rows,
 * constraints in the joint numbering), the two vtables (assembled form and
 * square-root form) and the accessors.  The jobs live beside it:
 * stack_comp.c (components), stack_order.c (joint order),
 * stack_assemble.c (Q and its reverse), stack_normaliser.c (what the
 * Gaussian likelihood needs beside Q), stack_whiten.c, stack_sqrt.c (the
 * square-root form), stack_predict.c (new rows); the joint order and band
 * are derived in stack_order.c, the constraints of intrinsic components in
 * stack_normaliser.c, the square-root form in stack_sqrt.c.
 *
 * COMPONENTS (variance = the component's "<name>.variance"):
 *
 *   IID    x_k ~ N(0, variance I) over nlevel levels.
 *   RW1    Wiener process on the sorted distinct values t_0 < ... < t_{m-1}
 *          of the index: x'Q x = sum_j (x_{j+1} - x_j)^2 / (variance dt_j),
 *          dt_j = t_{j+1} - t_j.  m latents.  Intrinsic: constraint
 *          sum_j x_j = 0.
 *   RW2    integrated Wiener process, EXACT two-state form: a state (x_j,
 *          x'_j) per level, transition F = [1 dt; 0 1], innovation
 *          covariance variance [dt^3/3 dt^2/2; dt^2/2 dt] (its posterior mean
 *          is the cubic smoothing spline).  2m latents (data read x_j);
 *          bandwidth 3 on its own.  Chosen over the one-state approximation
 *          of Lindgren & Rue (2008) because it is exact at any spacing for
 *          the price of a doubled dimension.  Intrinsic (null space: lines
 *          a + b t): constraints sum_j x_j = 0 and sum_j (t_j - tbar) x_j = 0.
 *   CYCLIC RW1, RW2  (the term's cyclic) the walk on a circle of circumference
 *          `period`: the values t_0 < ... < t_{m-1} are points on it and
 *          the last is followed by the first, a wrap-around distance
 *          d = period - (t_{m-1} - t_0) further on; the walk gains that
 *          interval (RW1: (x_0 - x_{m-1})^2 / (variance d); RW2: the
 *          integrated-Wiener transition over d from (x_{m-1}, x'_{m-1})
 *          back to (x_0, x'_0)), so a seasonal effect is continuous (RW2:
 *          with its derivative) from the last level to the first.  period
 *          0: the default t_{m-1} - t_0 plus one mean spacing, i.e. the
 *          levels 1..P of an evenly spaced index (week of the year 1..52:
 *          period 52, week 52 one week before week 1).  An explicit
 *          period > 0 reduces the values modulo it onto [t_min, t_min +
 *          period), t_min the smallest value (week numbers 1..416 with
 *          period 52: the levels 1..52, week 53 at week 1's);
 *          gmm_latent_stack_wrap maps a new value the same way.
 *          Sizes as the open walks; at least 3 distinct values.  The null
 *          space is the constant alone (on a circle RW2's slope direction
 *          x' = b gives b period = 0), so both carry the one constraint
 *          sum_j x_j = 0.  The wrap's long edge leaves the band O(1): RCM
 *          folds the cycle into a zigzag, twice the open walk's bandwidth
 *          (RW1 2, RW2 6 on its own, whatever m).
 *   BESAG  ICAR on a graph: variance * R*^-, R* = c R the SCALED Laplacian
 *          (Sorbye & Rue 2014): per connected component, c makes the
 *          geometric mean of the marginal variances of the sum-to-zero
 *          constrained field 1.  One constraint per connected component of
 *          two or more nodes; an isolated node (an island) is N(0, variance)
 *          (Freni-Sterrantino et al. 2018).  nlevel = graph nodes.
 *   BYM2   Riebler et al. (2016): b = sqrt(variance) (sqrt(1 - phi) v +
 *          sqrt(phi) u), v ~ N(0, I), u the scaled BESAG field with unit
 *          variance.  2m latents (b, u), data read b; parameters
 *          "<name>.variance" and "<name>.phi" (0 < phi < 1).  Joint
 *          precision [I/(s(1-phi)), -sqrt(phi/s)/(1-phi) I; ., R* +
 *          phi/(1-phi) I], s = variance.  Constraints on u as BESAG.
 *   GRAPH  a graph precision from gmrf.h's table (borrowed gmm_gmrf; its
 *          parameters named "<name>.<gmrf parameter name>").  Proper.
 *   KERNEL a stationary GP of the index values through its state-space
 *          form (ssm.h, borrowed gmm_kernel): the d states at each distinct
 *          value, their banded precision Q(theta) from gmm_ssm_prior (its
 *          parameters named "<name>.<ssm parameter name>", e.g.
 *          "f.t.0.matern32.variance"); a data row reads H x at its value's
 *          state, H the kernel's observation row (only H's nonzero entries).
 *          With the term's merge_tol > 0, values within merge_tol of the first
 *          value of their group share its state (ssm.h, MODEL: a group's
 *          first value is the smallest, the next group starts more than
 *          merge_tol above it): near-ties closer than the spacing limit
 *          (below) become one state.  Proper.  Q is nonlinear in theta,
 *          so a factor of the joint precision inherits the SSM's spacing
 *          limit (gmm_ssm_prior's GMM_EDOM: inputs closer, relative to a
 *          lengthscale, than the Cholesky of the assembled precision
 *          resolves).  A kernel with a
 *          damped zero-noise factor (constant, cosine or periodic not
 *          multiplied by a factor with process noise, kernel.h ZERO PROCESS
 *          NOISE: precision entries ~ K / damp_rel) puts the whole stack in
 *          the square-root form (stack_sqrt.c, SQUARE-ROOT FORM).
 *   CORR   k correlated effects per level of a grouping factor (lme4's
 *          (1 + x | g)): u_g ~ N(0, Sigma), Sigma unstructured, row r reads
 *          sum_a z_ra u_{g(r),a} (the term's z); k (k + 1) / 2 parameters,
 *          the variances and the (partial) correlations (stack_corr.c).
 *          n = k nlevel, bandwidth k - 1 on its own.  Proper.
 *   AR1, SEASONAL  INLA's time-series models on integer positions
 *          (stack_ts.c: their precisions, parameters and constraints).
 *   GROUP, REPLICATE  (the term's group, control, replicate) a component
 *          times a group structure or replicated, as Kronecker products
 *          (stack_kron.c); its model stays the main model's.
 *
 * MEMORY.  The band of Q holds (kl + 1) n doubles: above `limit` bytes it
 * is GMM_ENOMEM with the bytes needed, at the build when the caller gives
 * a limit, else (GMM_GMRF_BAND_LIMIT) when the band path first allocates
 * (gmm_latent_band_check), never on the sparse path (stack_sparse.c).  The
 * observation map holds the rows' reads, sparse.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "../latent_impl.h"
#include "stack_impl.h"

static void stack_free_impl(void *p)
{
    stack_impl *c = p;
    if (!c)
        return;
    for (size_t k = 0; c->comp && k < c->ncomp; k++)
        stack_comp_free(&c->comp[k]);
    stack_sq_free(c->sqrt_work);
    stack_sp_free(c->sp);
    gmm_free(c->read_entry);
    gmm_free(c->mod_rows);
    gmm_free(c->damped_local);
    gmm_free(c->comp);
    gmm_free(c->perm);
    gmm_free(c->con.dense);
    gmm_free(c->con.pinned);
    gmm_free(c->con.a_start);
    gmm_free(c->con.a_latent);
    gmm_free(c->con.a_value);
    gmm_free(c->con.null_start);
    gmm_free(c->con.null_latent);
    gmm_free(c->con.null_value);
    gmm_free(c->con.null_is_b);
    gmm_free(c->con.component);
    gmm_free(c->con.block_start);
    gmm_free(c->prior_theta);
    latent_asm_gauss_free(&c->as.gs);
    gmm_band_free(c->Qpinned);
    gmm_band_free(c->Qpinned_bar);
    gmm_band_free(c->wh.L);
    gmm_band_free(c->wh.Lbar);
    gmm_free(c->wh.scratch);
    gmm_free(c);
}

/* The rows' coefficients at theta: constant ones as built, a demodulated
 * kernel's h(t_r) (its reads cover the whole state). */
static gmm_status stack_obs_coef(void *p, const double *theta, double *coef)
{
    stack_impl *c = p;
    gmm_status st;
    for (size_t k = 0, e0 = 0; k < c->ncomp; e0 += c->comp[k].nread, k++) {
        stack_comp *q = &c->comp[k];
        if (!q->modulated) {
            for (size_t r = 0; r < c->nrows; r++)
                for (size_t e = 0; e < q->nread; e++)
                    coef[c->read_entry[r * c->row_reads + e0 + e]] = stack_read_coef(q, r, e);
            continue;
        }
        if ((st = gmm_ssm_obs_rows(q->ssm, theta + q->par0, c->mod_rows)))
            return st;
        for (size_t r = 0; r < c->nrows; r++)
            for (size_t e = 0; e < q->nread; e++)
                coef[c->read_entry[r * c->row_reads + e0 + e]] = c->mod_rows[r * q->d + q->hidx[e]];
    }
    return GMM_OK;
}

static gmm_status stack_obs_coef_rev(void *p, const double *theta, const double *coefbar,
                                     double *thetabar)
{
    stack_impl *c = p;
    gmm_status st;
    for (size_t k = 0, e0 = 0; k < c->ncomp; e0 += c->comp[k].nread, k++) {
        stack_comp *q = &c->comp[k];
        if (!q->modulated)
            continue;
        memset(c->mod_rows, 0, c->nrows * q->d * sizeof *c->mod_rows);
        for (size_t r = 0; r < c->nrows; r++)
            for (size_t e = 0; e < q->nread; e++)
                c->mod_rows[r * q->d + q->hidx[e]] =
                    coefbar[c->read_entry[r * c->row_reads + e0 + e]];
        if ((st = gmm_ssm_obs_rows_rev(q->ssm, theta + q->par0, c->mod_rows, thetabar + q->par0)))
            return st;
    }
    return GMM_OK;
}

static const gmm_latent_ops stack_ops = {
    .family = "stack",
    .free = stack_free_impl,
    .prior = stack_prior,
    .prior_rev = stack_prior_rev,
    .gaussian = latent_asm_gaussian,
    .band_check = stack_band_check,
    .prior_pattern = stack_prior_pattern,
    .prior_sparse = stack_prior_sparse,
    .prior_rev_sparse = stack_prior_rev_sparse,
    .gaussian_posterior = latent_asm_posterior,
    .gaussian_posterior_solve = latent_asm_posterior_solve,
    .factorisation = stack_factorisation,
    .whiten_setup = stack_whiten_setup,
    .whiten = stack_whiten,
    .whiten_t = stack_whiten_t,
    .unwhiten = stack_unwhiten,
    .whiten_rev = stack_whiten_rev,
    .whiten_setup_sparse = stack_whiten_setup_sparse,
    .scale_blocks = stack_scale_blocks,
};

static const gmm_latent_ops stack_sq_ops = {
    .family = "stack",
    .free = stack_free_impl,
    .prior = stack_sq_prior,
    .prior_rev = stack_sq_prior_rev,
    .band_check = stack_band_check,
    .prior_pattern = stack_prior_pattern,
    .prior_sparse = stack_prior_sparse,
    .prior_rev_sparse = stack_prior_rev_sparse,
    .obs_coef = stack_obs_coef,
    .obs_coef_rev = stack_obs_coef_rev,
    .gaussian = stack_sq_gaussian,
    .gaussian_posterior = stack_sq_posterior,
    .gaussian_posterior_solve = stack_sq_posterior_solve,
    .factorisation = stack_sq_factorisation,
    .whiten_setup = stack_sq_whiten_setup,
    .whiten = stack_sq_whiten,
    .whiten_t = stack_sq_whiten_t,
    .unwhiten = stack_sq_unwhiten,
    .whiten_rev = stack_sq_whiten_rev,
    .wls_rows = stack_sq_wls_rows,
    .wls = stack_sq_wls,
    .wls_quad = stack_sq_wls_quad,
    .wls_var = stack_sq_wls_var,
    .wls_adjoint = stack_sq_wls_adjoint,
    .wls_rowcov = stack_sq_wls_rowcov,
    .prior_rows = stack_sq_prior_rows,
    .prior_rows_rev_q = stack_sq_rows_rev_q,
};

/* The components built from their terms, laid end to end in the
 * unpermuted stacked vector (c->n, c->nparam, c->ncon and the normaliser's
 * constants summed). */
static gmm_status build_components(stack_impl *c, const gmm_stack_term *terms, size_t limit)
{
    gmm_status st;
    for (size_t k = 0; k < c->ncomp; k++) {
        stack_comp *q = &c->comp[k];
        if ((st = terms[k].model == GMM_STACK_CORR
                      ? stack_corr_build(q, &terms[k], c->nrows)
                      : stack_comp_build(q, &terms[k], c->nrows, limit)))
            return st;
        q->off = c->n;
        q->par0 = c->nparam;
        c->n += q->n;
        c->nparam += q->npar;
        c->ncon += q->ncon;
        c->con.ld_const += q->ldconst;
        c->con.ld_aat += q->ldaa;
    }
    return GMM_OK;
}

/* The first and last joint index data row r reads. */
static void row_span(const stack_impl *c, size_t r, size_t *lo, size_t *hi)
{
    *lo = SIZE_MAX;
    *hi = 0;
    for (size_t k = 0; k < c->ncomp; k++)
        for (size_t e = 0; e < c->comp[k].nread; e++) {
            size_t p = c->iperm[stack_read_at(&c->comp[k], r, e)];
            *lo = p < *lo ? p : *lo;
            *hi = p > *hi ? p : *hi;
        }
}

/* The widest row's window (the observation map's width). */
static size_t row_width(const stack_impl *c)
{
    size_t W = c->n ? 1 : 0, lo, hi; /* no component: rows read nothing */
    for (size_t r = 0; r < c->nrows && c->ncomp; r++) {
        row_span(c, r, &lo, &hi);
        W = hi - lo + 1 > W ? hi - lo + 1 : W;
    }
    return W;
}

/* The rows' scratch: reads per row (c->row_reads; every row reads nread
 * latents of each component, distinct ones), where each landed
 * (read_entry), demodulated kernels' rows (mod_rows) and the square-root
 * form's local vectors (damped_local).  *varies: some row's coefficients
 * depend on theta. */
static gmm_status alloc_rows(stack_impl *c, int *varies)
{
    size_t dmax = 1, nbig = 1;
    *varies = 0;
    c->row_reads = 0;
    for (size_t k = 0; k < c->ncomp; k++) {
        const stack_comp *q = &c->comp[k];
        c->row_reads += q->nread;
        c->sqrt_form |= q->damped;
        *varies |= q->modulated;
        dmax = q->d > dmax ? q->d : dmax;
        nbig = q->damped && q->n > nbig ? q->n : nbig;
    }
    c->read_entry = gmm_malloc(c->nrows * c->row_reads + c->row_reads + 1, sizeof *c->read_entry);
    c->mod_rows = *varies ? gmm_malloc(c->nrows * dmax + 1, sizeof *c->mod_rows) : NULL;
    c->damped_local = c->sqrt_form ? gmm_malloc(2 * nbig, sizeof *c->damped_local) : NULL;
    if (!c->read_entry || (*varies && !c->mod_rows) || (c->sqrt_form && !c->damped_local))
        return gmm_error(GMM_ENOMEM, "out of memory for the stacked latent");
    return GMM_OK;
}

/* The constraints' arrays in the joint numbering (filled by
 * place_components) and the Gaussian likelihood's row buffers. */
static gmm_status alloc_constraints(stack_impl *c)
{
    size_t nae = 0, nne = 0, k1 = c->ncon + 1;
    for (size_t k = 0; k < c->ncomp; k++) {
        nae += c->comp[k].ncon ? c->comp[k].con_start[c->comp[k].ncon] : 0;
        nne += c->comp[k].ncon ? c->comp[k].null_start[c->comp[k].ncon] : 0;
    }
    c->as.gs.ooff = gmm_malloc(c->nrows ? c->nrows : 1, sizeof *c->as.gs.ooff);
    c->as.gs.oy = gmm_malloc(c->nrows ? c->nrows : 1, sizeof *c->as.gs.oy);
    c->con.dense = gmm_calloc(c->ncon * c->n > 0 ? c->ncon * c->n : 1, sizeof *c->con.dense);
    c->con.pinned = gmm_malloc(c->ncon ? c->ncon : 1, sizeof *c->con.pinned);
    c->con.a_start = gmm_calloc(k1, sizeof *c->con.a_start);
    c->con.null_start = gmm_calloc(k1, sizeof *c->con.null_start);
    c->con.component = gmm_calloc(k1, sizeof *c->con.component);
    c->con.block_start = gmm_calloc(k1, sizeof *c->con.block_start);
    c->con.a_latent = gmm_malloc(nae + 1, sizeof *c->con.a_latent);
    c->con.a_value = gmm_malloc(nae + 1, sizeof *c->con.a_value);
    c->con.null_latent = gmm_malloc(nne + 1, sizeof *c->con.null_latent);
    c->con.null_value = gmm_malloc(nne + 1, sizeof *c->con.null_value);
    c->con.null_is_b = gmm_malloc(nne + 1, sizeof *c->con.null_is_b);
    const stack_constraints *a = &c->con;
    if (!c->as.gs.ooff || !c->as.gs.oy || !a->dense || !a->pinned || !a->a_start ||
        !a->null_start || !a->component || !a->block_start || !a->a_latent || !a->a_value ||
        !a->null_latent || !a->null_value || !a->null_is_b)
        return gmm_error(GMM_ENOMEM, "out of memory for the stacked latent");
    return GMM_OK;
}

/* The latent's common part from the object, and latent_asm's callbacks. */
static void describe_latent(stack_impl *c, gmm_latent *l, int varies)
{
    l->impl = c;
    c->latent = l;
    l->varies = varies;
    l->sqrt_only = c->sqrt_form;
    /* vi takes the square root (stack_sqrt.c: one merged row per latent),
     * its gradient from q's moments (gmm_latent_prior_rows_rev_q) */
    l->prior_nrows = c->sqrt_form ? c->n : 0;
    l->prior_seg = c->sqrt_form ? 1 : 0;
    l->n = c->n;
    l->kl = c->bw;
    l->cov_kl = c->bw;
    l->nconstr = c->ncon;
    l->constr = c->ncon ? c->con.dense : NULL;
    l->pin = c->ncon ? c->con.pinned : NULL;
    c->as = (latent_asm){.ctx = c, .what = "stacked latent", .n = c->n, .nparam = c->nparam,
                         .npin = c->ncon, .pin = c->con.pinned,
                         .assemble = c->sqrt_form ? stack_asm_assemble_rest : stack_asm_assemble,
                         .assemble_rev = c->sqrt_form ? stack_asm_assemble_rev_rest
                                                      : stack_asm_assemble_rev,
                         .normaliser = stack_normaliser,
                         .normaliser_rev = stack_normaliser_rev, .work = stack_band_work,
                         .map = gmm_latent_obs_map(l),
                         .gs = c->as.gs}; /* its rows allocated before */
}

/* The observation map's sparse rows: row r's window starts at its first
 * joint index (moved back to fit), its entries in increasing position, and
 * read_entry records where each read (in component order) landed. */
static void fill_rows(stack_impl *c, gmm_latent *l, size_t W)
{
    size_t R = c->row_reads, nrows = c->nrows;
    for (size_t r = 0; r < nrows; r++) {
        size_t lo, hi;
        row_span(c, r, &lo, &hi);
        if (lo + W > c->n)
            lo = c->n - W;
        l->offset[r] = lo;
        size_t *pr = l->pos + r * R, j0 = 0, *src = c->read_entry + nrows * R;
        double *cr = l->coef + r * R;
        for (size_t k = 0; k < c->ncomp; k++)
            for (size_t e = 0; e < c->comp[k].nread; e++, j0++) {
                /* insertion: increasing positions */
                size_t p = c->iperm[stack_read_at(&c->comp[k], r, e)] - lo, j = j0;
                for (; j > 0 && pr[j - 1] > p; j--) {
                    pr[j] = pr[j - 1];
                    cr[j] = cr[j - 1];
                    src[j] = src[j - 1];
                }
                pr[j] = p;
                cr[j] = stack_read_coef(&c->comp[k], r, e);
                src[j] = j0;
            }
        for (size_t j = 0; j < R; j++)
            c->read_entry[r * R + src[j]] = r * R + j;
        l->rowptr[r + 1] = (r + 1) * R;
    }
}

/* Each component in the joint order: its slots' permuted places, its
 * constraints and null-space basis in the joint numbering, its
 * parameters' names, starts and domains. */
static void place_components(stack_impl *c, gmm_latent *l)
{
    size_t ci = 0;
    for (size_t k = 0; k < c->ncomp; k++) {
        stack_comp *q = &c->comp[k];
        for (size_t s = 0; s < q->nslot; s++) {
            size_t a = c->iperm[q->off + q->slot_row[s]], b = c->iperm[q->off + q->slot_col[s]];
            q->joint_row[s] = a > b ? a : b;
            q->joint_col[s] = a > b ? b : a;
        }
        if (q->ncon)
            c->con.block_start[c->con.nblock++] = ci;
        for (size_t t = 0; t < q->ncon; t++, ci++) {
            c->con.pinned[ci] = c->iperm[q->off + q->con_pin[t]];
            c->con.component[ci] = k;
            size_t ea = c->con.a_start[ci], en = c->con.null_start[ci];
            for (size_t e = q->con_start[t]; e < q->con_start[t + 1]; e++, ea++) {
                c->con.dense[ci * c->n + c->iperm[q->off + q->con_latent[e]]] = q->con_value[e];
                c->con.a_latent[ea] = c->iperm[q->off + q->con_latent[e]];
                c->con.a_value[ea] = q->con_value[e];
            }
            for (size_t e = q->null_start[t]; e < q->null_start[t + 1]; e++, en++) {
                c->con.null_latent[en] = c->iperm[q->off + q->null_latent[e]];
                c->con.null_value[en] = q->null_value[e];
                c->con.null_is_b[en] = q->null_is_b[e];
            }
            c->con.a_start[ci + 1] = ea;
            c->con.null_start[ci + 1] = en;
        }
        for (size_t p = 0; p < q->npar; p++) {
            int gr = q->model == GMM_STACK_GRAPH, kn = q->model == GMM_STACK_KERNEL;
            int co = q->model == GMM_STACK_CORR;
            l->name[q->par0 + p] = gr || kn || co ? q->gname[p] : q->pname[p];
            l->start[q->par0 + p] = gr   ? q->g->param_value[p]
                                    : kn ? gmm_kernel_values_const(q->kern)[p]
                                    : co ? q->gstart[p]
                                         : q->start[p];
            l->zero_ok[q->par0 + p] = gr ? q->g->param_zero_ok[p] : 0;
            int rho = (q->model == GMM_STACK_AR1 && p == 1) ||
                      (q->control == GMM_STACK_AR1 && p == q->npar_main);
            l->domain[q->par0 + p] = rho ? GMM_PARAM_SIGNED
                                     : q->model == GMM_STACK_BYM2 && p == 1 /* phi */
                                         ? GMM_PARAM_UNIT
                                     : co && p >= q->nread /* a correlation */
                                         ? GMM_PARAM_SIGNED
                                         : GMM_PARAM_POSITIVE;
        }
    }
    c->con.block_start[c->con.nblock] = c->ncon;
}

gmm_status gmm_latent_stack_alloc(size_t nrows, size_t nterm, const gmm_stack_term *terms,
                                  size_t limit, gmm_latent **out)
{
    gmm_status st;
    gmm_latent *l = NULL;
    int varies;
    if (!out || (!terms && nterm > 0))
        return gmm_error(GMM_EINVAL, "gmm_latent_stack_alloc: NULL argument");
    *out = NULL;
    size_t lim = limit ? limit : GMM_GMRF_BAND_LIMIT;
    stack_impl *c = gmm_calloc(1, sizeof *c);
    if (!c || !(c->comp = gmm_calloc(nterm ? nterm : 1, sizeof *c->comp))) {
        gmm_free(c);
        return gmm_error(GMM_ENOMEM, "out of memory for the stacked latent");
    }
    c->ncomp = nterm;
    c->nrows = nrows;
    if ((st = build_components(c, terms, limit)))
        goto fail;
    c->perm = gmm_malloc(2 * (c->n ? c->n : 1), sizeof *c->perm);
    c->prior_theta = gmm_malloc(c->nparam ? c->nparam : 1, sizeof *c->prior_theta);
    if (!c->perm || !c->prior_theta) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the stacked latent");
        goto fail;
    }
    c->iperm = c->perm + c->n;
    if ((st = stack_order(c)))
        goto fail;
    size_t W = row_width(c);
    c->band_limit = lim;
    /* the default limit waits for the band path (stack_band_check), so
     * that the sparse path builds models of any bandwidth */
    if (limit && (st = stack_band_check(c)))
        goto fail;
    if ((st = alloc_rows(c, &varies)))
        goto fail;
    l = latent_new_sparse(c->sqrt_form ? &stack_sq_ops : &stack_ops, nrows, W,
                          nrows * c->row_reads, c->nparam);
    if ((st = alloc_constraints(c)))
        goto fail;
    if (!l) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the stacked latent");
        goto fail;
    }
    describe_latent(c, l, varies);
    fill_rows(c, l, W);
    place_components(c, l);
    *out = l;
    return GMM_OK;
fail:
    if (l)
        l->impl = NULL;
    gmm_latent_free(l);
    stack_free_impl(c);
    return st;
}

stack_impl *stack_impl_of(const gmm_latent *l)
{
    return l && (l->ops == &stack_ops || l->ops == &stack_sq_ops) ? l->impl : NULL;
}

size_t gmm_latent_stack_nterm(const gmm_latent *l)
{
    stack_impl *c = stack_impl_of(l);
    return c ? c->ncomp : 0;
}

size_t gmm_latent_stack_size(const gmm_latent *l, size_t k)
{
    stack_impl *c = stack_impl_of(l);
    return c && k < c->ncomp ? c->comp[k].n : 0;
}

size_t gmm_latent_stack_index(const gmm_latent *l, size_t k, size_t j)
{
    stack_impl *c = stack_impl_of(l);
    if (!c || k >= c->ncomp || j >= c->comp[k].n)
        return GMM_NO_INDEX;
    return c->iperm[c->comp[k].off + j];
}

const double *gmm_latent_stack_values(const gmm_latent *l, size_t k, size_t *m)
{
    stack_impl *c = stack_impl_of(l);
    if (!c || k >= c->ncomp || !c->comp[k].val)
        return NULL;
    if (m)
        *m = c->comp[k].m;
    return c->comp[k].val;
}

size_t gmm_latent_stack_nmerged(const gmm_latent *l, size_t k)
{
    stack_impl *c = stack_impl_of(l);
    if (!c || k >= c->ncomp || !c->comp[k].ssm)
        return 0;
    return gmm_ssm_nmerged(c->comp[k].ssm);
}

double gmm_latent_stack_period(const gmm_latent *l, size_t k)
{
    stack_impl *c = stack_impl_of(l);
    if (!c || k >= c->ncomp || !c->comp[k].cyclic)
        return NAN;
    return c->comp[k].period;
}

double gmm_latent_stack_wrap(const gmm_latent *l, size_t k, double t)
{
    stack_impl *c = stack_impl_of(l);
    if (!c || k >= c->ncomp || !c->comp[k].cyclic)
        return t;
    return stack_wrap(c->comp[k].val[0], c->comp[k].period, t);
}

double gmm_latent_stack_scale(const gmm_latent *l, size_t k, size_t v)
{
    stack_impl *c = stack_impl_of(l);
    if (!c || k >= c->ncomp || !c->comp[k].scale || v >= c->comp[k].n)
        return NAN;
    return c->comp[k].scale[v];
}

gmm_status gmm_latent_stack_sigma(const gmm_latent *l, size_t k, const double *theta_k,
                                  double *Sigma)
{
    stack_impl *c = stack_impl_of(l);
    if (!c || k >= c->ncomp || c->comp[k].model != GMM_STACK_CORR || !theta_k || !Sigma)
        return gmm_error(GMM_EINVAL, "gmm_latent_stack_sigma: not a correlated component");
    double cg[STACK_NGROUP], dc[STACK_NPAR * STACK_NGROUP];
    gmm_status st = stack_corr_coef(&c->comp[k], theta_k, cg, dc); /* the domains */
    if (st)
        return st;
    stack_corr_sigma(&c->comp[k], theta_k, Sigma);
    return GMM_OK;
}

gmm_status gmm_latent_stack_constraints(const gmm_latent *l, double *A)
{
    stack_impl *c = stack_impl_of(l);
    if (!c || (c->ncon && !A))
        return gmm_error(GMM_EINVAL, "gmm_latent_stack_constraints: not a stacked latent");
    memcpy(A, c->con.dense, c->ncon * c->n * sizeof *A);
    return GMM_OK;
}

gmm_status gmm_latent_stack_logdet(gmm_latent *l, const double *theta, double *logdet)
{
    stack_impl *c = stack_impl_of(l);
    gmm_status st;
    if (!c || !theta || !logdet)
        return gmm_error(GMM_EINVAL, "gmm_latent_stack_logdet: not a stacked latent");
    if (c->sqrt_form)
        return gmm_error(GMM_EINVAL, "gmm_latent_stack_logdet: a stack with a damped kernel has "
                                     "no accurate assembled precision");
    if ((st = gmm_latent_theta_check(l, theta)) || (st = stack_band_work(c)) ||
        (st = stack_assemble(c, theta, c->as.gs.Q, 0)))
        return st;
    if (c->ncon) {
        if ((st = stack_pinned_logdet(c, c->as.gs.Q, logdet)))
            return st;
        *logdet -= c->con.ld_aat;
        return GMM_OK;
    }
    if ((st = gmm_band_chol_decomp(c->as.gs.Q, c->as.gs.Q)))
        return st;
    *logdet = gmm_band_chol_logdet(c->as.gs.Q);
    return gmm_band_set_kind(c->as.gs.Q, GMM_BAND_SYMMETRIC);
}

void gmm_latent_stack_describe(const gmm_latent *l, char *buf, size_t size)
{
    stack_impl *c = stack_impl_of(l);
    static const char *model[] = {"iid",   "rw1",    "rw2",        "besag", "bym2",
                                  "graph", "kernel", "correlated", "ar1",   "seasonal"};
    size_t used = 0;
    if (!buf || size == 0)
        return;
    buf[0] = '\0';
    if (!c)
        return;
    for (size_t k = 0; k < c->ncomp && used < size; k++) {
        int w = c->comp[k].cyclic
                    ? snprintf(buf + used, size - used, "%s%s (%s, cyclic, period %g): %zu latents",
                               k ? ", " : "", c->comp[k].name, model[c->comp[k].model],
                               c->comp[k].period, c->comp[k].n)
                    : snprintf(buf + used, size - used, "%s%s (%s): %zu latents", k ? ", " : "",
                               c->comp[k].name, model[c->comp[k].model], c->comp[k].n);
        used += w > 0 ? (size_t)w : 0;
        const stack_comp *q = &c->comp[k];
        w = q->control != GMM_STACK_NO_MODEL && used < size
                ? snprintf(buf + used, size - used, " (%zu groups, %s)", q->ngroup,
                           model[q->control])
                : 0;
        used += w > 0 ? (size_t)w : 0;
        w = q->nrep && used < size
                ? snprintf(buf + used, size - used, " (%zu replicates)", q->nrep)
                : 0;
        used += w > 0 ? (size_t)w : 0;
    }
    if (used < size)
        snprintf(buf + used, size - used,
                 "; n = %zu, bandwidth %zu, observation width %zu, %zu constraints, band of Q: "
                 "%.1f MB%s",
                 c->n, c->bw, c->as.map.width, c->ncon,
                 (double)(c->bw + 1) * (double)c->n * sizeof(double) / 1e6,
                 c->sqrt_form ? "; square-root form (a damped kernel)" : "");
}
