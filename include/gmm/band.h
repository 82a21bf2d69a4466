/* band.h -- banded matrices in LAPACK's band layout and the operators every
 * model in gmm-infer uses (Cholesky, triangular solves, products, the
 * inverse subset, the QR of a stack of rows), each paired with its
 * reverse-mode derivative.  The conventions that follow the includes hold
 * for every function here.
 */
#ifndef GMM_BAND_H
#define GMM_BAND_H

#include <stddef.h>

#include "gmm/status.h"

/* STORAGE.  An n x n matrix with lower bandwidth kl and upper bandwidth ku is
 * one contiguous array of ld * n doubles, ld = kl + ku + 1, in LAPACK's
 * column-major band layout: entry (i, j), 0-based, -ku <= i - j <= kl, lives at
 *
 *     data[j * ld + ku + i - j]
 *
 * (row ku + i - j of column j).  Picture for n = 6, kl = 2, ku = 1 (a_ij; '*'
 * marks slots that exist in memory but are never read or written):
 *
 *        col:  0    1    2    3    4    5
 *     row 0:   *   a01  a12  a23  a34  a45     <- superdiagonal (i - j = -1)
 *     row 1:  a00  a11  a22  a33  a44  a55     <- diagonal
 *     row 2:  a10  a21  a32  a43  a54   *      <- i - j = 1
 *     row 3:  a20  a31  a42  a53   *    *      <- i - j = 2
 *
 * This is the layout CBLAS dgbmv/dtbsv and LAPACK dpbtrf read directly, and
 * (for ku = 0) the memory of GSL's symmetric band format.
 *
 * KINDS.  gmm_band.kind says how the stored band is to be read:
 *   GMM_BAND_GENERAL    every stored entry is the entry; outside the band, 0.
 *   GMM_BAND_SYMMETRIC  ku == 0; only the lower band is stored and A(i,j) for
 *                       i < j is A(j,i).
 *   GMM_BAND_LOWER      ku == 0; lower triangular (a Cholesky factor).
 * Bandwidths larger than n - 1 are clamped to n - 1 at allocation or view.
 *
 * SENSITIVITY CONVENTION FOR SYMMETRIC MATRICES (read this before writing a
 * reverse mode).  A symmetric band matrix is a function of its STORED entries:
 * each stored off-diagonal (i, j), i > j, stands for both A(i,j) and A(j,i).
 * The sensitivity Abar of a symmetric matrix is, in every routine of this
 * module, the derivative of the objective with respect to those stored
 * entries:
 *
 *     Abar(i,j) = dc/dA_stored(i,j) = dc/dA(i,j) + dc/dA(j,i)     (i > j)
 *     Abar(i,i) = dc/dA(i,i)
 *
 * i.e. with respect to the free parameters, not the full matrix.  Example:
 * c = trace(S Q) = sum_ij S(i,j) Q(i,j) gives Qbar(i,j) = 2 S(i,j) off the
 * diagonal and S(i,i) on it.  Finite differences of a symmetric input perturb
 * one stored entry (so both mirrored entries move), which checks exactly this.
 * Chaining to parameters: dc/dtheta = sum over stored (i,j) of
 * Abar(i,j) * dA_stored(i,j)/dtheta.  Never multiply by two again.
 *
 * REVERSE MODES.  Each forward operator `op` has a twin `op_rev`.  Adjoints
 * (the `*bar` arguments) of inputs are ACCUMULATED (+=) into, so an input used
 * twice collects both contributions; the caller zeroes them once per sweep.
 * An input adjoint pointer may be NULL when that adjoint is not wanted.  The
 * output adjoint is const unless the comment says it is used as workspace.
 *
 * COST.  Every operator is O(n l^2) or better (l the largest bandwidth
 * involved) and none forms a dense n x n temporary.
 *
 * ERRORS.  Functions return gmm_status and record a reason with gmm_error():
 * GMM_EDIM for mismatched n, bandwidths or kinds (a programming error);
 * GMM_ENOTPD from the Cholesky, with gmm_error_index() the failing row;
 * GMM_EDOM from the inverse subset when a diagonal entry of L is zero or not
 * finite (gmm_error_index() the row);
 * GMM_ENOMEM when a workspace cannot be allocated.  Nothing prints or exits.
 *
 * Entries are reached only through the accessors below; code outside
 * src/band/ never does its own band index arithmetic. */

typedef enum {
    GMM_BAND_GENERAL = 0,
    GMM_BAND_SYMMETRIC = 1,
    GMM_BAND_LOWER = 2
} gmm_band_kind;

/* Which of op(A) = A or A^T an operator applies. */
typedef enum { GMM_NOTRANS = 0, GMM_TRANS = 1 } gmm_trans;

typedef struct {
    size_t n;           /* order */
    size_t kl, ku;      /* lower and upper bandwidths (already clamped) */
    size_t ld;          /* kl + ku + 1: doubles per column */
    gmm_band_kind kind;
    double *data;       /* ld * n doubles, LAPACK band layout */
    int owner;          /* nonzero when gmm_band_free must free data */
} gmm_band;

/* ---- allocation, views, copies ------------------------------------------ */

/* Allocate an n x n band matrix of the given kind, zero-filled.  kl, ku are
 * clamped to n - 1; SYMMETRIC and LOWER require ku == 0 (GMM_EDIM otherwise
 * -- pass 0).  n == 0 is allowed (no data).  The result is freed with
 * gmm_band_free.  Returns NULL (and records GMM_ENOMEM / GMM_EDIM) on
 * failure. */
gmm_band *gmm_band_alloc(size_t n, size_t kl, size_t ku, gmm_band_kind kind);
/* Free a band from gmm_band_alloc (and its data if it owns it); NULL-safe. */
void gmm_band_free(gmm_band *b);

/* A view of caller-owned memory (ld * n doubles after clamping).  The view
 * does not own data; the caller keeps it alive.  Returns GMM_EDIM for a
 * SYMMETRIC/LOWER kind with ku != 0. */
gmm_status gmm_band_view(gmm_band *view, double *data, size_t n, size_t kl, size_t ku,
                         gmm_band_kind kind);

/* Doubles needed for an n x n band of the given bandwidths (after clamping). */
size_t gmm_band_size(size_t n, size_t kl, size_t ku);

/* Set every stored entry to zero (including the never-read corner slots). */
void gmm_band_set_zero(gmm_band *b);
/* The same storage read as another kind (KINDS), entries untouched: the one
 * way to turn a band's kind outside the operators that do it themselves (the
 * in-place Cholesky turns its SYMMETRIC band LOWER, the aliased reverse
 * gmm_band_chol_decomp_rev its LOWER adjoint SYMMETRIC, gmm_band_copy gives
 * dst src's kind).  For storage about to be overwritten: a factor's band
 * re-assembled as a precision (SYMMETRIC), a band receiving a factor built
 * row by row or a factor's adjoint (LOWER).  GMM_EDIM for SYMMETRIC or
 * LOWER with ku != 0, GMM_EINVAL for an unknown kind. */
gmm_status gmm_band_set_kind(gmm_band *b, gmm_band_kind kind);
/* dst = src; both must have the same n, kl, ku (GMM_EDIM otherwise); dst takes
 * src's kind. */
gmm_status gmm_band_copy(gmm_band *dst, const gmm_band *src);
/* dst = src restricted/extended to dst's bandwidths: entries in both bands are
 * copied, entries of dst outside src's band are set to 0, entries of src
 * outside dst's band are dropped.  Kinds: dst GENERAL from anything (a
 * SYMMETRIC src is expanded to both triangles); dst SYMMETRIC or LOWER from a
 * src of the same kind or from GENERAL (lower band taken).  Same n. */
gmm_status gmm_band_copy_band(gmm_band *dst, const gmm_band *src);
/* Y += alpha X on the lower band both hold (the diagonal and min(X kl, Y
 * kl) subdiagonals), X and Y SYMMETRIC or LOWER of the same n; the entries
 * below the diagonal are scaled by offdiag as well: 1 adds the values, 2
 * turns a symmetric X of values into band.h's gradient convention (each
 * off-diagonal entry counted for both triangles).  O(n l).  GMM_EDIM for a
 * size or kind mismatch. */
gmm_status gmm_band_axpy(double alpha, double offdiag, const gmm_band *X, gmm_band *Y);
/* Reverse mode of gmm_band_copy_band: srcbar += (dstbar restricted to src's
 * band), honouring the symmetric convention when src is SYMMETRIC and dst
 * GENERAL (srcbar(i,j) += dstbar(i,j) + dstbar(j,i)). */
gmm_status gmm_band_copy_band_rev(const gmm_band *dstbar, gmm_band *srcbar);

/* ---- column blocks (assembling block-banded matrices) ------------------------ */

/* Columns j0 .. j0+w-1 of a band with ku == 0 (SYMMETRIC or LOWER) as a
 * dense block: slot s (0 <= s <= kl) of column j = j0 + c is entry
 * (j + s, j) and pairs with blk[c * ldb + s], ldb >= kl + 1; slots whose row
 * is >= n do not exist and are skipped.  A state-space model assembles each
 * state's d columns this way from one template, and sums its gradient back.
 * cols_set: the band's slots = blk.  cols_acc: blk += the band's slots (blk
 * entries of missing slots untouched).  O(w kl), one copy when the block
 * lies inside the matrix and ldb == kl + 1.  GMM_EDIM for ku != 0,
 * j0 + w > n or ldb < kl + 1. */
gmm_status gmm_band_cols_set(gmm_band *b, size_t j0, size_t w, const double *blk, size_t ldb);
gmm_status gmm_band_cols_acc(const gmm_band *b, size_t j0, size_t w, double *blk, size_t ldb);

/* ---- element access -------------------------------------------------------- */

/* True when (i, j) is a stored slot of b (for SYMMETRIC: i >= j in band). */
static inline int gmm_band_in_band(const gmm_band *b, size_t i, size_t j)
{
    return i < b->n && j < b->n && (i >= j ? i - j <= b->kl : j - i <= b->ku);
}

/* Pointer p such that p[i] is the stored entry (i, j) for
 * j - ku <= i <= j + kl (and only for those i).  Column j's stored entries
 * are contiguous: p[j - ku], ..., p[j + kl]. */
static inline double *gmm_band_col(const gmm_band *b, size_t j)
{
    return b->data + j * (b->ld - 1) + b->ku;
}

/* Entry (i, j) by value: 0 outside the band; a SYMMETRIC band reflects. */
static inline double gmm_band_get(const gmm_band *b, size_t i, size_t j)
{
    if (b->kind == GMM_BAND_SYMMETRIC && i < j) {
        size_t t = i;
        i = j;
        j = t;
    }
    return gmm_band_in_band(b, i, j) ? gmm_band_col(b, j)[i] : 0.0;
}

/* Pointer to stored entry (i, j); the caller guarantees gmm_band_in_band. */
static inline double *gmm_band_ptr(const gmm_band *b, size_t i, size_t j)
{
    return gmm_band_col(b, j) + i;
}

/* ---- helpers ----------------------------------------------------------------- */

/* d[i] = A(i, i), d of length n. */
void gmm_band_diag(const gmm_band *A, double *d);
/* B = A^T for a GENERAL or LOWER A; B GENERAL with B->kl == A->ku and
 * B->ku == A->kl (a LOWER A gives a GENERAL upper-triangular B). Same n. */
gmm_status gmm_band_transpose(gmm_band *B, const gmm_band *A);
/* S = (A + A^T)/2 restricted to S's lower band; A GENERAL or LOWER, S
 * SYMMETRIC.  Reverse mode: Abar(i,j) += Sbar(i,j)/2 and Abar(j,i) +=
 * Sbar(i,j)/2 off the diagonal, Abar(i,i) += Sbar(i,i). */
gmm_status gmm_band_symmetrise(gmm_band *S, const gmm_band *A);
gmm_status gmm_band_symmetrise_rev(const gmm_band *Sbar, gmm_band *Abar);
/* sum_ij A(i,j) B(i,j) over the full matrices = trace(A^T B); any kinds
 * (SYMMETRIC read as full).  Reverse mode (cbar the adjoint of the result):
 * Abar += cbar * B, Bbar += cbar * A, each restricted to the adjoint's band
 * and honouring the symmetric convention (an off-diagonal of a SYMMETRIC
 * adjoint collects both mirrored entries). */
double gmm_band_dot(const gmm_band *A, const gmm_band *B);
gmm_status gmm_band_dot_rev(const gmm_band *A, const gmm_band *B, double cbar,
                            gmm_band *Abar, gmm_band *Bbar);

/* ---- 1. Cholesky ---------------------------------------------------------------- */

/* L L^T = Q.  Q SYMMETRIC with lower bandwidth l; L LOWER with the same n and
 * l (L may be Q itself: in place; the struct then turns LOWER on success).
 * O(n l^2).  Returns GMM_ENOTPD, with gmm_error_index() the 0-based row whose
 * pivot is not positive (or not finite, or below DBL_MIN), when Q is not
 * positive definite; L's contents are then unspecified.  Never produces a
 * NaN silently.  GMM_EDIM for mismatched n, l or kinds; GMM_ENOMEM.
 * work: gmm_band_chol_work_size(l) doubles (the blocked path's panels, l >=
 * 48: one l x 16, or l x 32 from l = 192), or NULL to allocate them on each
 * call -- what gmm_band_chol_decomp does.  A caller that factors at every
 * evaluation (a Newton step, a leapfrog step) keeps one buffer. */
gmm_status gmm_band_chol_decomp_work(const gmm_band *Q, gmm_band *L, double *work);
gmm_status gmm_band_chol_decomp(const gmm_band *Q, gmm_band *L);
/* Reverse mode: given L = chol(Q) and Lbar (LOWER, same shape; used as
 * workspace and destroyed; must not alias L), Qbar (SYMMETRIC, same shape)
 * += dc/dQ under the symmetric convention above.  O(n l^2), a small multiple
 * of the forward's time (docs/benchmarks.md).  Qbar may alias Lbar (then Lbar's storage receives
 * Qbar = 0 + result: the caller zeroes nothing; the struct turns
 * SYMMETRIC).  Qbar NULL: nothing to do.  work: gmm_band_chol_work_size(l)
 * doubles (panels of l >= 48, two l x 16 and a 16 x 16 block, 32 from l =
 * 192), or NULL to allocate them on each call (gmm_band_chol_decomp_rev). */
gmm_status gmm_band_chol_decomp_rev_work(const gmm_band *L, gmm_band *Lbar, gmm_band *Qbar,
                                         double *work);
gmm_status gmm_band_chol_decomp_rev(const gmm_band *L, gmm_band *Lbar, gmm_band *Qbar);
/* Doubles of work the two calls above need at lower bandwidth l (0 below
 * 48, where nothing is allocated); one buffer serves both, and the size for
 * a bandwidth serves every smaller one.  The contents carry nothing from
 * one call to the next.  O(1). */
size_t gmm_band_chol_work_size(size_t l);

/* log det(L L^T) = 2 sum_i log L(i,i).  L LOWER (not checked: the result is
 * a double); 0 for n = 0.  O(n). */
double gmm_band_chol_logdet(const gmm_band *L);
/* Reverse mode: Lbar(i,i) += 2 cbar / L(i,i).  L and Lbar LOWER, same n. */
gmm_status gmm_band_chol_logdet_rev(const gmm_band *L, double cbar, gmm_band *Lbar);

/* ---- 2. triangular solves --------------------------------------------------------- */

/* x <- op(L)^{-1} x in place, L LOWER (op(L) = L or L^T), x of length n.
 * O(n l). */
gmm_status gmm_band_tri_solve_vec(const gmm_band *L, gmm_trans trans, double *x);
/* reach[j] (n entries) = the last row i >= j with L(i, j) != 0 (j when
 * column j is zero below its diagonal), L LOWER: how far down the factor
 * of a ragged band (a graph's precision in RCM order, whose rows start
 * late) is nonzero.  O(n kl).  GMM_EDIM unless L is LOWER. */
gmm_status gmm_band_tri_reach(const gmm_band *L, size_t *reach);
/* gmm_band_tri_solve_vec given gmm_band_tri_reach's reach of this L: the
 * same x to the bit (up to the sign of a zero), the wide bands' blocked
 * substitutions skipping the rows below each block's reach.  GMM_EDIM
 * unless L is LOWER. */
gmm_status gmm_band_tri_solve_vec_reach(const gmm_band *L, const size_t *reach, gmm_trans trans,
                                        double *x);
/* Reverse mode of s = op(L)^{-1} v, given the solution s (length n) and its
 * adjoint sbar (length n, const).  vbar (length n) += op(L)^{-T} sbar;
 * Lbar (LOWER, L's shape) += -(g s^T or s g^T) restricted to L's band, where
 * g = op(L)^{-T} sbar.  work: n doubles (or NULL to allocate).  One
 * triangular solve plus an O(n l) band outer product. */
gmm_status gmm_band_tri_solve_vec_rev(const gmm_band *L, gmm_trans trans, const double *s,
                                      const double *sbar, double *vbar, gmm_band *Lbar,
                                      double *work);

/* Lbar = dc/dL for c = sbar . s + cbar_logdet logdet(L L^T), s = op(L)^{-1} v
 * (v fixed), given s: the L-parts of gmm_band_tri_solve_vec_rev and of
 * gmm_band_chol_logdet_rev together, but SET into Lbar (every stored slot
 * written) rather than accumulated, in one pass over L and Lbar.  The start
 * of the reverse sweep of a Gaussian log density (the marginal
 * likelihood's): no zeroed band needed.  work: n doubles (g = op(L)^{-T}
 * sbar on return) or NULL to allocate.  O(n l). */
gmm_status gmm_band_tri_solve_vec_rev_set(const gmm_band *L, gmm_trans trans, const double *s,
                                          const double *sbar, double cbar_logdet,
                                          gmm_band *Lbar, double *work);

/* x <- L^{-1} x (as gmm_band_tri_solve_vec, op = L) and *logdet = log det(L
 * L^T) (as gmm_band_chol_logdet, to a few ulps of its size) in one pass over
 * L: what a Gaussian log density needs from its factor.  O(n l). */
gmm_status gmm_band_tri_solve_vec_logdet(const gmm_band *L, double *x, double *logdet);

/* X <- op(L)^{-1} X for a dense column-major n x k block X (leading dimension
 * ldx >= n).  O(n l k). */
gmm_status gmm_band_tri_solve_mat(const gmm_band *L, gmm_trans trans, size_t k, double *X,
                                  size_t ldx);
/* Reverse mode of S = op(L)^{-1} V (dense n x k): Vbar += op(L)^{-T} Sbar;
 * Lbar += -(G S^T or S G^T) restricted to L's band, G = op(L)^{-T} Sbar.
 * work: n*k doubles or NULL. */
gmm_status gmm_band_tri_solve_mat_rev(const gmm_band *L, gmm_trans trans, size_t k,
                                      const double *S, size_t lds, const double *Sbar,
                                      size_t ldsbar, double *Vbar, size_t ldvbar,
                                      gmm_band *Lbar, double *work);

/* X = op(L)^{-1} B restricted to X's band (the appendix's "solve by a banded
 * matrix").  L LOWER; B GENERAL or LOWER (kl_B, ku_B); X GENERAL with X->ku >=
 * B->ku when op = NOTRANS (the entries of L^{-1} B above B's upper band are
 * exactly 0), X->kl >= B->kl when op = TRANS.  The band entries computed are
 * the exact entries of the (generally dense) product.  O(n l w), w X's width.
 * X must not alias B. */
gmm_status gmm_band_tri_solve_band(const gmm_band *L, gmm_trans trans, const gmm_band *B,
                                   gmm_band *X);
/* Reverse mode, given X (from the forward call, same band) and Xbar (same
 * band as X): Bbar += op(L)^{-T} Xbar restricted to Bbar's band; Lbar +=
 * the matching term restricted to L's band.  Workspaces allocated inside. */
gmm_status gmm_band_tri_solve_band_rev(const gmm_band *L, gmm_trans trans, const gmm_band *B,
                                       const gmm_band *X, const gmm_band *Xbar, gmm_band *Bbar,
                                       gmm_band *Lbar);

/* ---- 3. sparse inverse subset (Takahashi) ---------------------------------------------- */

/* S = the band of (L L^T)^{-1}, for S SYMMETRIC with S->kl >= L->kl (any wider
 * band is allowed: VI needs the band of the prior precision, state-space
 * models whole d x d blocks).  O(n l l'), l' = S->kl. */
gmm_status gmm_band_chol_selinv(const gmm_band *L, gmm_band *S);
/* Reverse mode: given L, S (the forward result) and Sbar (SYMMETRIC, S's
 * shape, symmetric convention), Lbar (LOWER) += dc/dL.  O(n l l').  Sbar is
 * used as workspace and destroyed. */
gmm_status gmm_band_chol_selinv_rev(const gmm_band *L, const gmm_band *S, gmm_band *Sbar,
                                    gmm_band *Lbar);

/* ---- 4. products -------------------------------------------------------------------------- */

/* C = op(A) op(B) restricted to C's band.  A, B GENERAL or LOWER (a
 * SYMMETRIC operand must first be expanded with gmm_band_copy_band into a
 * GENERAL band); C GENERAL (or LOWER when the product is known lower).
 * Exact when C->kl >= kl(opA) + kl(opB) and C->ku >= ku(opA) + ku(opB).
 * C must not alias A or B.  O(n l^2). */
gmm_status gmm_band_gemm(gmm_trans ta, const gmm_band *A, gmm_trans tb, const gmm_band *B,
                         gmm_band *C);
/* Reverse mode: Abar += (Cbar op(B)^T, transposed if ta) restricted to
 * Abar's band; Bbar likewise with op(A)^T Cbar. */
gmm_status gmm_band_gemm_rev(gmm_trans ta, const gmm_band *A, gmm_trans tb, const gmm_band *B,
                             const gmm_band *Cbar, gmm_band *Abar, gmm_band *Bbar);

/* y = alpha op(A) x + beta y.  A any kind (SYMMETRIC read as full).  x, y of
 * length n, not aliased.  O(n l). */
gmm_status gmm_band_gemv(gmm_trans ta, double alpha, const gmm_band *A, const double *x,
                         double beta, double *y);
/* Reverse mode of y = alpha op(A) x (+ beta y0): Abar += alpha (ybar x^T or
 * x ybar^T) restricted to Abar's band (symmetric convention when Abar is
 * SYMMETRIC); xbar += alpha op(A)^T ybar.  (y0bar += beta ybar is the
 * caller's.) */
gmm_status gmm_band_gemv_rev(gmm_trans ta, double alpha, const gmm_band *A, const double *x,
                             const double *ybar, gmm_band *Abar, double *xbar);

/* ---- 5. band-restricted outer product -------------------------------------------------------- */

/* O += alpha * M V^T restricted to O's band, M and V dense column-major n x k
 * (k = 1: vectors).  O GENERAL or LOWER; for O SYMMETRIC the symmetric
 * convention applies: O(i,j) += alpha (M V^T + V M^T)(i,j) for i > j and
 * alpha (M V^T)(i,i) on the diagonal -- the sensitivity of a symmetric matrix
 * whose full-matrix gradient is alpha M V^T.  O(n l k). */
gmm_status gmm_band_outer(double alpha, size_t k, const double *M, size_t ldm, const double *V,
                          size_t ldv, gmm_band *O);
/* Reverse mode: Mbar += alpha Obar V, Vbar += alpha Obar^T M (Obar in O's
 * band and kind).  Either may be NULL. */
gmm_status gmm_band_outer_rev(double alpha, size_t k, const double *M, size_t ldm,
                              const double *V, size_t ldv, const gmm_band *Obar, double *Mbar,
                              size_t ldmbar, double *Vbar, size_t ldvbar);

/* ---- 6. square-root factorisation (rows folded into L) ----------------------------------------- */

/* The Cholesky factor of P = M^T M computed from the rows of M, never from
 * P: Givens rotations fold the rows one by one into the triangular factor
 * R = L^T of a QR factorisation of M (George & Heath's row-sequential QR).
 * Why: forming P squares the conditioning -- rounding its stored entries
 * costs eps cond(P) relative in log det P, the rows only eps cond(M) =
 * eps sqrt(cond P).  A state-space model with inputs much closer together
 * than its lengthscale has P entries ~ (lengthscale/dt)^(2 nu) and needs
 * this.  L is unique with a positive diagonal, so it IS chol(M^T M): its
 * reverse mode is gmm_band_chol_decomp_rev on the result, giving dc/dP.
 *
 * Start from L = 0 (gmm_band_set_zero; L LOWER): the empty factor.  Each
 * call folds one row v with nonzeros in columns j0 .. j0 + w - 1 (w <= kl +
 * 1, j0 + w <= n; GMM_EDIM otherwise): L L^T += v v^T.  A row never leaves
 * the band: with width <= kl + 1 every fill stays within kl of the
 * diagonal.  Rows may come in any order; in nondecreasing j0 each costs
 * O(w l) (a rotation per column until it lands in an empty row of the
 * factor), in another order up to O((n - j0) l).  work: 4 (kl + 1)
 * doubles, or NULL to allocate (GMM_ENOMEM).  Non-finite entries of v: GMM_EDOM. */
gmm_status gmm_band_chol_add_row(gmm_band *L, size_t j0, size_t w, const double *v,
                                 double *work);
/* The same for m rows at once: L L^T += V^T V, row i of V (V + i ldv,
 * ldv >= kl + 1) holding kl + 1 entries at columns first[i] .. first[i] +
 * kl (entries at columns >= n must be 0).  Where gmm_band_chol_add_row pays
 * a square root and a division per row and column, this pays them per
 * column: one Householder reflection zeroes a column of every row of the
 * block that reaches it, against L's column (when nonempty) or against one
 * of the rows, which then becomes that column of L and leaves the block.
 * The row with the largest entry in the column is pivoted in first, so a
 * small row keeps an error relative to its own size beside rows 1e10 times
 * larger, as with the rotations (band_qr_fold.c, ROW PIVOTING).  V is not
 * modified; m = 0 does nothing.  NULL L, first or V: GMM_EINVAL.  Rows in
 * nondecreasing first[i] (first[i] < n), else GMM_EDIM naming the row in
 * gmm_error_index(), as for an entry past column n - 1 or ldv < kl + 1; a
 * non-finite entry: GMM_EDOM naming the row.  L is unchanged on error.
 * Cost: O(c a l) for c columns swept with a rows active: a block whose
 * rows start in columns of L that are filled and end beyond them (rows
 * folded in order of first column) sweeps about the block's span once.
 * work: gmm_band_chol_add_rows_work(m, kl) doubles (~3 m (kl + 4)), or
 * NULL to allocate (GMM_ENOMEM). */
gmm_status gmm_band_chol_add_rows(gmm_band *L, size_t m, const size_t *first, const double *V,
                                  size_t ldv, double *work);
size_t gmm_band_chol_add_rows_work(size_t m, size_t kl);

/* TAPE: the block fold recorded, so that its orthogonal transformation can
 * be applied backwards (a posterior's moments in the square-root form:
 * marglik.c, ROW MOMENTS).  Write the rows of M before a call (the block's
 * rows, and L's rows -- R = L^T's rows -- that its reflections touch) and
 * after it (R's rows, and the block's rows, each either deposited as one
 * of R's rows or reduced to zero) as linear forms in x: the call maps the
 * first to the second by an orthogonal matrix.  The tape holds that map as
 * the reflections, swaps and sign changes of the fold (band_qr_impl.h, TAPE);
 * gmm_band_chol_rows_unfold applies its inverse to vectors attached to the
 * rows (a covariance square root and a mean, say), carrying what is known
 * after the fold back to the rows as they came in.  The tape grows by
 * gmm_realloc as needed (keep it between calls and reset len: evaluations
 * after the first then allocate nothing); free data with gmm_free. */
typedef struct {
    double *data;
    size_t len, cap; /* doubles used and allocated */
    size_t last;     /* position of the last block */
    size_t reach;    /* the columns the blocks since len was 0 touched: 0 .. reach - 1 */
} gmm_band_tape;

/* As gmm_band_chol_add_rows (same arguments, checks and result), and one
 * block appended to tape (positions tape->len before the call .. after).
 * m may be 0 (an empty block).  GMM_ENOMEM when the tape cannot grow (L is
 * then folded in part: evaluate again).  Cost: the fold's, and (2 + active
 * rows) doubles per column swept. */
gmm_status gmm_band_chol_add_rows_tape(gmm_band *L, size_t m, const size_t *first,
                                       const double *V, size_t ldv, double *work,
                                       gmm_band_tape *tape);
/* The block at tape position pos: its first column c0, rows m, R's rows
 * touched c0 .. cend - 1, the position of the next block, and when dest is
 * non-NULL (m entries) the R row each block row was deposited as (SIZE_MAX:
 * reduced to zero).  GMM_EINVAL when no block starts at pos.  O(records). */
gmm_status gmm_band_tape_block(const gmm_band_tape *tape, size_t pos, size_t *c0, size_t *m,
                               size_t *cend, size_t *next, size_t *dest);
/* The inverse of the block's map at pos applied to w lanes (w a multiple of
 * 4, stride lds >= w) of the rows of S: R's row j (c0 <= j < cend) at S + (j
 * - c0) lds, block row i at S + (nR + i) lds, nR >= cend - c0.  On entry the
 * rows hold what belongs to the rows after the fold (a deposited block row's
 * entry is not read: it is set from its R row), on return what belongs to
 * them before it (an R row deposited by the block is zeroed).  Each lane is
 * transformed independently, exactly as the fold transformed the rows'
 * entries (the same reflections, in reverse).  O(the fold's work, w lanes
 * per row instead of kl + 1). */
gmm_status gmm_band_chol_rows_unfold(const gmm_band_tape *tape, size_t pos, size_t nR,
                                     double *S, size_t lds, size_t w);

/* The posterior moments of the rows of a recorded factorisation.  tape:
 * every call of gmm_band_chol_add_rows_tape from L = 0 to the complete
 * factor (blocks at positions 0 ..), M the rows they folded, P = M'M =
 * L L'; z (n) = R mu = L' mu, the mean of R x under x ~ N(mu, P^-1).  For
 * each block, from the last to the first (in nondecreasing order of first
 * column, as gmm_marglik_eval_rows folds them), fn(ctx, b, moments), b
 * counted back from the last block (0: the last), with the block's rows
 * a_i (as given, i < m) and the x_c for the columns J = c0 .. c0 + nj - 1
 * whose R rows earlier blocks had filled when it came, with entries in J
 * only (the longest such run; a Markov chain's transition rows: the state
 * they leave; nj <= 2 (kl + 1), possibly 0), each as lw lanes (a
 * multiple of 4) of which r is the mean, in rows (m x lw) and xj (nj x lw):
 *
 *   E[(a_i'x)(a_k'x)] - [i == k] = gmm_band_moment(bm, rows + i lw, rows + k lw)
 *   E[(a_i'x) x_c]               = gmm_band_moment(bm, rows + i lw, xj + c lw)
 *
 * (never two x's), each from the fold's orthogonal map (band_qr_moments.c, ROW
 * MOMENTS): accurate relative to the whitened scale of a_i'x (a variance at
 * most 1 when M holds P's information), however large a_i's entries and
 * however ill-conditioned P.  Pointers valid during the call; a nonzero
 * status from fn stops the sweep and is returned.  work: a growable buffer
 * (as the tape; keep it between calls).  GMM_EINVAL (NULL, a malformed
 * tape), GMM_EDIM, GMM_ENOMEM.  Cost about the fold's. */
typedef struct {
    size_t c0, m, nj, lw, r;
    const double *rows, *xj;
} gmm_band_block_moments;
typedef gmm_status (*gmm_band_moments_fn)(void *ctx, size_t block,
                                          const gmm_band_block_moments *bm);
gmm_status gmm_band_chol_rows_moments(const gmm_band_tape *tape, const double *z, size_t n,
                                      gmm_band_moments_fn fn, void *ctx, gmm_band_tape *work);
/* A second moment from two lane vectors of gmm_band_block_moments: a row
 * is I - D D' in covariance with D its lanes other than r, so E[ab] = m_a
 * m_b - D_a . D_b (- 1 for a row with itself, as stated there). */
static inline double gmm_band_moment(const gmm_band_block_moments *bm, const double *a,
                                     const double *b)
{
    double t0 = 0.0, t1 = 0.0, t2 = 0.0, t3 = 0.0;
    for (size_t l = 0; l < bm->lw; l += 4) {
        t0 += a[l] * b[l];
        t1 += a[l + 1] * b[l + 1];
        t2 += a[l + 2] * b[l + 2];
        t3 += a[l + 3] * b[l + 3];
    }
    return 2.0 * a[bm->r] * b[bm->r] - ((t0 + t1) + (t2 + t3));
}

/* Lane products for a state-space model's moments, on the diagonal blocks
 * of a block-diagonal map: block k holds rows boff[k] .. boff[k + 1] - 1
 * (nblk blocks), rows of lw lanes (lw a multiple of 4, as the moments'),
 * and out must not overlap a or b.
 *
 * gmm_band_moment_gram_blocks: for every block and its rows i, k,
 *   out[i ldo + k] += sum_{t < nt} gmm_band_moment(bm, a + t stride + i lw,
 *                                                   b + t stride + k lw)
 * (lw = bm->lw): the moments summed over nt groups of rows stride doubles
 * apart (the intervals of a block of the fold), each row's lanes read once
 * per 2 x 2 tile, the sums reduced once.
 *
 * gmm_band_lanes_mix_blocks: out row i = sum_j M[i ldm + j] a_j + sum_j
 * N[i ldn + j] b_j over the rows j of i's block (N NULL: none, b unread),
 * a_j = a + j lw, likewise b_j and out's rows: lanes are linear in the
 * rows, so a linear map of rows maps their lanes. */
void gmm_band_moment_gram_blocks(const gmm_band_block_moments *bm, size_t nblk,
                                 const size_t *boff, const double *a, const double *b,
                                 size_t stride, size_t nt, double *out, size_t ldo);
void gmm_band_lanes_mix_blocks(size_t lw, size_t nblk, const size_t *boff, const double *M,
                               size_t ldm, const double *a, const double *N, size_t ldn,
                               const double *b, double *out);

/* After the last row: GMM_ENOTPD with gmm_error_index() the first column
 * whose diagonal is zero (M rank deficient there: no row reached it), below
 * DBL_MIN or not finite.  O(n). */
gmm_status gmm_band_chol_rows_check(const gmm_band *L);

#endif
