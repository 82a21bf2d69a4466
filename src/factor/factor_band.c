/* factor_band.c -- gmm_factor by the band Cholesky (band.h): L in LAPACK
 * band layout with Q's lower bandwidth, the blocked factorisation's panel
 * workspace sized once at allocation. */
#include "gmm/factor.h"

#include "gmm/alloc.h"
#include "factor_impl.h"

typedef struct {
    gmm_band *L;
    double *work;  /* gmm_band_chol_work_size(kl) */
    size_t *reach; /* n: gmm_band_tri_reach of L, when has_reach */
    int has_reach; /* set by set_chol; a decomp clears it (reach costs O(n kl)) */
} band_state;

static gmm_status band_decomp(void *state, const gmm_band *Q)
{
    band_state *s = state;
    if (Q->n != s->L->n || Q->kl != s->L->kl || Q->kind != GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "factor: Q is %zu x %zu with bandwidth %zu, the factor "
                                   "%zu with %zu",
                         Q->n, Q->n, Q->kl, s->L->n, s->L->kl);
    s->has_reach = 0;
    return gmm_band_chol_decomp_work(Q, s->L, s->work);
}

static gmm_status band_set_chol(void *state, const gmm_band *L)
{
    band_state *s = state;
    gmm_status st;
    s->has_reach = 0;
    if (L->n != s->L->n || L->kl != s->L->kl || L->kind != GMM_BAND_LOWER)
        return gmm_error(GMM_EDIM, "factor: L is %zu x %zu with bandwidth %zu, the factor "
                                   "%zu with %zu",
                         L->n, L->n, L->kl, s->L->n, s->L->kl);
    if ((st = gmm_band_copy(s->L, L)) || (st = gmm_band_tri_reach(s->L, s->reach)))
        return st;
    s->has_reach = 1;
    return GMM_OK;
}

static gmm_status band_mul_lt(const void *state, const double *x, double *y)
{
    const band_state *s = state;
    return gmm_band_gemv(GMM_TRANS, 1.0, s->L, x, 0.0, y);
}

static gmm_status band_solve_l(const void *state, double *x)
{
    const band_state *s = state;
    return s->has_reach ? gmm_band_tri_solve_vec_reach(s->L, s->reach, GMM_NOTRANS, x)
                        : gmm_band_tri_solve_vec(s->L, GMM_NOTRANS, x);
}

static gmm_status band_solve_lt(const void *state, double *x)
{
    const band_state *s = state;
    return s->has_reach ? gmm_band_tri_solve_vec_reach(s->L, s->reach, GMM_TRANS, x)
                        : gmm_band_tri_solve_vec(s->L, GMM_TRANS, x);
}

static double band_logdet(const void *state)
{
    const band_state *s = state;
    return gmm_band_chol_logdet(s->L);
}

static gmm_status band_selinv(const void *state, gmm_band *S)
{
    const band_state *s = state;
    return gmm_band_chol_selinv(s->L, S);
}

/* Stored (i, j) of the sparse matrix A as (row >= column) of the band, or
 * GMM_EDIM when it lies outside the factor's bandwidth. */
static gmm_status band_entries_fit(const gmm_sparse *A, size_t n, size_t kl, const char *what)
{
    if (A->n != n)
        return gmm_error(GMM_EDIM, "factor: %s is %zu x %zu, the factor %zu x %zu", what, A->n,
                         A->n, n, n);
    for (size_t j = 0; j < n; j++)
        for (size_t p = A->colptr[j]; p < A->colptr[j + 1]; p++)
            if (A->rowind[p] < j || A->rowind[p] - j > kl)
                return gmm_error_at(GMM_EDIM, p,
                                    "factor: %s's entry (%zu, %zu) is outside the factor's "
                                    "bandwidth %zu",
                                    what, A->rowind[p], j, kl);
    return GMM_OK;
}

/* S's entries from the band of Q^-1 (a scratch band: selected inverses on
 * a sparse pattern are rare on this factor, so it does not keep one). */
static gmm_status band_selinv_sparse(const void *state, gmm_sparse *S)
{
    const band_state *s = state;
    size_t n = s->L->n, kl = s->L->kl;
    gmm_status st = band_entries_fit(S, n, kl, "S");
    if (st)
        return st;
    gmm_band *B = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    if (!B)
        return gmm_error(GMM_ENOMEM, "factor: out of memory for the band of Q^-1");
    if (!(st = gmm_band_chol_selinv(s->L, B)))
        for (size_t j = 0; j < n; j++)
            for (size_t p = S->colptr[j]; p < S->colptr[j + 1]; p++)
                S->val[p] = gmm_band_get(B, S->rowind[p], j);
    gmm_band_free(B);
    return st;
}

/* Qbar += d<Sbar, S>/dQ through the band's own reverse modes: the band of
 * Q^-1 recomputed, Sbar scattered into a band (one stored entry, one
 * variable: the same convention), Takahashi's reverse, the Cholesky's, and
 * Qbar read back on its pattern. */
static gmm_status band_selinv_sparse_rev(const void *state, const gmm_sparse *S,
                                         const gmm_sparse *Sbar, gmm_sparse *Qbar)
{
    const band_state *s = state;
    size_t n = s->L->n, kl = s->L->kl;
    gmm_status st;
    (void)S;
    if ((st = band_entries_fit(Sbar, n, kl, "Sbar")) || (st = band_entries_fit(Qbar, n, kl, "Qbar")))
        return st;
    gmm_band *B = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Bbar = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Lbar = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
    if (!B || !Bbar || !Lbar) {
        st = gmm_error(GMM_ENOMEM, "factor: out of memory for the band reverse modes");
        goto done;
    }
    gmm_band_set_zero(Bbar);
    gmm_band_set_zero(Lbar);
    for (size_t j = 0; j < n; j++)
        for (size_t p = Sbar->colptr[j]; p < Sbar->colptr[j + 1]; p++)
            *gmm_band_ptr(Bbar, Sbar->rowind[p], j) += Sbar->val[p];
    if ((st = gmm_band_chol_selinv(s->L, B)) ||
        (st = gmm_band_chol_selinv_rev(s->L, B, Bbar, Lbar)))
        goto done;
    /* Bbar, spent, receives Qbar's band */
    gmm_band_set_zero(Bbar);
    if ((st = gmm_band_chol_decomp_rev_work(s->L, Lbar, Bbar, s->work)))
        goto done;
    for (size_t j = 0; j < n; j++)
        for (size_t p = Qbar->colptr[j]; p < Qbar->colptr[j + 1]; p++)
            Qbar->val[p] += gmm_band_get(Bbar, Qbar->rowind[p], j);
done:
    gmm_band_free(B);
    gmm_band_free(Bbar);
    gmm_band_free(Lbar);
    return st;
}

/* Flops: sum_j c_j^2 over the columns' counts c_j = min(kl + 1, n - j)
 * (CHOLMOD's measure of a simplicial LL', Common->fl, so the two compare):
 * (n - kl)(kl + 1)^2 + kl (kl + 1)(2 kl + 1) / 6 for n > kl, ~ n kl^2.
 * Bytes: the n (kl + 1) doubles of L's band. */
static void band_cost(const void *state, double *flops, double *bytes)
{
    const band_state *s = state;
    double n = (double)s->L->n, kl = (double)s->L->kl;
    if (kl >= n) /* a dense factor: counts n, n - 1, ..., 1 */
        kl = n > 0 ? n - 1 : 0;
    *flops = (n - kl) * (kl + 1) * (kl + 1) + kl * (kl + 1) * (2 * kl + 1) / 6;
    *bytes = n * (kl + 1) * sizeof(double);
}

static double band_nnz(const void *state)
{
    const band_state *s = state;
    double n = (double)s->L->n, kl = (double)s->L->kl;
    return n * (kl + 1) - kl * (kl + 1) / 2;
}

static const char *band_ordering(const void *state)
{
    (void)state;
    return "RCM band";
}

static const gmm_band *band_chol(const void *state)
{
    const band_state *s = state;
    return s->L;
}

static void band_free(void *state)
{
    band_state *s = state;
    if (!s)
        return;
    gmm_band_free(s->L);
    gmm_free(s->work);
    gmm_free(s->reach);
    gmm_free(s);
}

static const factor_type band_type = {
    .name = "band",
    .decomp = band_decomp,
    .set_chol = band_set_chol,
    .mul_lt = band_mul_lt,
    .solve_l = band_solve_l,
    .solve_lt = band_solve_lt,
    .logdet = band_logdet,
    .selinv = band_selinv,
    .selinv_sparse = band_selinv_sparse,
    .selinv_sparse_rev = band_selinv_sparse_rev,
    .cost = band_cost,
    .nnz = band_nnz,
    .ordering = band_ordering,
    .band_chol = band_chol,
    .free = band_free,
};

gmm_factor *gmm_factor_band_alloc(size_t n, size_t kl)
{
    gmm_factor *f = gmm_calloc(1, sizeof *f);
    band_state *s = gmm_calloc(1, sizeof *s);
    if (s) {
        s->L = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
        s->work = gmm_malloc(gmm_band_chol_work_size(kl) + 1, sizeof *s->work);
        s->reach = gmm_malloc(n ? n : 1, sizeof *s->reach);
    }
    if (!f || !s || !s->L || !s->work || !s->reach) {
        band_free(s);
        gmm_free(f);
        gmm_error(GMM_ENOMEM, "factor: out of memory for %zu x %zu with bandwidth %zu", n, n,
                  kl);
        return NULL;
    }
    f->type = &band_type;
    f->state = s;
    f->n = n;
    return f;
}
