/* factor.c -- gmm_factor's dispatch to its implementation (factor.h). */
#include "gmm/factor.h"

#include "gmm/alloc.h"
#include "factor_impl.h"

void gmm_factor_free(gmm_factor *f)
{
    if (!f)
        return;
    if (f->type)
        f->type->free(f->state);
    gmm_free(f);
}

const char *gmm_factor_name(const gmm_factor *f) { return f->type->name; }
size_t gmm_factor_dim(const gmm_factor *f) { return f->n; }

/* The analysis' choice of ordering ("RCM band" for the band factor). */
const char *gmm_factor_ordering(const gmm_factor *f) { return f->type->ordering(f->state); }

void gmm_factor_cost(const gmm_factor *f, double *flops, double *bytes)
{
    double fl = 0.0, by = 0.0;
    if (f)
        f->type->cost(f->state, &fl, &by);
    if (flops)
        *flops = fl;
    if (bytes)
        *bytes = by;
}

double gmm_factor_nnz(const gmm_factor *f) { return f->type->nnz(f->state); }

/* A new factor from M by one of the type's two ways; ready only if it took. */
static gmm_status refactor(gmm_factor *f, const gmm_band *M,
                           gmm_status (*way)(void *state, const gmm_band *M), const char *who)
{
    if (!f || !M)
        return gmm_error(GMM_EINVAL, "%s: NULL argument", who);
    f->ready = 0;
    if (!way)
        return gmm_error(GMM_EINVAL, "%s: a band matrix for the %s factor", who,
                         f->type->name);
    gmm_status st = way(f->state, M);
    f->ready = st == GMM_OK;
    return st;
}

gmm_status gmm_factor_decomp(gmm_factor *f, const gmm_band *Q)
{
    return refactor(f, Q, f ? f->type->decomp : NULL, "gmm_factor_decomp");
}

gmm_status gmm_factor_decomp_sparse(gmm_factor *f, const gmm_sparse *Q)
{
    if (!f || !Q)
        return gmm_error(GMM_EINVAL, "gmm_factor_decomp_sparse: NULL argument");
    f->ready = 0;
    if (!f->type->decomp_sparse)
        return gmm_error(GMM_EINVAL, "gmm_factor_decomp_sparse: a sparse matrix for the %s "
                                     "factor",
                         f->type->name);
    gmm_status st = f->type->decomp_sparse(f->state, Q);
    f->ready = st == GMM_OK;
    return st;
}

gmm_status gmm_factor_set_chol(gmm_factor *f, const gmm_band *L)
{
    return refactor(f, L, f ? f->type->set_chol : NULL, "gmm_factor_set_chol");
}

static gmm_status not_ready(const gmm_factor *f, const void *arg, const char *who)
{
    if (!f || !arg)
        return gmm_error(GMM_EINVAL, "%s: NULL argument", who);
    if (!f->ready)
        return gmm_error(GMM_EINVAL, "%s: no factorisation", who);
    return GMM_OK;
}

gmm_status gmm_factor_solve_l(const gmm_factor *f, double *x)
{
    gmm_status st = not_ready(f, x, "gmm_factor_solve_l");
    return st ? st : f->type->solve_l(f->state, x);
}

gmm_status gmm_factor_solve_lt(const gmm_factor *f, double *x)
{
    gmm_status st = not_ready(f, x, "gmm_factor_solve_lt");
    return st ? st : f->type->solve_lt(f->state, x);
}

gmm_status gmm_factor_solve(const gmm_factor *f, double *x)
{
    gmm_status st = not_ready(f, x, "gmm_factor_solve");
    if (!st)
        st = f->type->solve_l(f->state, x);
    return st ? st : f->type->solve_lt(f->state, x);
}

gmm_status gmm_factor_solve_many(const gmm_factor *f, double *X, size_t ncol)
{
    gmm_status st = not_ready(f, X, "gmm_factor_solve_many");
    if (st || ncol == 0)
        return st;
    if (f->type->solve_many && ncol > 1)
        return f->type->solve_many(f->state, X, ncol);
    for (size_t c = 0; c < ncol && !st; c++)
        st = gmm_factor_solve(f, X + c * f->n);
    return st;
}

gmm_status gmm_factor_mul_lt(const gmm_factor *f, const double *x, double *y)
{
    gmm_status st = not_ready(f, x && y ? x : NULL, "gmm_factor_mul_lt");
    return st ? st : f->type->mul_lt(f->state, x, y);
}

double gmm_factor_logdet(const gmm_factor *f) { return f->type->logdet(f->state); }

gmm_status gmm_factor_selinv(const gmm_factor *f, gmm_band *S)
{
    gmm_status st = not_ready(f, S, "gmm_factor_selinv");
    if (!st && !f->type->selinv)
        st = gmm_error(GMM_EINVAL, "gmm_factor_selinv: a band matrix for the %s factor",
                       f->type->name);
    return st ? st : f->type->selinv(f->state, S);
}

gmm_status gmm_factor_selinv_sparse(const gmm_factor *f, gmm_sparse *S)
{
    gmm_status st = not_ready(f, S, "gmm_factor_selinv_sparse");
    return st ? st : f->type->selinv_sparse(f->state, S);
}

gmm_status gmm_factor_selinv_sparse_rev(const gmm_factor *f, const gmm_sparse *S,
                                        const gmm_sparse *Sbar, gmm_sparse *Qbar)
{
    gmm_status st = not_ready(f, S && Sbar && Qbar ? S : NULL, "gmm_factor_selinv_sparse_rev");
    if (!st && !f->type->selinv_sparse_rev)
        st = gmm_error(GMM_EINVAL, "gmm_factor_selinv_sparse_rev: not available for the %s "
                                   "factor",
                       f->type->name);
    return st ? st : f->type->selinv_sparse_rev(f->state, S, Sbar, Qbar);
}

const gmm_band *gmm_factor_band_chol(const gmm_factor *f)
{
    return f && f->ready && f->type->band_chol ? f->type->band_chol(f->state) : NULL;
}
