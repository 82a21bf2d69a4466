/* factor_sparse.c -- gmm_factor by CHOLMOD's sparse Cholesky (SuiteSparse,
 * the SuiteSparse_long interface cholmod_l_*): the pattern analysed once
 * (fill-reducing ordering, elimination tree, supernodes), the values
 * factored at every evaluation into the same L.
 *
 * CHOLMOD factors P Q P^T = L_c L_c^T.  The factor's L (factor.h) is
 * L = P^T L_c, so Q = L L^T keeps its meaning and
 *
 *     solve_l:   x <- L^-1 x   = L_c^-1 P x
 *     solve_lt:  x <- L^-T x   = P^T L_c^-T x
 *     mul_lt:    y  = L^T x    = L_c^T P x
 *     logdet:    log|Q| = 2 sum_j log L_c(j, j).
 *
 * Ordering: AMD, and METIS's nested dissection as well when AMD's
 * factorisation is predicted to cost over ORDER_METIS_FLOPS, the one with
 * fewer flops kept.  METIS finds less fill on 2-D lattices (a 1000 x 1000
 * grid: 3.4e7 nonzeros in L against AMD's 4.5e7, 4.8 s a factorisation
 * against 6.6 s) but its analysis costs several of AMD's (6.1 s against
 * 1.6 s there; 0.49 s against 0.13 s at 300 x 300, where the factorisation
 * takes 0.1 s): it pays back only where one factorisation is dear.  A
 * model analyses up to four patterns, often one pattern four times (the
 * ANALYSIS MEMO below keeps the analysis made first).  CHOLMOD's own NESDIS found no less fill than METIS on the
 * lattices and cost as much again.
 * Supernodal or simplicial is CHOLMOD's choice (CHOLMOD_AUTO: supernodal
 * when the flops per nonzero of L reach 40); either is kept as LL^T
 * (final_ll), so the solves and the selected inverse read one layout.
 *
 * CHOLMOD never prints here (Common->print = 0, no error handler); its
 * status becomes a gmm_status with a message.  A solve writes the factor's
 * own workspace (cholmod_l_solve2's X, Y, E, allocated by the first solve
 * and reused): one factor serves one thread at a time. */
#include "gmm/factor.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"
#include "factor_impl.h"
#include "factor_sparse_impl.h"

/* CHOLMOD's status after a call, as a gmm_status with a message. */
static gmm_status cholmod_failure(const cholmod_common *c, const char *what)
{
    switch (c->status) {
    case CHOLMOD_OUT_OF_MEMORY:
    case CHOLMOD_TOO_LARGE:
        return gmm_error(GMM_ENOMEM, "sparse factor: out of memory in the %s", what);
    case CHOLMOD_NOT_INSTALLED:
        return gmm_error(GMM_EINVAL, "sparse factor: the %s needs a CHOLMOD module not "
                                     "installed",
                         what);
    default:
        return gmm_error(GMM_EDOM, "sparse factor: the %s failed (CHOLMOD status %d)", what,
                         c->status);
    }
}

/* Q's pattern well formed (sparse.h): each column's rows ascending from
 * its diagonal, below n. */
static gmm_status pattern_check(const gmm_sparse *A)
{
    for (size_t j = 0; j < A->n; j++) {
        size_t p0 = A->colptr[j], p1 = A->colptr[j + 1];
        if (p1 <= p0 || p1 > A->nnz || A->rowind[p0] != j)
            return gmm_error_at(GMM_EINVAL, j, "sparse factor: column %zu does not start at "
                                               "its diagonal",
                                j);
        for (size_t p = p0 + 1; p < p1; p++)
            if (A->rowind[p] <= A->rowind[p - 1] || A->rowind[p] >= A->n)
                return gmm_error_at(GMM_EINVAL, j, "sparse factor: column %zu's rows are not "
                                                   "ascending below %zu",
                                    j, A->n);
    }
    return GMM_OK;
}

static void sparse_free(void *state)
{
    sparse_state *s = state;
    if (!s)
        return;
    cholmod_l_free_sparse(&s->A, &s->c);
    cholmod_l_free_sparse(&s->S, &s->c);
    gmm_free(s->smap);
    cholmod_l_free_factor(&s->L, &s->c);
    cholmod_l_free_dense(&s->B, &s->c);
    cholmod_l_free_dense(&s->X, &s->c);
    cholmod_l_free_dense(&s->Y, &s->c);
    cholmod_l_free_dense(&s->E, &s->c);
    cholmod_l_free_dense(&s->Bm, &s->c);
    cholmod_l_free_dense(&s->Xm, &s->c);
    cholmod_l_free_dense(&s->Ym, &s->c);
    cholmod_l_free_dense(&s->Em, &s->c);
    cholmod_l_finish(&s->c);
    gmm_free(s->colsup);
    gmm_free(s->pinv);
    gmm_free(s->mark);
    gmm_free(s->z);
    gmm_free(s->sigma);
    gmm_free(s->rev);
    gmm_free(s);
}

/* PERMUTED ONCE.  cholmod_l_factorize permutes a lower Q into L's order
 * by two transposes at every call (tril(P Q P') is what the supernodal
 * factorisation reads): 5% of a lattice loglik.  That matrix is made once,
 * on the first factorisation (an analysis made for a cost estimate makes
 * none), its values numbering Q's entries, and where each came from is
 * kept; a factorisation then gathers Q's values into it and calls the
 * supernodal numeric factorisation itself. */
static gmm_status permuted_lower(sparse_state *s)
{
    size_t nnz = s->A->nzmax;
    double *x = s->A->x;
    for (size_t p = 0; p < nnz; p++)
        x[p] = (double)p; /* exact below 2^53 */
    cholmod_sparse *U = cholmod_l_ptranspose(s->A, 2, s->L->Perm, NULL, 0, &s->c);
    s->S = U ? cholmod_l_ptranspose(U, 2, NULL, NULL, 0, &s->c) : NULL;
    cholmod_l_free_sparse(&U, &s->c);
    memset(x, 0, nnz * sizeof *x);
    if (!s->S)
        return cholmod_failure(&s->c, "analysis");
    const SuiteSparse_long *Sp = s->S->p;
    if (!s->S->packed || (size_t)Sp[s->n] != nnz || s->S->stype >= 0)
        return gmm_error(GMM_EINVAL, "sparse factor: the permuted matrix has %zu entries, "
                                     "Q %zu",
                         (size_t)Sp[s->n], nnz);
    if (!(s->smap = gmm_malloc(nnz ? nnz : 1, sizeof *s->smap)))
        return gmm_error(GMM_ENOMEM, "sparse factor: out of memory for %zu entries", nnz);
    const double *sx = s->S->x;
    for (size_t t = 0; t < nnz; t++)
        s->smap[t] = (size_t)sx[t];
    return GMM_OK;
}

static gmm_status sparse_decomp(void *state, const gmm_sparse *Q)
{
    sparse_state *s = state;
    const SuiteSparse_long *Ap = s->A->p, *Ai = s->A->i;
    int same = Q->n == s->n && Q->nnz == s->A->nzmax;
    for (size_t j = 0; same && j <= s->n; j++)
        same = Q->colptr[j] == (size_t)Ap[j];
    for (size_t p = 0; same && p < Q->nnz; p++)
        same = Q->rowind[p] == (size_t)Ai[p];
    if (!same)
        return gmm_error(GMM_EDIM, "sparse factor: Q (%zu x %zu, %zu entries) has another "
                                   "pattern than the factor's (%zu x %zu, %zu entries)",
                         Q->n, Q->n, Q->nnz, s->n, s->n, (size_t)s->A->nzmax);
    s->has_sigma = 0;
    int ok;
    gmm_status st;
    if (s->L->is_super && !s->S && (st = permuted_lower(s)))
        return st;
    gmm_factor_impl_sparse_serial_begin();
    if (s->S) { /* PERMUTED ONCE */
        double *Sx = s->S->x, beta[2] = {0.0, 0.0};
        size_t nnz = Q->nnz;
        for (size_t t = 0; t < nnz; t++)
            Sx[t] = Q->val[s->smap[t]];
        s->c.status = CHOLMOD_OK;
        ok = cholmod_l_allocate_work(s->n, 2 * s->n + 2 * s->L->nsuper, 0, &s->c) &&
             cholmod_l_super_numeric(s->S, NULL, beta, s->L, &s->c);
    } else {
        memcpy(s->A->x, Q->val, Q->nnz * sizeof *Q->val);
        ok = cholmod_l_factorize(s->A, s->L, &s->c);
    }
    gmm_factor_impl_sparse_serial_end();
    if (!ok || s->c.status < CHOLMOD_OK)
        return cholmod_failure(&s->c, "factorisation");
    size_t k = s->L->minor < s->n ? s->L->minor : s->n;
    /* a NaN or an infinity in Q reaches the diagonal of its row's column,
     * and CHOLMOD's simplicial path lets a NaN pivot pass */
    const double *Lx = s->L->x;
    for (size_t j = 0; k == s->n && j < s->n; j++) {
        const SuiteSparse_long *rows;
        size_t off;
        lcol(s, j, &rows, &off);
        if (!(Lx[off] > 0.0 && isfinite(Lx[off])))
            k = j;
    }
    if (s->c.status == CHOLMOD_NOT_POSDEF || k < s->n) {
        k = k < s->n ? k : 0;
        size_t i = (size_t)((const SuiteSparse_long *)s->L->Perm)[k];
        return gmm_error_at(GMM_ENOTPD, i, "sparse factor: Q is not positive definite (the "
                                           "pivot of row %zu)",
                            i);
    }
    return GMM_OK;
}

/* x <- L_c^-1 (sys CHOLMOD_L) or L_c^-T (CHOLMOD_Lt) of the right-hand
 * side in s->B, into s->X. */
static gmm_status tri_solve(sparse_state *s, int sys)
{
    gmm_factor_impl_sparse_serial_begin();
    int ok = cholmod_l_solve2(sys, s->L, s->B, NULL, &s->X, NULL, &s->Y, &s->E, &s->c);
    gmm_factor_impl_sparse_serial_end();
    if (!ok)
        return cholmod_failure(&s->c, "triangular solve");
    return GMM_OK;
}

/* The solves' workspace lives in the state behind a const pointer (the
 * interface's solves read the factor; they write only scratch). */
static gmm_status sparse_solve_l(const void *state, double *x)
{
    sparse_state *s = (sparse_state *)state;
    const SuiteSparse_long *Perm = s->L->Perm;
    double *b = s->B->x;
    for (size_t k = 0; k < s->n; k++)
        b[k] = x[Perm[k]];
    gmm_status st = tri_solve(s, CHOLMOD_L);
    if (!st)
        memcpy(x, s->X->x, s->n * sizeof *x);
    return st;
}

static gmm_status sparse_solve_lt(const void *state, double *x)
{
    sparse_state *s = (sparse_state *)state;
    const SuiteSparse_long *Perm = s->L->Perm;
    memcpy(s->B->x, x, s->n * sizeof *x);
    gmm_status st = tri_solve(s, CHOLMOD_Lt);
    if (!st) {
        const double *y = s->X->x;
        for (size_t k = 0; k < s->n; k++)
            x[Perm[k]] = y[k];
    }
    return st;
}

/* X <- Q^-1 X, ncol columns at once: CHOLMOD's whole solve (sys
 * CHOLMOD_A: P^T L_c^-T L_c^-1 P) of a block, whose supernodal form reads
 * each supernode of L once for all columns (dtrsm and dgemm where one
 * column takes dtrsv and dgemv). */
static gmm_status sparse_solve_many(const void *state, double *X, size_t ncol)
{
    sparse_state *s = (sparse_state *)state;
    size_t n = s->n;
    /* Bm keeps the most columns asked for: a Newton step's block and the
     * constraints' alone alternate */
    if (!s->Bm || s->Bm->nzmax < n * ncol) {
        cholmod_l_free_dense(&s->Bm, &s->c);
        if (!(s->Bm = cholmod_l_allocate_dense(n, ncol, n, CHOLMOD_REAL, &s->c)))
            return cholmod_failure(&s->c, "triangular solve");
    }
    s->Bm->ncol = ncol;
    memcpy(s->Bm->x, X, n * ncol * sizeof *X);
    gmm_factor_impl_sparse_serial_begin();
    int ok = cholmod_l_solve2(CHOLMOD_A, s->L, s->Bm, NULL, &s->Xm, NULL, &s->Ym, &s->Em, &s->c);
    gmm_factor_impl_sparse_serial_end();
    if (!ok)
        return cholmod_failure(&s->c, "triangular solve");
    memcpy(X, s->Xm->x, n * ncol * sizeof *X);
    return GMM_OK;
}

static gmm_status sparse_mul_lt(const void *state, const double *x, double *y)
{
    const sparse_state *s = state;
    const SuiteSparse_long *Perm = s->L->Perm;
    const double *Lx = s->L->x;
    for (size_t j = 0; j < s->n; j++) {
        const SuiteSparse_long *rows;
        size_t off, m = lcol(s, j, &rows, &off);
        double t = 0.0;
        for (size_t a = 0; a < m; a++)
            t += Lx[off + a] * x[Perm[rows[a]]];
        y[j] = t;
    }
    return GMM_OK;
}

static double sparse_logdet(const void *state)
{
    const sparse_state *s = state;
    const double *Lx = s->L->x;
    double t = 0.0;
    if (!Lx || s->L->minor < s->n) /* no factorisation yet, or a failed one */
        return NAN;
    for (size_t j = 0; j < s->n; j++) {
        const SuiteSparse_long *rows;
        size_t off;
        lcol(s, j, &rows, &off);
        t += log(Lx[off]);
    }
    return 2.0 * t;
}

static void sparse_cost(const void *state, double *flops, double *bytes)
{
    const sparse_state *s = state;
    *flops = s->fl;
    /* supernodal: the blocks' values and the supernodes' row indices;
     * simplicial: a value and a row index per nonzero */
    *bytes = s->L->is_super ? (double)(s->L->xsize + s->L->ssize) * 8.0 : s->lnz * 16.0;
}

static double sparse_nnz(const void *state)
{
    const sparse_state *s = state;
    return s->lnz;
}

static const char *sparse_ordering(const void *state)
{
    const sparse_state *s = state;
    switch (s->L->ordering) {
    case CHOLMOD_NATURAL:
        return "natural";
    case CHOLMOD_AMD:
        return "AMD";
    case CHOLMOD_METIS:
        return "METIS";
    case CHOLMOD_NESDIS:
        return "NESDIS";
    case CHOLMOD_POSTORDERED:
        return "natural (postordered)";
    default:
        return "other";
    }
}

static const factor_type sparse_type = {
    .name = "sparse",
    .decomp_sparse = sparse_decomp,
    .mul_lt = sparse_mul_lt,
    .solve_l = sparse_solve_l,
    .solve_lt = sparse_solve_lt,
    .solve_many = sparse_solve_many,
    .logdet = sparse_logdet,
    .selinv_sparse = gmm_factor_impl_sparse_selinv,
    .selinv_sparse_rev = gmm_factor_impl_sparse_selinv_rev,
    .cost = sparse_cost,
    .nnz = sparse_nnz,
    .ordering = sparse_ordering,
    .band_chol = NULL,
    .free = sparse_free,
};

/* Above this many predicted flops of AMD's factor, METIS is tried too. */
#define ORDER_METIS_FLOPS 1e9

/* Options: one ordering (AMD; sparse_analyse may try METIS), LL^T kept,
 * quiet. */
static void sparse_options(cholmod_common *c)
{
    c->print = 0;
    c->error_handler = NULL;
    c->nmethods = 1;
    c->method[0].ordering = CHOLMOD_AMD;
    c->postorder = 1;
    c->supernodal = CHOLMOD_AUTO;
    c->final_asis = 0; /* so that final_ll applies */
    c->final_super = 1;
    c->final_ll = 1;
    c->final_pack = 1;
    c->final_monotonic = 1;
    c->final_resymbol = 0;
    /* a line search probes indefinite Q: stop at the failing supernode */
    c->quick_return_if_not_posdef = 1;
}

/* ANALYSIS MEMO.  One model analyses the same pattern up to four times
 * (the besag scaling, the chooser's estimate, the constrained prior, the
 * posterior: all the graph's pattern on a lattice with one count per
 * node), each an ordering (AMD 0.1 s at 300 x 300; METIS 6 s at 1000 x
 * 1000) and a symbolic factorisation.  The last pattern's symbolic factor
 * (the ordering chosen and L's structure, a few bytes per row of L's
 * supernodes) is kept with a copy of the pattern, and an analysis of the
 * same pattern (its hash first, then every entry compared: a factor made
 * for another pattern would drop entries without a word) copies it.
 * Process-wide, under a lock; dropped, not fatal, when out of memory. */
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static cholmod_common memo_c; /* the kept copy's allocations */
static struct {
    int started;
    uint64_t key;
    size_t n, nnz;
    size_t *colptr, *rowind; /* the pattern's copy */
    double fl, lnz;
    cholmod_factor *L; /* symbolic; NULL: nothing kept */
} memo;

static uint64_t pattern_key(const gmm_sparse *A)
{
    uint64_t h = 1469598103934665603u ^ A->n; /* FNV-1a */
    for (size_t j = 0; j <= A->n; j++)
        h = (h ^ A->colptr[j]) * 1099511628211u;
    for (size_t p = 0; p < A->nnz; p++)
        h = (h ^ A->rowind[p]) * 1099511628211u;
    return h;
}

/* A copy of the kept analysis of A's pattern made in s (s->L, s->fl,
 * s->lnz); 0 when there is none (or no memory for the copy). */
static int memo_get(sparse_state *s, uint64_t key, const gmm_sparse *A)
{
    pthread_mutex_lock(&memo_lock);
    int hit = memo.L && memo.key == key && memo.n == A->n && memo.nnz == A->nnz &&
              !memcmp(memo.colptr, A->colptr, (A->n + 1) * sizeof *A->colptr) &&
              !memcmp(memo.rowind, A->rowind, A->nnz * sizeof *A->rowind) &&
              (s->L = cholmod_l_copy_factor(memo.L, &s->c)) != NULL;
    if (hit) {
        s->fl = memo.fl;
        s->lnz = memo.lnz;
    }
    s->c.status = CHOLMOD_OK;
    pthread_mutex_unlock(&memo_lock);
    return hit;
}

static void memo_put(const sparse_state *s, uint64_t key, const gmm_sparse *A)
{
    pthread_mutex_lock(&memo_lock);
    if (!memo.started) {
        cholmod_l_start(&memo_c);
        memo_c.print = 0;
        memo_c.error_handler = NULL;
        memo.started = 1;
    }
    cholmod_l_free_factor(&memo.L, &memo_c);
    gmm_free(memo.colptr);
    gmm_free(memo.rowind);
    memo.colptr = gmm_malloc(A->n + 1, sizeof *memo.colptr);
    memo.rowind = gmm_malloc(A->nnz ? A->nnz : 1, sizeof *memo.rowind);
    if (memo.colptr && memo.rowind) {
        memcpy(memo.colptr, A->colptr, (A->n + 1) * sizeof *A->colptr);
        memcpy(memo.rowind, A->rowind, A->nnz * sizeof *A->rowind);
        memo.L = cholmod_l_copy_factor(s->L, &memo_c);
    }
    memo_c.status = CHOLMOD_OK;
    memo.key = key;
    memo.n = A->n;
    memo.nnz = A->nnz;
    memo.fl = s->fl;
    memo.lnz = s->lnz;
    pthread_mutex_unlock(&memo_lock);
}

/* The analysis of A's pattern into s: L symbolic, the column-to-supernode
 * map, the inverse permutation. */
static gmm_status sparse_analyse(sparse_state *s, const gmm_sparse *A)
{
    size_t n = A->n;
    s->A = cholmod_l_allocate_sparse(n, n, A->nnz, 1, 1, -1, CHOLMOD_REAL, &s->c);
    if (!s->A)
        return cholmod_failure(&s->c, "analysis");
    SuiteSparse_long *Ap = s->A->p, *Ai = s->A->i;
    for (size_t j = 0; j <= n; j++)
        Ap[j] = (SuiteSparse_long)A->colptr[j];
    for (size_t p = 0; p < A->nnz; p++)
        Ai[p] = (SuiteSparse_long)A->rowind[p];
    memset(s->A->x, 0, A->nnz * sizeof(double));
    uint64_t key = pattern_key(A);
    int kept = memo_get(s, key, A);
    if (!kept) {
        if (!(s->L = cholmod_l_analyze(s->A, &s->c)))
            return cholmod_failure(&s->c, "analysis");
        s->fl = s->c.fl;
        s->lnz = s->c.lnz;
    }
    if (!kept && s->fl > ORDER_METIS_FLOPS) {
        s->c.method[0].ordering = CHOLMOD_METIS;
        cholmod_factor *M = cholmod_l_analyze(s->A, &s->c);
        if (M && s->c.fl < s->fl) {
            cholmod_l_free_factor(&s->L, &s->c);
            s->L = M;
            s->fl = s->c.fl;
            s->lnz = s->c.lnz;
        } else if (M) {
            cholmod_l_free_factor(&M, &s->c);
        } else if (s->c.status == CHOLMOD_OUT_OF_MEMORY) {
            return cholmod_failure(&s->c, "analysis");
        }
        s->c.status = CHOLMOD_OK; /* METIS failing leaves AMD's analysis */
    }
    if (!kept)
        memo_put(s, key, A);
    /* L's values allocated now, untouched, so that they can be advised
     * huge pages before the first factorisation writes them */
    if (s->L->is_super) {
        if (!cholmod_l_change_factor(CHOLMOD_REAL, 1, 1, 1, 1, s->L, &s->c))
            return cholmod_failure(&s->c, "analysis");
        gmm_advise_huge(s->L->x, s->L->xsize * sizeof(double));
    }
    s->B = cholmod_l_allocate_dense(n, 1, n, CHOLMOD_REAL, &s->c);
    if (!s->B)
        return cholmod_failure(&s->c, "analysis");
    s->pinv = gmm_malloc(n, sizeof *s->pinv);
    s->mark = gmm_malloc(n, sizeof *s->mark);
    s->z = gmm_malloc(n, sizeof *s->z);
    if (s->L->is_super)
        s->colsup = gmm_malloc(n, sizeof *s->colsup);
    if (!s->pinv || !s->mark || !s->z || (s->L->is_super && !s->colsup))
        return gmm_error(GMM_ENOMEM, "sparse factor: out of memory for %zu x %zu", n, n);
    const SuiteSparse_long *Perm = s->L->Perm;
    for (size_t k = 0; k < n; k++) {
        s->pinv[Perm[k]] = (SuiteSparse_long)k;
        s->mark[k] = -1;
    }
    if (s->L->is_super) {
        const SuiteSparse_long *super = s->L->super;
        for (size_t k = 0; k < s->L->nsuper; k++)
            for (SuiteSparse_long j = super[k]; j < super[k + 1]; j++)
                s->colsup[j] = (SuiteSparse_long)k;
    }
    return GMM_OK;
}

gmm_factor *gmm_factor_sparse_alloc(const gmm_sparse *A)
{
    if (!A) {
        gmm_error(GMM_EINVAL, "gmm_factor_sparse_alloc: NULL argument");
        return NULL;
    }
    if (pattern_check(A))
        return NULL;
    gmm_factor *f = gmm_calloc(1, sizeof *f);
    sparse_state *s = gmm_calloc(1, sizeof *s);
    if (!f || !s) {
        gmm_free(f);
        gmm_free(s);
        gmm_error(GMM_ENOMEM, "sparse factor: out of memory for %zu x %zu", A->n, A->n);
        return NULL;
    }
    s->n = A->n;
    if (!cholmod_l_start(&s->c)) {
        gmm_free(f);
        gmm_free(s);
        gmm_error(GMM_ENOMEM, "sparse factor: CHOLMOD could not start");
        return NULL;
    }
    sparse_options(&s->c);
    if (sparse_analyse(s, A)) {
        sparse_free(s);
        gmm_free(f);
        return NULL;
    }
    f->type = &sparse_type;
    f->state = s;
    f->n = A->n;
    return f;
}
