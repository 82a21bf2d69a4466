/* laplace_sparse.c -- the Laplace approximation's sparse form (laplace.h,
 * THE SPARSE FORM): the assembled form's Newton iterations, stopping rule,
 * log q, gradient, constraints and draws (laplace.c runs them; the
 * derivations are laplace.c's and laplace_newton.c's), with P = Q + H'WH
 * in sparse storage (sparse.h) factored by the sparse Cholesky (factor.h).
 *
 * SYMBOLIC WORK ONCE.  P's pattern is Q's joined with H'H's (the pairs of
 * each row's entries), made at allocation with the position in P of each
 * of Q's entries (qpos) and of each pair (hpos), so that forming P at a
 * Newton step is a pass over arrays and the factor's fill-reducing
 * analysis is done once.  The gradient's Sigma = P^-1 is wanted on P's
 * pattern only (the rows' pairs for s_i and Sigma h_i, Q's entries for
 * Qbar), which Takahashi's recurrence gives (gmm_factor_selinv_sparse).
 * Constraints are constr.h's kriging and pins through the gmm_factor.
 * No band is allocated on this path. */
#include "gmm/laplace.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/constr.h"
#include "laplace_impl.h"

/* The index of the pair (a, c), a <= c, of a row's m entries, the pairs
 * listed row-major: (0,0) .. (0,m-1), (1,1) .. (1,m-1), ... */
static size_t pair_index(size_t m, size_t a, size_t c)
{
    return a * m - a * (a - 1) / 2 + (c - a);
}

static double sparse_psi(gmm_laplace *w, const double *x, int keep)
{
    double sum = w->lsum = laplace_lik_sum(w, x, keep);
    gmm_sparse_symv(w->Qs, x, w->tmp);
    return laplace_psi_from_qx(w, x, sum);
}

/* P = Q + H'WH (+ tau at the pins) by positions, then its sparse Cholesky. */
static gmm_status sparse_factor(gmm_laplace *w, int clamp, double tau)
{
    const gmm_laplace_obs *ob = w->obs;
    const gmm_sparse *Q = w->Qs;
    gmm_sparse *P = w->P;
    gmm_sparse_set_zero(P);
    for (size_t p = 0; p < Q->nnz; p++)
        P->val[w->qpos[p]] += Q->val[p];
    if (w->con)
        gmm_constr_pin_sparse(w->con, tau, P);
    for (size_t i = 0; i < ob->map.nrows; i++) {
        size_t lo = gmm_obsmap_row_lo(&ob->map, i), hi = gmm_obsmap_row_hi(&ob->map, i);
        const double *h = ob->map.coef;
        double wi = clamp ? fmax(w->w[i], 0.0) : w->w[i];
        if (wi == 0.0)
            continue;
        const size_t *pos = w->hpos + w->hptr[i];
        for (size_t a = lo; a < hi; a++) {
            double c = wi * h[a];
            for (size_t b = a; b < hi; b++)
                P->val[*pos++] += c * h[b];
        }
    }
    gmm_status st = gmm_factor_decomp_sparse(w->fP, P);
    if (st == GMM_ENOTPD) {
        size_t row = gmm_error_index();
        return gmm_error_at(GMM_ENOTPD, row,
                            "Laplace: posterior precision Q + H'WH not positive definite at "
                            "row %zu",
                            row);
    }
    return st;
}

static gmm_status sparse_constrain(gmm_laplace *w, double tau)
{
    return gmm_constr_factor_with(w->con, w->fP, tau);
}

static gmm_status sparse_constrain_solve(gmm_laplace *w, double tau, double *v)
{
    return gmm_constr_factor_solve_with(w->con, w->fP, tau, v);
}

gmm_status laplace_sparse_solve(gmm_laplace *w, double *v)
{
    return w->con ? gmm_constr_solve_with(w->con, w->fP, v) : gmm_factor_solve(w->fP, v);
}

static double sparse_logdet(const gmm_laplace *w) { return gmm_factor_logdet(w->fP); }

static double sparse_qdiag(const gmm_laplace *w, size_t j)
{
    return w->Qs->val[w->Qs->colptr[j]]; /* the diagonal leads its column */
}

static double sparse_flops(const gmm_laplace *w)
{
    double flops, bytes;
    gmm_factor_cost(w->fP, &flops, &bytes);
    return flops;
}

/* Sigma(ia, ic) from its entries on P's pattern (SP) */
static double sparse_sigma(const gmm_laplace *w, size_t i, size_t a, size_t c)
{
    const gmm_obsmap *m = &w->obs->map;
    size_t lo = gmm_obsmap_row_lo(m, i), hi = gmm_obsmap_row_hi(m, i);
    size_t ra = a - lo, rc = c - lo;
    if (ra > rc) {
        size_t t = ra;
        ra = rc;
        rc = t;
    }
    return w->SP->val[w->hpos[w->hptr[i] + pair_index(hi - lo, ra, rc)]];
}

static const laplace_form sparse_form = {sparse_psi,
                                         sparse_factor,
                                         sparse_constrain,
                                         sparse_constrain_solve,
                                         laplace_sparse_solve,
                                         sparse_logdet,
                                         sparse_qdiag,
                                         sparse_flops,
                                         sparse_sigma};

/* The latent of each of map's entries into lat (nnz), in entry order. */
static void entry_latents(const gmm_obsmap *map, size_t *lat)
{
    for (size_t i = 0; i < map->nrows; i++) {
        size_t lo = gmm_obsmap_row_lo(map, i), hi = gmm_obsmap_row_hi(map, i);
        for (size_t k = lo; k < hi; k++)
            lat[k] = map->offset[i] + gmm_obsmap_row_pos(map, k, lo);
    }
}

/* P's pattern from Q's and map's pairs, and the positions in it (w->P,
 * qpos, hptr, hpos; hlat the rows' latents, filled). */
static gmm_status make_pattern(gmm_laplace *w, const gmm_sparse *Q, const gmm_obsmap *map)
{
    gmm_status st = GMM_OK;
    size_t nrows = map->nrows, npair = 0;
    for (size_t i = 0; i < nrows; i++) {
        w->hptr[i] = npair;
        size_t m = gmm_obsmap_row_hi(map, i) - gmm_obsmap_row_lo(map, i);
        npair += m * (m + 1) / 2;
    }
    w->hptr[nrows] = npair;
    size_t *ei = gmm_malloc(npair ? 2 * npair : 1, sizeof *ei);
    w->hpos = gmm_malloc(npair ? npair : 1, sizeof *w->hpos);
    w->qpos = gmm_malloc(Q->nnz ? Q->nnz : 1, sizeof *w->qpos);
    gmm_sparse *HH = NULL;
    if (!ei || !w->hpos || !w->qpos) {
        st = gmm_error(GMM_ENOMEM, "laplace: out of memory for the pattern of %zu row pairs",
                       npair);
        goto done;
    }
    size_t *ej = ei + npair, t = 0;
    for (size_t i = 0; i < nrows; i++) {
        size_t lo = gmm_obsmap_row_lo(map, i), hi = gmm_obsmap_row_hi(map, i);
        for (size_t a = lo; a < hi; a++)
            for (size_t c = a; c < hi; c++, t++) {
                ei[t] = w->hlat[c];
                ej[t] = w->hlat[a];
            }
    }
    if ((st = gmm_sparse_from_entries(w->n, npair, ei, ej, &HH)) ||
        (st = gmm_sparse_union(Q, HH, &w->P)))
        goto done;
    for (size_t p = 0; p < npair; p++)
        w->hpos[p] = gmm_sparse_find(w->P, ei[p], ej[p]);
    for (size_t j = 0; j < Q->n; j++)
        for (size_t p = Q->colptr[j]; p < Q->colptr[j + 1]; p++)
            w->qpos[p] = gmm_sparse_find(w->P, Q->rowind[p], j);
done:
    gmm_free(ei);
    gmm_sparse_free(HH);
    return st;
}

gmm_laplace *gmm_laplace_alloc_sparse(const gmm_sparse *Q, const gmm_obsmap *map)
{
    if (!Q || !map) {
        gmm_error(GMM_EINVAL, "laplace: NULL argument");
        return NULL;
    }
    size_t n = Q->n, nrows = map->nrows, nnz = gmm_obsmap_nnz(map);
    if (n == 0 || (nrows && map->width == 0)) {
        gmm_error(GMM_EINVAL, "laplace: the sparse form needs a latent (n %zu, width %zu)", n,
                  map->width);
        return NULL;
    }
    for (size_t i = 0; i < nrows; i++)
        if (map->offset[i] + map->width > n) {
            gmm_error_at(GMM_EDIM, i, "laplace: observation %zu reads past the latent", i);
            return NULL;
        }
    gmm_laplace *w = laplace_alloc_vectors(n, nrows, map->width);
    if (!w)
        return NULL;
    w->hptr = gmm_malloc(nrows + 1, sizeof *w->hptr);
    w->hent = gmm_malloc(nrows + 1, sizeof *w->hent);
    w->hlat = gmm_malloc(nnz ? nnz : 1, sizeof *w->hlat);
    if (!(w->hptr && w->hent && w->hlat)) {
        gmm_laplace_free(w);
        gmm_error(GMM_ENOMEM, "laplace: out of memory for a workspace of %zu latents", n);
        return NULL;
    }
    for (size_t i = 0; i <= nrows; i++)
        w->hent[i] = i < nrows ? gmm_obsmap_row_lo(map, i) : nnz;
    entry_latents(map, w->hlat);
    if (make_pattern(w, Q, map) || !(w->Qpat = gmm_sparse_alloc_like(Q)) ||
        !(w->SP = gmm_sparse_alloc_like(w->P)) || !(w->fP = gmm_factor_sparse_alloc(w->P))) {
        gmm_status st = gmm_error_status();
        gmm_laplace_free(w);
        if (st == GMM_OK)
            gmm_error(GMM_ENOMEM, "laplace: out of memory for the sparse posterior precision");
        return NULL;
    }
    return w;
}

/* Q's pattern and obs' rows are the workspace's (GMM_EDIM otherwise). */
static gmm_status check_problem(const gmm_laplace *w, const gmm_sparse *Q,
                                const gmm_laplace_obs *obs)
{
    const gmm_sparse *R = w->Qpat;
    if (Q->n != R->n || Q->nnz != R->nnz ||
        memcmp(Q->colptr, R->colptr, (R->n + 1) * sizeof *R->colptr) ||
        memcmp(Q->rowind, R->rowind, R->nnz * sizeof *R->rowind))
        return gmm_error(GMM_EDIM, "laplace: Q (%zu x %zu, %zu entries) has another pattern than "
                                   "the workspace's (%zu, %zu entries)",
                         Q->n, Q->n, Q->nnz, R->n, R->nnz);
    const gmm_obsmap *m = &obs->map;
    if (m->nrows != w->maxobs)
        return gmm_error(GMM_EDIM, "laplace: %zu observations, the workspace's pattern has %zu",
                         m->nrows, w->maxobs);
    for (size_t i = 0; i < m->nrows; i++) {
        size_t lo = gmm_obsmap_row_lo(m, i), hi = gmm_obsmap_row_hi(m, i);
        int same = lo == w->hent[i] && hi == w->hent[i + 1];
        for (size_t k = lo; same && k < hi; k++)
            same = m->offset[i] + gmm_obsmap_row_pos(m, k, lo) == w->hlat[k];
        if (!same)
            return gmm_error_at(GMM_EDIM, i, "laplace: observation %zu reads other latents than "
                                             "the workspace's pattern",
                                i);
    }
    return GMM_OK;
}

gmm_status gmm_laplace_eval_sparse(gmm_laplace *w, const gmm_sparse *Q, double logdet_q,
                                   const gmm_laplace_obs *obs, const gmm_lik *lik, double b,
                                   const double *x0, int warm, const gmm_laplace_params *par,
                                   double *logq)
{
    gmm_status st;
    gmm_laplace_params dflt;
    if (!w || !Q || !obs || !lik || !logq)
        return gmm_error(GMM_EINVAL, "laplace: NULL argument");
    if (!w->fP)
        return gmm_error(GMM_EINVAL, "laplace: gmm_laplace_eval_sparse needs a workspace from "
                                     "gmm_laplace_alloc_sparse");
    if (w->known == LAPLACE_KNOWS_FIT)
        w->known = LAPLACE_KNOWS_MODE;
    if (!par) {
        gmm_laplace_params_init(&dflt);
        par = &dflt;
    }
    if ((st = check_problem(w, Q, obs)) || (st = laplace_set_obs(w, obs, lik, b)))
        return st;
    w->Qs = Q;
    w->sm = NULL;
    double tau = w->con ? gmm_constr_tau_sparse(w->con, Q) : 0.0;
    if (w->con && isnan(logdet_q))
        return gmm_error(GMM_EINVAL, "laplace: constraints need the prior's log-determinant on "
                                     "the constrained subspace");
    w->logdet_here = isnan(logdet_q);
    if (w->logdet_here) {
        if (!w->fQs && !(w->fQs = gmm_factor_sparse_alloc(w->Qpat)))
            return gmm_error_status();
        if (!w->SQs && !(w->SQs = gmm_sparse_alloc_like(w->Qpat)))
            return gmm_error_status();
        if ((st = gmm_factor_decomp_sparse(w->fQs, Q)) != GMM_OK) {
            size_t row = gmm_error_index();
            return st == GMM_ENOTPD
                       ? gmm_error_at(st, row, "prior precision not positive definite (row %zu)",
                                      row)
                       : st;
        }
        logdet_q = gmm_factor_logdet(w->fQs);
    }
    return laplace_newton_run(w, &sparse_form, x0, warm, par, tau, logdet_q, logq);
}

static gmm_status sparse_fit(const gmm_laplace *w, const char *what)
{
    if (!w || w->known != LAPLACE_KNOWS_FIT || !w->fP)
        return gmm_error(GMM_EINVAL, "laplace: no successful sparse evaluation %s", what);
    return GMM_OK;
}

/* Qbar's position of each of Q's entries into pos (Q->nnz); GMM_EDIM when
 * Qbar misses one. */
static gmm_status qbar_positions(const gmm_sparse *Q, const gmm_sparse *Qbar, size_t *pos)
{
    for (size_t j = 0; j < Q->n; j++)
        for (size_t p = Q->colptr[j]; p < Q->colptr[j + 1]; p++)
            if ((pos[p] = gmm_sparse_find(Qbar, Q->rowind[p], j)) == SIZE_MAX)
                return gmm_error(GMM_EDIM, "laplace: Qbar has no entry (%zu, %zu) of Q's "
                                           "pattern",
                                 Q->rowind[p], j);
    return GMM_OK;
}

/* Qbar += -x x'/2 - (z x' + x z')/2 - Sigma/2 [+ Q^-1/2] on Q's entries
 * (symmetric convention: an off-diagonal counts for both triangles). */
static gmm_status add_qbar(gmm_laplace *w, gmm_sparse *Qbar)
{
    gmm_status st;
    const gmm_sparse *Q = w->Qpat;
    if (Qbar->n != w->n)
        return gmm_error(GMM_EDIM, "laplace: Qbar is %zu x %zu, the latent %zu", Qbar->n,
                         Qbar->n, w->n);
    int same = Qbar->nnz == Q->nnz &&
               !memcmp(Qbar->colptr, Q->colptr, (Q->n + 1) * sizeof *Q->colptr) &&
               !memcmp(Qbar->rowind, Q->rowind, Q->nnz * sizeof *Q->rowind);
    size_t *pos = NULL;
    if (!same) {
        if (!(pos = gmm_malloc(Q->nnz ? Q->nnz : 1, sizeof *pos)))
            return gmm_error(GMM_ENOMEM, "laplace: out of memory for Qbar's positions");
        if ((st = qbar_positions(Q, Qbar, pos)))
            goto done;
    }
    if (w->logdet_here && (st = gmm_factor_selinv_sparse(w->fQs, w->SQs)))
        goto done;
    const double *x = w->x, *z = w->z;
    for (size_t j = 0; j < Q->n; j++)
        for (size_t p = Q->colptr[j]; p < Q->colptr[j + 1]; p++) {
            size_t i = Q->rowind[p];
            double g = -x[i] * x[j] - z[i] * x[j] - x[i] * z[j] - w->SP->val[w->qpos[p]];
            if (w->logdet_here)
                g += w->SQs->val[p];
            Qbar->val[same ? p : pos[p]] += i == j ? 0.5 * g : g;
        }
    st = GMM_OK;
done:
    gmm_free(pos);
    return st;
}

gmm_status gmm_laplace_grad_sparse(gmm_laplace *w, gmm_sparse *Qbar, double *bbar,
                                   double *parbar, double *coefbar, double *shiftbar)
{
    gmm_status st;
    if ((st = sparse_fit(w, "to differentiate")))
        return st;
    if (Qbar && Qbar->n != w->n)
        return gmm_error(GMM_EDIM, "laplace: Qbar is %zu x %zu, the latent %zu", Qbar->n,
                         Qbar->n, w->n);
    if ((st = gmm_factor_selinv_sparse(w->fP, w->SP)))
        return st;
    if (w->con)
        gmm_constr_sparse(w->con, w->SP);
    /* s_i, r = H'(s o t)/2, z = P^-1 r (Sigma_c under constraints) */
    if ((st = laplace_grad_z(w, &sparse_form)))
        return st;
    if (Qbar && (st = add_qbar(w, Qbar)))
        return st;
    laplace_grad_rows(w, &sparse_form, bbar, parbar, coefbar, shiftbar);
    return GMM_OK;
}

gmm_status gmm_laplace_posterior_sparse(gmm_laplace *w, double *mode, gmm_sparse *S)
{
    gmm_status st;
    if ((st = sparse_fit(w, "to read")))
        return st;
    if (S && S->n != w->n)
        return gmm_error(GMM_EDIM, "laplace: S is %zu x %zu, the latent %zu", S->n, S->n, w->n);
    if (mode)
        memcpy(mode, w->x, w->n * sizeof *mode);
    if (!S)
        return GMM_OK;
    if ((st = gmm_factor_selinv_sparse(w->fP, S)))
        return st;
    if (w->con)
        gmm_constr_sparse(w->con, S);
    return GMM_OK;
}

const gmm_factor *gmm_laplace_factor(const gmm_laplace *w)
{
    return w && w->known == LAPLACE_KNOWS_FIT && w->fP && !w->con ? w->fP : NULL;
}

/* d'Pd = d'Qd + sum_i w_i (h_i'd)^2 at the mode's weights (d: n). */
static double p_quad(gmm_laplace *w, const double *d)
{
    const gmm_obsmap *m = &w->obs->map;
    double q = 0.0;
    gmm_sparse_symv(w->Qs, d, w->xt);
    for (size_t j = 0; j < w->n; j++)
        q += d[j] * w->xt[j];
    for (size_t i = 0; i < m->nrows; i++) {
        double e = gmm_obsmap_row_dot(m, i, d);
        q += w->w[i] * e * e;
    }
    return q;
}

/* gmm_laplace_draw for the sparse form: x = x^ + L^-T z, and under
 * constraints the conditioned draw (constr.h, gmm_constr_draw) */
gmm_status laplace_sparse_draw(gmm_laplace *w, const double *z, double *x, double *logw)
{
    gmm_status st;
    double zz = 0.0;
    for (size_t j = 0; j < w->n; j++)
        zz += z[j] * z[j];
    if (x != z)
        memcpy(x, z, w->n * sizeof *x);
    if ((st = gmm_factor_solve_lt(w->fP, x)))
        return st;
    if (w->con)
        gmm_constr_draw(w->con, x);
    /* log p(y, x) - log q(y) - log q(x) = Psi(x) - Psi(x^) + d'Pd/2, d =
     * x - x^: z'z/2 without constraints, computed with them (d lies in the
     * subspace, where the determinants cancel as they do on the whole) */
    double dpd = zz;
    if (logw && w->con)
        dpd = p_quad(w, x);
    for (size_t j = 0; j < w->n; j++)
        x[j] += w->x[j];
    if (!logw)
        return GMM_OK;
    double sum = laplace_lik_value(w, x), qx = 0.0;
    gmm_sparse_symv(w->Qs, x, w->xt);
    for (size_t j = 0; j < w->n; j++)
        qx += x[j] * w->xt[j];
    *logw = sum - 0.5 * qx - w->psi + 0.5 * dpd;
    return GMM_OK;
}
