/* factor_sparse_super.c -- the selected inverse and its reverse mode by
 * supernodes, for a supernodal L: the recurrences of
 * factor_sparse_selinv.c and factor_sparse_selinv_rev.c taken a block of
 * columns at a time, so that their work is dense BLAS 3 on the
 * supernodes' blocks (as the factorisation's is) instead of one column's
 * scattered sums.
 *
 * A supernode has columns J (nc of them) and rows J then R (nr rows below
 * J, ascending); its block of L is [L_JJ; L_RJ] (column-major, leading
 * dimension nc + nr), and sigma and the adjoints share the layout.  Every
 * (r, r') in R x R lies in L's pattern (the rows of a column form a clique
 * in the later columns), so Sigma_RR can be gathered from later columns.
 *
 * Forward (supernodes from the last): the block rows J of L^T Sigma =
 * L^-1 read at columns R and J give, with T = L_RJ L_JJ^-1,
 *
 *     Sigma_RJ = -Sigma_RR T
 *     Sigma_JJ = L_JJ^-T (L_JJ^-1 - L_RJ^T Sigma_RJ).
 *
 * Reverse of Takahashi (supernodes from the first; the adjoints of J's
 * entries are then complete).  With G the symmetric matrix Sbar_JJ stands
 * for (G(i,i) = Sbar(i,i), G(i,j) = G(j,i) = Sbar(i,j)/2), F = Sbar_RJ,
 * Sigma_JJ = (L_JJ L_JJ^T)^-1 + T^T Sigma_RR T and Sigma_RJ = -Sigma_RR T:
 *
 *     P = T G - F,  Tbar = Sigma_RR (2 T G - F) = Sigma_RR (2 P + F)
 *     Sigmabar_RR (stored) += H(r,r') + H(r',r), H(r,r) on the diagonal, H = P T^T
 *     X = Tbar L_JJ^-T:  Lbar_RJ += X
 *     Lbar_JJ += lower(-T^T X - 2 L_JJ^-T L_JJ^-1 G L_JJ^-T)
 *
 * (the last term from d(L L^T)^-1 = -A^-1 (dL L^T + L dL^T) A^-1).
 *
 * Reverse of the Cholesky (supernodes from the last), right-looking form:
 * L_JJ = chol(A_JJ), L_RJ = A_RJ L_JJ^-T, then A_RR -= L_RJ L_RJ^T.
 * Undone in the opposite order:
 *
 *     Lbar_RJ -= M L_RJ,  M = Abar_RR as a symmetric matrix, diagonal doubled
 *     X = Lbar_RJ L_JJ^-1:  Abar_RJ += X,  Lbar_JJ += lower(-X^T L_RJ)
 *     K = sym(Phi(L_JJ^T Lbar_JJ)),  S = L_JJ^-T K L_JJ^-1:
 *         Abar_JJ (stored) += S(i,j) + S(j,i), S(i,i) on the diagonal
 *
 * (Phi: the lower triangle, diagonal halved; Murray 2016, eq. 10, whose S
 * is the symmetric adjoint).  Each step's cost is that of the supernode's
 * share of the factorisation, so all three sweeps cost a small multiple of
 * one factorisation.
 */
#include <cblas.h>
#include <string.h>

#include "gmm/alloc.h"
#include "factor_sparse_impl.h"

typedef struct {
    size_t nc, nr, ld;           /* columns, rows below, nc + nr */
    const SuiteSparse_long *R;   /* the rows below J */
    size_t px;                   /* the block's offset in L->x */
    double *Srr, *T, *P, *X, *W, *B, *Y; /* workspace: nr^2, nr nc (4), nc^2 (2) */
} block;

/* Supernode k's shape. */
static void block_of(const sparse_state *s, size_t k, block *b)
{
    const cholmod_factor *L = s->L;
    const SuiteSparse_long *super = L->super, *pi = L->pi, *px = L->px;
    b->nc = (size_t)(super[k + 1] - super[k]);
    b->ld = (size_t)(pi[k + 1] - pi[k]);
    b->nr = b->ld - b->nc;
    b->R = (const SuiteSparse_long *)L->s + pi[k] + b->nc;
    b->px = (size_t)px[k];
}

/* The place of row r in rows[lo .. m) (ascending), or m.  First the
 * guess that the rows from lo are consecutive (a supernode's own block,
 * and the dense trailing blocks of crossed effects and lattices), then a
 * binary search. */
static size_t row_at(const SuiteSparse_long *rows, size_t lo, size_t m, SuiteSparse_long r)
{
    if (lo >= m || rows[lo] > r)
        return m;
    size_t g = lo + (size_t)(r - rows[lo]);
    if (g < m && rows[g] == r)
        return g;
    size_t hi = g < m ? g : m; /* rows[hi] > r, or hi = m */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rows[mid] < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m && rows[lo] == r ? lo : m;
}

/* dst (nr x nr, lower) <- the stored entries of src (L's layout) at R x R;
 * or, with add, src's stored entries += the symmetric H's: H(r,r') +
 * H(r',r) off the diagonal, H(r,r) on it.  Returns the entries moved:
 * nr (nr + 1) / 2 when L's pattern is closed, as it must be.  Each of
 * R's rows is looked up in the later columns (row_at) rather than found
 * by walking them: below a student of InstEval a lecturer's column is a
 * thousand rows long, of which some twenty are in R. */
static size_t rr_move(const sparse_state *s, const block *b, double *src, double *dst, int add)
{
    size_t moved = 0;
    size_t nr = b->nr;
    for (size_t c = 0; c < nr; c++) {
        const SuiteSparse_long *rk;
        size_t off, m = lcol(s, (size_t)b->R[c], &rk, &off), q = 0;
        for (size_t a = c; a < nr; a++) {
            size_t at = row_at(rk, q, m, b->R[a]);
            if (at == m)
                continue;
            q = at + 1;
            moved++;
            if (!add)
                dst[a + nr * c] = src[off + at];
            else
                src[off + at] += a == c ? dst[a + nr * c] : dst[a + nr * c] + dst[c + nr * a];
        }
    }
    return moved;
}

/* T = L_RJ L_JJ^-1 (nr x nc). */
static void t_of(const block *b, const double *Lb)
{
    for (size_t j = 0; j < b->nc; j++)
        memcpy(b->T + b->nr * j, Lb + b->nc + b->ld * j, b->nr * sizeof(double));
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (int)b->nr,
                (int)b->nc, 1.0, Lb, (int)b->ld, b->T, (int)b->nr);
}

static gmm_status selinv_block(const sparse_state *s, block *b, const double *Lb, double *Sb)
{
    int nc = (int)b->nc, nr = (int)b->nr, ld = (int)b->ld;
    if (nr > 0) {
        if (rr_move(s, b, s->sigma, b->Srr, 0) != b->nr * (b->nr + 1) / 2)
            return gmm_error(GMM_EDOM, "sparse selinv: the pattern of L is not closed below "
                                       "column %zu",
                             (size_t)b->R[0]);
        t_of(b, Lb);
        cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, nr, nc, -1.0, b->Srr, nr, b->T, nr, 0.0,
                    Sb + nc, ld);
    }
    /* B = L_JJ^-T (L_JJ^-1 - L_RJ^T Sigma_RJ) */
    memset(b->B, 0, b->nc * b->nc * sizeof(double));
    for (size_t j = 0; j < b->nc; j++)
        b->B[j + b->nc * j] = 1.0;
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, nc, nc, 1.0, Lb,
                ld, b->B, nc);
    if (nr > 0)
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, nc, nc, nr, -1.0, Lb + nc, ld,
                    Sb + nc, ld, 1.0, b->B, nc);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, nc, nc, 1.0, Lb,
                ld, b->B, nc);
    for (size_t j = 0; j < b->nc; j++)
        for (size_t i = j; i < b->nc; i++)
            Sb[i + b->ld * j] = 0.5 * (b->B[i + b->nc * j] + b->B[j + b->nc * i]);
    return GMM_OK;
}

/* Workspace for the largest supernode; NULL when out of memory. */
static double *block_work(const sparse_state *s, block *w)
{
    size_t mr = 0, mrc = 0, mc = 0;
    for (size_t k = 0; k < s->L->nsuper; k++) {
        block b;
        block_of(s, k, &b);
        mr = b.nr * b.nr > mr ? b.nr * b.nr : mr;
        mrc = b.nr * b.nc > mrc ? b.nr * b.nc : mrc;
        mc = b.nc * b.nc > mc ? b.nc * b.nc : mc;
    }
    double *p = gmm_malloc(mr + 4 * mrc + 2 * mc + 1, sizeof *p);
    if (p) {
        w->Srr = p;
        w->T = p + mr;
        w->P = w->T + mrc;
        w->X = w->P + mrc;
        w->W = w->X + mrc;
        w->B = w->W + mrc;
        w->Y = w->B + mc;
    }
    return p;
}

gmm_status gmm_factor_impl_sparse_selinv_super(sparse_state *s)
{
    block b;
    double *work = block_work(s, &b);
    if (!work)
        return gmm_error(GMM_ENOMEM, "sparse selinv: out of memory for the supernodes' blocks");
    const double *Lx = s->L->x;
    gmm_status st = GMM_OK;
    gmm_factor_impl_sparse_serial_begin();
    for (size_t k = s->L->nsuper; k-- > 0 && !st;) {
        block_of(s, k, &b);
        st = selinv_block(s, &b, Lx + b.px, s->sigma + b.px);
    }
    gmm_factor_impl_sparse_serial_end();
    gmm_free(work);
    return st;
}

/* Lbar_JJ (stored lower, in the block) += the lower triangle of Z. */
static void add_lower(const block *b, const double *Z, double *lbb)
{
    for (size_t j = 0; j < b->nc; j++)
        for (size_t i = j; i < b->nc; i++)
            lbb[i + b->ld * j] += Z[i + b->nc * j];
}

/* Takahashi's reverse on one supernode: sb (Sbar) -> lb (Lbar). */
static void selinv_rev_block(const sparse_state *s, block *b, const double *Lb, double *sb,
                             double *lb)
{
    int nc = (int)b->nc, nr = (int)b->nr, ld = (int)b->ld;
    size_t unc = b->nc, unr = b->nr, uld = b->ld;
    double *sbb = sb + b->px, *lbb = lb + b->px, *G = b->Y, *Z = b->B;
    /* G: the symmetric matrix Sbar_JJ stands for */
    for (size_t j = 0; j < unc; j++)
        for (size_t i = j; i < unc; i++)
            G[i + unc * j] = G[j + unc * i] = sbb[i + uld * j] * (i == j ? 1.0 : 0.5);
    memset(Z, 0, unc * unc * sizeof *Z);
    if (nr > 0) {
        (void)rr_move(s, b, s->sigma, b->Srr, 0); /* the forward checked the pattern */
        t_of(b, Lb);
        for (size_t j = 0; j < unc; j++) /* P = T G - F */
            for (size_t i = 0; i < unr; i++)
                b->P[i + unr * j] = -sbb[unc + i + uld * j];
        cblas_dsymm(CblasColMajor, CblasRight, CblasLower, nr, nc, 1.0, G, nc, b->T, nr, 1.0,
                    b->P, nr);
        for (size_t j = 0; j < unc; j++) /* W = 2 P + F */
            for (size_t i = 0; i < unr; i++)
                b->W[i + unr * j] = 2.0 * b->P[i + unr * j] + sbb[unc + i + uld * j];
        /* X = Tbar = Sigma_RR W, then X L_JJ^-T: Lbar_RJ's share */
        cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, nr, nc, 1.0, b->Srr, nr, b->W, nr, 0.0,
                    b->X, nr);
        /* H = P T^T into Srr (spent), scattered into Sigmabar_RR */
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, nr, nr, nc, 1.0, b->P, nr, b->T, nr,
                    0.0, b->Srr, nr);
        (void)rr_move(s, b, sb, b->Srr, 1);
        cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, nr, nc, 1.0,
                    Lb, ld, b->X, nr);
        for (size_t j = 0; j < unc; j++)
            for (size_t i = 0; i < unr; i++)
                lbb[unc + i + uld * j] += b->X[i + unr * j];
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, nc, nc, nr, -1.0, b->T, nr, b->X, nr,
                    0.0, Z, nc);
    }
    /* Z -= 2 L_JJ^-T L_JJ^-1 G L_JJ^-T (in G's place) */
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, nc, nc, 1.0, Lb,
                ld, G, nc);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, nc, nc, 1.0, Lb,
                ld, G, nc);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, nc, nc, 1.0, Lb,
                ld, G, nc);
    for (size_t p = 0; p < unc * unc; p++)
        Z[p] -= 2.0 * G[p];
    add_lower(b, Z, lbb);
}

/* The Cholesky's reverse on one supernode: lb (Lbar) -> ab (Abar). */
static void chol_rev_block(const sparse_state *s, block *b, const double *Lb, double *lb,
                           double *ab)
{
    int nc = (int)b->nc, nr = (int)b->nr, ld = (int)b->ld;
    size_t unc = b->nc, unr = b->nr, uld = b->ld;
    double *lbb = lb + b->px, *abb = ab + b->px, *C = b->B, *K = b->Y;
    if (nr > 0) {
        /* Lbar_RJ -= M L_RJ, M = Abar_RR symmetric with its diagonal doubled */
        (void)rr_move(s, b, ab, b->Srr, 0);
        for (size_t a = 0; a < unr; a++)
            b->Srr[a + unr * a] *= 2.0;
        cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, nr, nc, -1.0, b->Srr, nr, Lb + nc, ld,
                    1.0, lbb + nc, ld);
        /* X = Lbar_RJ L_JJ^-1: Abar_RJ += X, Lbar_JJ -= lower(X^T L_RJ) */
        for (size_t j = 0; j < unc; j++)
            memcpy(b->X + unr * j, lbb + unc + uld * j, unr * sizeof(double));
        cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, nr, nc,
                    1.0, Lb, ld, b->X, nr);
        for (size_t j = 0; j < unc; j++)
            for (size_t i = 0; i < unr; i++)
                abb[unc + i + uld * j] += b->X[i + unr * j];
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, nc, nc, nr, -1.0, b->X, nr, Lb + nc,
                    ld, 0.0, C, nc);
        add_lower(b, C, lbb);
    }
    /* C = L_JJ^T lower(Lbar_JJ); K = sym(Phi(C)); S = L_JJ^-T K L_JJ^-1 */
    memset(C, 0, unc * unc * sizeof *C);
    for (size_t j = 0; j < unc; j++)
        for (size_t i = j; i < unc; i++)
            C[i + unc * j] = lbb[i + uld * j];
    cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, nc, nc, 1.0, Lb,
                ld, C, nc);
    for (size_t j = 0; j < unc; j++)
        for (size_t i = j; i < unc; i++)
            K[i + unc * j] = K[j + unc * i] = 0.5 * C[i + unc * j];
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, nc, nc, 1.0,
                Lb, ld, K, nc);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, nc, nc, 1.0, Lb,
                ld, K, nc);
    for (size_t j = 0; j < unc; j++)
        for (size_t i = j; i < unc; i++)
            abb[i + uld * j] += i == j ? K[i + unc * i] : K[i + unc * j] + K[j + unc * i];
}

gmm_status gmm_factor_impl_sparse_selinv_rev_super(sparse_state *s, double *sb, double *lb,
                                                   size_t len)
{
    block b;
    double *work = block_work(s, &b);
    if (!work)
        return gmm_error(GMM_ENOMEM, "sparse selinv reverse: out of memory for the supernodes' "
                                     "blocks");
    const double *Lx = s->L->x;
    size_t ns = s->L->nsuper;
    gmm_factor_impl_sparse_serial_begin();
    for (size_t k = 0; k < ns; k++) {
        block_of(s, k, &b);
        selinv_rev_block(s, &b, Lx + b.px, sb, lb);
    }
    memset(sb, 0, len * sizeof *sb);
    for (size_t k = ns; k-- > 0;) {
        block_of(s, k, &b);
        chol_rev_block(s, &b, Lx + b.px, lb, sb);
    }
    gmm_factor_impl_sparse_serial_end();
    gmm_free(work);
    return GMM_OK;
}
