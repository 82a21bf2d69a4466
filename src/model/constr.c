/* constr.c -- conditioning a banded Gaussian on linear constraints
 * (constr.h): kriging against A and a Woodbury correction for the pins.
 *
 * The conditioned Gaussian has precision P on the subspace {A x = 0}:
 * covariance Sigma_c = V (V'PV)^-1 V' (V an orthonormal basis).  With pinned
 * latents S (k of them, N_S invertible for a basis N of Q's null space, so
 * that P~ = P + tau E_S E_S' is positive definite) and L L' = P~:
 *
 *   kriging:  Sigma~_c = P~^-1 - U G^-1 U',  U = P~^-1 A', G = A U = L_G L_G',
 *   pins:     Sigma_c = Sigma~_c + tau Y K^-1 Y',  Y = Sigma~_c E_S,
 *             K = I - tau E_S' Y = L_K L_K'   (Woodbury: P = P~ - tau E E'),
 *   log det(V'PV) + log det(AA') = log|P~| + log|G| + log|K|.
 *
 * The result does not depend on tau > 0; gmm_constr_tau takes the largest
 * diagonal entry of the prior at the pins, so that P~'s added curvature is
 * of the prior's scale (neither a near-singular P~ nor a K near 0).  tau = 0
 * is the unpinned case, P positive definite itself (variational inference's
 * q): K = I, log|K| = 0, no Woodbury correction.
 */
#include "gmm/constr.h"

#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/factor.h"
#include "gmm/sparse.h"
#include "model_dense.h"

struct gmm_constr {
    size_t n, k;
    double *A;      /* k x n row-major */
    size_t *pin;    /* k */
    double tau;     /* the last factor's (constr.h, TAU) */
    double *V;      /* n x k column-major: U L_G^-T */
    double *Z;      /* n x k column-major: Y L_K^-T */
    double *G, *K;  /* k x k, lower Cholesky factors */
    double *a;      /* k */
    double ldG, ldK;
    double *rw;     /* gmm_constr_rev: 4 n k + 3 n (allocated on first use) */
};

gmm_constr *gmm_constr_alloc(size_t n, size_t k, const double *A, const size_t *pin)
{
    for (size_t i = 0; i < k; i++)
        if (pin[i] >= n) {
            gmm_error(GMM_EINVAL, "constraint %zu pins latent %zu of %zu", i, pin[i], n);
            return NULL;
        }
    gmm_constr *c = gmm_calloc(1, sizeof *c);
    size_t kk = k ? k : 1;
    if (c) {
        c->A = gmm_malloc(kk * n, sizeof *c->A);
        c->pin = gmm_malloc(kk, sizeof *c->pin);
        /* Z and a right-hand side follow V: one block to solve */
        c->V = gmm_malloc((2 * kk + 1) * n, sizeof *c->V);
        c->Z = c->V ? c->V + kk * n : NULL;
        c->G = gmm_calloc(kk * kk, sizeof *c->G);
        c->K = gmm_calloc(kk * kk, sizeof *c->K);
        c->a = gmm_malloc(kk, sizeof *c->a);
    }
    if (!c || !c->A || !c->pin || !c->V || !c->Z || !c->G || !c->K || !c->a) {
        gmm_constr_free(c);
        gmm_error(GMM_ENOMEM, "out of memory for %zu constraints on %zu latents", k, n);
        return NULL;
    }
    c->n = n;
    c->k = k;
    memcpy(c->A, A, k * n * sizeof *A);
    memcpy(c->pin, pin, k * sizeof *pin);
    return c;
}

void gmm_constr_free(gmm_constr *c)
{
    if (!c)
        return;
    gmm_free(c->A);
    gmm_free(c->pin);
    gmm_free(c->V);
    gmm_free(c->G);
    gmm_free(c->K);
    gmm_free(c->a);
    gmm_free(c->rw);
    gmm_free(c);
}

double gmm_constr_tau(const gmm_constr *c, const gmm_band *Q)
{
    double t = 0.0;
    for (size_t i = 0; i < c->k; i++)
        t = fmax(t, gmm_band_get(Q, c->pin[i], c->pin[i]));
    return t > 0.0 && isfinite(t) ? t : 1.0;
}

void gmm_constr_pin(const gmm_constr *c, double tau, gmm_band *P)
{
    for (size_t i = 0; i < c->k; i++)
        *gmm_band_ptr(P, c->pin[i], c->pin[i]) += tau;
}

/* Lower Cholesky of the k x k M in place (model_dense.h's md_chol), log
 * det into *ld; the failing column + 1, or 0. */
static size_t small_chol(double *M, size_t k, double *ld)
{
    size_t bad = md_chol(k, M);
    *ld = 0.0;
    for (size_t j = 0; !bad && j < k; j++)
        *ld += 2.0 * log(M[j * k + j]);
    return bad;
}

/* X <- X L^-T for X n x k column-major, L k x k lower. */
static void right_solve(double *X, size_t n, size_t k, const double *L)
{
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; i < k; i++) {
            double a = X[i * n + r];
            for (size_t t = 0; t < i; t++)
                a -= L[i * k + t] * X[t * n + r];
            X[i * n + r] = a / L[i * k + i];
        }
}

gmm_status gmm_constr_project(const gmm_constr *c, double *x)
{
    size_t n = c->n, k = c->k;
    if (k == 0)
        return GMM_OK;
    double *M = gmm_malloc(k * k + k, sizeof *M), *a = M ? M + k * k : NULL, ld;
    if (!M)
        return gmm_error(GMM_ENOMEM, "out of memory projecting onto %zu constraints", k);
    for (size_t i = 0; i < k; i++) {
        double s = 0.0;
        for (size_t t = 0; t < n; t++)
            s += c->A[i * n + t] * x[t];
        a[i] = s;
        for (size_t j = 0; j <= i; j++) {
            double g = 0.0;
            for (size_t t = 0; t < n; t++)
                g += c->A[i * n + t] * c->A[j * n + t];
            M[i * k + j] = g;
        }
    }
    size_t bad = small_chol(M, k, &ld);
    if (bad) {
        gmm_free(M);
        return gmm_error_at(GMM_ENOTPD, bad - 1, "constraint %zu is linearly dependent on the "
                                                 "others",
                            bad - 1);
    }
    md_chol_solve(k, M, a); /* a <- (AA')^-1 A x */
    for (size_t i = 0; i < k; i++)
        for (size_t t = 0; t < n; t++)
            x[t] -= c->A[i * n + t] * a[i];
    gmm_free(M);
    return GMM_OK;
}

/* v <- v - V L_G^-1 A v: P~^-1 b becomes Sigma~_c b. */
static void krig(gmm_constr *c, double *v)
{
    size_t n = c->n, k = c->k;
    for (size_t i = 0; i < k; i++) {
        double s = 0.0;
        for (size_t t = 0; t < n; t++)
            s += c->A[i * n + t] * v[t];
        c->a[i] = s;
    }
    md_lower_solve(k, c->G, c->a);
    for (size_t i = 0; i < k; i++)
        for (size_t r = 0; r < n; r++)
            v[r] -= c->V[i * n + r] * c->a[i];
}

/* P~^-1 v = L^-T L^-1 v by the band factor L or by a gmm_factor F: the
 * conditioning below is one algebra whatever stores P~'s factor. */
typedef struct {
    const gmm_band *L;
    const gmm_factor *F;
} psolver;

static gmm_status psolve(const psolver *ps, double *v)
{
    gmm_status st;
    if (ps->F)
        return gmm_factor_solve(ps->F, v);
    if ((st = gmm_band_tri_solve_vec(ps->L, GMM_NOTRANS, v)))
        return st;
    return gmm_band_tri_solve_vec(ps->L, GMM_TRANS, v);
}

/* P~^-1 X for the m columns of X (n x m), together where the factor can. */
static gmm_status psolve_many(const psolver *ps, double *X, size_t n, size_t m)
{
    gmm_status st = GMM_OK;
    if (ps->F)
        return gmm_factor_solve_many(ps->F, X, m);
    for (size_t j = 0; j < m && !st; j++)
        st = psolve(ps, X + j * n);
    return st;
}

static gmm_status constr_factors(gmm_constr *c);
static void constr_solve_rest(gmm_constr *c, double *v);

/* The factors from P~ (ps); with v, also v <- Sigma_c v, whose solve by P~
 * joins the factors' own in one block. */
static gmm_status constr_factor(gmm_constr *c, const psolver *ps, size_t order, double tau,
                                double *v)
{
    gmm_status st;
    size_t n = c->n, k = c->k;
    if (order != n)
        return gmm_error(GMM_EDIM, "constraints on %zu latents, factor of %zu", n, order);
    c->tau = tau;
    /* the block: P~^-1 A' into V, with pins P~^-1 of the pins' unit
     * vectors into Z (which follows V), then P~^-1 v (in Z's place when
     * there are no pins, where Z is unused) */
    size_t m = tau != 0.0 ? 2 * k : k;
    memcpy(c->V, c->A, k * n * sizeof *c->V);
    if (tau != 0.0) {
        memset(c->Z, 0, k * n * sizeof *c->Z);
        for (size_t j = 0; j < k; j++)
            c->Z[j * n + c->pin[j]] = 1.0;
    }
    if (v)
        memcpy(c->V + m * n, v, n * sizeof *v);
    if ((st = psolve_many(ps, c->V, n, m + (v != NULL))))
        return st;
    if (v)
        memcpy(v, c->V + m * n, n * sizeof *v);
    if ((st = constr_factors(c)))
        return st;
    if (v)
        constr_solve_rest(c, v);
    return GMM_OK;
}

/* G and K, and V and Z made U L_G^-T and Y L_K^-T, from the block's
 * solves (constr_factor). */
static gmm_status constr_factors(gmm_constr *c)
{
    size_t n = c->n, k = c->k, bad;
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j <= i; j++) {
            double g = 0.0;
            for (size_t t = 0; t < n; t++)
                g += c->A[i * n + t] * c->V[j * n + t];
            c->G[i * k + j] = g;
        }
    if ((bad = small_chol(c->G, k, &c->ldG)))
        return gmm_error_at(GMM_ENOTPD, bad - 1, "constraint %zu is linearly dependent on the "
                                                 "others",
                            bad - 1);
    right_solve(c->V, n, k, c->G);
    c->ldK = 0.0;
    if (c->tau == 0.0)
        return GMM_OK;
    for (size_t j = 0; j < k; j++)
        krig(c, c->Z + j * n);
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j <= i; j++)
            c->K[i * k + j] = (i == j) - c->tau * c->Z[j * n + c->pin[i]];
    if ((bad = small_chol(c->K, k, &c->ldK)))
        return gmm_error_at(GMM_ENOTPD, bad - 1, "the precision is not positive definite on "
                                                 "the constrained subspace (direction %zu): "
                                                 "the constraints leave a direction that "
                                                 "neither the prior nor the data determine",
                            bad - 1);
    right_solve(c->Z, n, k, c->K);
    return GMM_OK;
}

gmm_status gmm_constr_factor(gmm_constr *c, const gmm_band *L, double tau)
{
    const psolver ps = {L, NULL};
    return constr_factor(c, &ps, L->n, tau, NULL);
}

gmm_status gmm_constr_factor_with(gmm_constr *c, const gmm_factor *F, double tau)
{
    const psolver ps = {NULL, F};
    return constr_factor(c, &ps, gmm_factor_dim(F), tau, NULL);
}

gmm_status gmm_constr_factor_solve_with(gmm_constr *c, const gmm_factor *F, double tau,
                                        double *v)
{
    if (!v)
        return gmm_error(GMM_EINVAL, "gmm_constr_factor_solve_with: NULL argument");
    const psolver ps = {NULL, F};
    return constr_factor(c, &ps, gmm_factor_dim(F), tau, v);
}

/* v <- Sigma_c v from v = P~^-1 v. */
static void constr_solve_rest(gmm_constr *c, double *v)
{
    size_t n = c->n, k = c->k;
    if (k == 0)
        return;
    krig(c, v);
    if (c->tau == 0.0)
        return;
    /* + tau Z Z' b, Z' b = L_K^-1 Y' b = L_K^-1 (Sigma~_c b)_S */
    for (size_t i = 0; i < k; i++)
        c->a[i] = v[c->pin[i]];
    md_lower_solve(k, c->K, c->a);
    for (size_t i = 0; i < k; i++)
        for (size_t r = 0; r < n; r++)
            v[r] += c->tau * c->Z[i * n + r] * c->a[i];
}

static gmm_status constr_solve(gmm_constr *c, const psolver *ps, double *v)
{
    gmm_status st = psolve(ps, v);
    if (!st)
        constr_solve_rest(c, v);
    return st;
}

gmm_status gmm_constr_solve(gmm_constr *c, const gmm_band *L, double *v)
{
    const psolver ps = {L, NULL};
    return constr_solve(c, &ps, v);
}

gmm_status gmm_constr_solve_with(gmm_constr *c, const gmm_factor *F, double *v)
{
    const psolver ps = {NULL, F};
    return constr_solve(c, &ps, v);
}

/* Sigma_c(i, j) - P~^-1(i, j) = tau (Z Z')(i, j) - (V V')(i, j). */
static double cov_change(const gmm_constr *c, size_t i, size_t j)
{
    size_t n = c->n;
    double s = 0.0;
    for (size_t t = 0; t < c->k; t++)
        s += (c->tau == 0.0 ? 0.0 : c->tau * c->Z[t * n + i] * c->Z[t * n + j]) -
             c->V[t * n + i] * c->V[t * n + j];
    return s;
}

void gmm_constr_sparse(const gmm_constr *c, gmm_sparse *S)
{
    for (size_t j = 0; j < S->n && c->k; j++)
        for (size_t p = S->colptr[j]; p < S->colptr[j + 1]; p++)
            S->val[p] += cov_change(c, S->rowind[p], j);
}

double gmm_constr_tau_sparse(const gmm_constr *c, const gmm_sparse *Q)
{
    double t = 0.0;
    for (size_t i = 0; i < c->k; i++)
        t = fmax(t, Q->val[Q->colptr[c->pin[i]]]); /* the diagonal leads its column */
    return t > 0.0 && isfinite(t) ? t : 1.0;
}

void gmm_constr_pin_sparse(const gmm_constr *c, double tau, gmm_sparse *P)
{
    for (size_t i = 0; i < c->k; i++)
        P->val[P->colptr[c->pin[i]]] += tau;
}

void gmm_constr_band(const gmm_constr *c, gmm_band *S)
{
    size_t n = S->n;
    for (size_t j = 0; j < n && c->k; j++) {
        double *col = gmm_band_col(S, j);
        size_t iend = j + S->kl < n ? j + S->kl : n - 1;
        for (size_t i = j; i <= iend; i++)
            col[i] += cov_change(c, i, j);
    }
}

void gmm_constr_draw(gmm_constr *c, double *v)
{
    if (c->k == 0)
        return;
    krig(c, v); /* a = L_G^-1 A v, the coordinates of z kriging removes */
    if (c->tau == 0.0)
        return;
    double st = sqrt(c->tau);
    for (size_t i = 0; i < c->k; i++)
        for (size_t r = 0; r < c->n; r++)
            v[r] += st * c->Z[i * c->n + r] * c->a[i];
}

double gmm_constr_logdet(const gmm_constr *c) { return c->k ? c->ldG + c->ldK : 0.0; }

void gmm_constr_krig(gmm_constr *c, double *v)
{
    if (c->k)
        krig(c, v);
}

/* GRADIENT of the conditioned moments (tau = 0, P = L L', Sigma = P^-1,
 * G = A Sigma A', V = Sigma A' L_G^-T, Sigma_c = Sigma - V V', m_c = Pi m
 * with Pi = I - Sigma A' G^-1 A).  A perturbation dSigma moves Sigma_c by
 * Pi dSigma Pi' and m_c by -Pi dSigma A' G^-1 A m, so with B the full
 * symmetric matrix of Sbar, s = Sigma_c mcbar and d = m - m_c = Sigma A'
 * G^-1 A m, the adjoint of the full Sigma of f = <B, -V V'> + mcbar' m_c is
 * Pi'B Pi - B - sym(Pi' mcbar (G^-1 A m)' A), and through dSigma =
 * -Sigma (dL L' + L dL') Sigma (Lbar = -2 Sigma Sigmabar Sigma L, lower part;
 * Sigma Pi' = Sigma_c, Sigma A' G^-1 A Sigma = V V', V' L = W' with W = L'V):
 *
 *   Lbar += lower(2 V (L^-1 B V)' + 2 (Sigma_c B V) W' + s (L'd)' + d (L's)'),
 *   mbar += Pi' mcbar = mcbar - A' L_G^-T V' mcbar.
 *
 * Each term an n x k (or n x 1) product restricted to L's band: O(n b k),
 * plus 2k banded solves and B V, O(n l k). */
gmm_status gmm_constr_rev(gmm_constr *c, const gmm_band *L, const double *m, const double *mc,
                          const double *mcbar, const gmm_band *Sbar, gmm_band *Lbar,
                          double *mbar)
{
    gmm_status st;
    size_t n = c->n, k = c->k;
    if (k == 0)
        return GMM_OK;
    if (c->tau != 0.0)
        return gmm_error(GMM_EINVAL, "gmm_constr_rev: pinned constraints have no reverse mode");
    if (L->n != n || Lbar->n != n || Lbar->kind != GMM_BAND_LOWER || Lbar->kl < L->kl ||
        (Sbar && (Sbar->n != n || Sbar->kind != GMM_BAND_SYMMETRIC)))
        return gmm_error(GMM_EDIM, "gmm_constr_rev: bands of order %zu expected", n);
    if (!c->rw && !(c->rw = gmm_malloc(4 * n * k + 3 * n, sizeof *c->rw)))
        return gmm_error(GMM_ENOMEM, "out of memory for the constraints' reverse mode");
    double *BV = c->rw, *SBV = BV + n * k, *LBV = SBV + n * k, *W = LBV + n * k;
    double *s = W + n * k, *Ld = s + n, *Ls = Ld + n;
    memset(BV, 0, n * k * sizeof *BV);
    for (size_t j = 0; Sbar && j < n; j++) { /* B V, B's off-diagonals half Sbar's */
        const double *col = gmm_band_col(Sbar, j);
        size_t iend = j + Sbar->kl < n ? j + Sbar->kl : n - 1;
        for (size_t t = 0; t < k; t++) {
            const double *vt = c->V + t * n;
            double *bt = BV + t * n, acc = col[j] * vt[j];
            for (size_t i = j + 1; i <= iend; i++) {
                double h = 0.5 * col[i];
                acc += h * vt[i];
                bt[i] += h * vt[j];
            }
            bt[j] += acc;
        }
    }
    for (size_t t = 0; t < k; t++) {
        memcpy(SBV + t * n, BV + t * n, n * sizeof *SBV);
        memcpy(LBV + t * n, BV + t * n, n * sizeof *LBV);
        if ((st = gmm_constr_solve(c, L, SBV + t * n)) ||
            (st = gmm_band_tri_solve_vec(L, GMM_NOTRANS, LBV + t * n)) ||
            (st = gmm_band_gemv(GMM_TRANS, 1.0, L, c->V + t * n, 0.0, W + t * n)))
            return st;
    }
    memcpy(s, mcbar, n * sizeof *s);
    if ((st = gmm_constr_solve(c, L, s)))
        return st;
    for (size_t i = 0; i < n; i++)
        Ls[i] = m[i] - mc[i];
    if ((st = gmm_band_gemv(GMM_TRANS, 1.0, L, Ls, 0.0, Ld)) ||
        (st = gmm_band_gemv(GMM_TRANS, 1.0, L, s, 0.0, Ls)))
        return st;
    for (size_t j = 0; j < n; j++) {
        double *col = gmm_band_col(Lbar, j);
        size_t iend = j + L->kl < n ? j + L->kl : n - 1;
        for (size_t i = j; i <= iend; i++) {
            double acc = s[i] * Ld[j] + (m[i] - mc[i]) * Ls[j];
            for (size_t t = 0; t < k; t++)
                acc += 2.0 * (c->V[t * n + i] * LBV[t * n + j] + SBV[t * n + i] * W[t * n + j]);
            col[i] += acc;
        }
    }
    /* mbar: a = L_G^-T V' mcbar, then mbar += mcbar - A' a */
    for (size_t t = 0; t < k; t++) {
        double acc = 0.0;
        for (size_t i = 0; i < n; i++)
            acc += c->V[t * n + i] * mcbar[i];
        c->a[t] = acc;
    }
    for (size_t t = k; t-- > 0;) {
        double acc = c->a[t];
        for (size_t r = t + 1; r < k; r++)
            acc -= c->G[r * k + t] * c->a[r];
        c->a[t] = acc / c->G[t * k + t];
    }
    for (size_t i = 0; i < n; i++) {
        double acc = mcbar[i];
        for (size_t t = 0; t < k; t++)
            acc -= c->A[t * n + i] * c->a[t];
        mbar[i] += acc;
    }
    return GMM_OK;
}
