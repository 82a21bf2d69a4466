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
