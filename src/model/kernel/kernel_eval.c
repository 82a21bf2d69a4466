/* kernel_eval.c -- the numerics of a composite kernel (kernel_impl.h): its
 * covariance function, the state space of the whole tree with its reverse
 * mode, the time-varying observation row and the SDE.
 *
 * ZERO PROCESS NOISE.  constant, cosine and periodic are deterministic given
 * their state (Q(dt) = 0), so the state precision does not exist.  Their
 * TYPES report the exact Q = 0 (flag zero_noise).  A product with a factor
 * that has process noise has Q > 0 already (Q = Q1 (x) P2 + A1 P1 A1^T (x)
 * Q2); every other zero-noise factor (alone, in a sum, or in a product of
 * zero-noise factors only) is regularised by a tiny damping, i.e. the
 * composite uses the valid stationary kernel
 *
 *     k_reg(tau) = k(tau) exp(-|tau| * damp / Z)
 *
 * whose state space is A_reg = rho A, Q_reg = (1 - rho^2) Pinf + rho^2 Q,
 * rho = exp(-damp dt / Z), with Pinf unchanged.  Z is the largest number of
 * damped factors multiplied together in any term of the expanded kernel
 * (cosine * periodic: 2), so every term's envelope is exactly or at least
 * exp(-damp |tau|).  ssm.h chooses damp from the data (see there);
 * gmm_kernel_cov evaluates the damped covariance so a dense oracle of the
 * regularised model is exact.
 *
 * DEMODULATION.  A damped oscillator factor (cosine, periodic) is carried in
 * rotating coordinates u(t) = R(t - t0)^-1 x(t), R(tau) its undamped
 * transition: then A = rho I exactly, Q = (1 - rho^2) Pinf (Pinf is
 * rotation invariant, q_j^2 I per harmonic), and the rotation moves into a
 * time-varying observation row h(t - t0) = H R(t - t0) (gmm_kernel_obs).  An
 * exact change of variables, per state, that keeps the band: the
 * near-deterministic chain then has the Laplacian structure of a damped
 * constant, whose precision rounds far more gracefully (docs/accuracy.md,
 * Zero-noise kernels).  The period's gradient then flows through h.
 *
 * Sum:      x = (x_1, x_2, ...):  F, Pinf, A, Q block-diagonal, H concatenated.
 * Product:  x = x_L (x) x_R:      F = F_L (x) I + I (x) F_R, so
 *           A = A_L (x) A_R,  Pinf = P_L (x) P_R,  H = H_L (x) H_R,  and
 *           Q = Pinf - A Pinf A^T = Q_L (x) P_R + M_L (x) Q_R,  M_L = A_L P_L A_L^T,
 *           a sum of two positive semidefinite terms (no cancellation when the
 *           factors' Q are small).  An n-ary product is folded left.
 *
 * REVERSE MODE (full-matrix gradients, see kernel.h).  The tree is walked
 * root to leaves; each node hands its children the contractions of its own
 * adjoints: for C = X (x) Y, Xbar_ab += sum_ce Cbar_(ac)(be) Y_ce and Ybar
 * likewise; for M = A P A^T, Abar += (Mbar + Mbar^T) A P, Pbar += A^T Mbar A.
 * A leaf contracts its adjoints with its type's derivative matrices.  The
 * forward pass (gmm_kernel_stat, then gmm_kernel_disc at the same dt) saves
 * every node's A, Q, Pinf, every product's M_L, and every leaf's dA, dQ,
 * dPinf in the work arena.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/kernel.h"
#include "kernel_impl.h"
#include "../model_dense.h"

/* ---- covariance function ------------------------------------------------------ */

static void leaf_params(const knode *n, const double *theta, double *p)
{
    for (size_t i = 0; i < n->type->nparam; i++)
        p[i] = n->tix[i] == SIZE_MAX ? n->sval[i] : theta[n->tix[i]];
}

static double cov_node(const knode *n, const double *theta, double damp, double tau)
{
    if (n->op == KN_LEAF) {
        double p[GMM_KERNEL_MAXPARAM];
        leaf_params(n, theta, p);
        double k = n->type->cov(p, tau, NULL);
        return n->damped ? k * exp(-fabs(tau) * damp) : k; /* damp already shared */
    }
    double r = n->op == KN_SUM ? 0.0 : 1.0;
    for (size_t i = 0; i < n->nchild; i++) {
        double c = cov_node(n->child[i], theta, damp, tau);
        r = n->op == KN_SUM ? r + c : r * c;
    }
    return r;
}

double gmm_kernel_cov(const gmm_kernel *k, const double *theta, double damp, double tau)
{
    return cov_node(k->root, theta ? theta : k->value, damp * k->zweight, tau);
}

/* dk += w dk(tau)/dtheta of node n (w: the product of its siblings' values
 * up the tree); returns its value. */
static double cov_grad_node(const knode *n, const double *theta, double damp, double tau,
                            double w, double *dk)
{
    if (n->op == KN_LEAF) {
        double p[GMM_KERNEL_MAXPARAM], g[GMM_KERNEL_MAXPARAM] = {0.0};
        leaf_params(n, theta, p);
        double k = n->type->cov(p, tau, g), f = n->damped ? exp(-fabs(tau) * damp) : 1.0;
        for (size_t i = 0; i < n->type->nparam; i++)
            if (n->tix[i] != SIZE_MAX)
                dk[n->tix[i]] += w * f * g[i];
        return k * f;
    }
    double r = n->op == KN_SUM ? 0.0 : 1.0;
    for (size_t i = 0; i < n->nchild; i++) {
        double wi = w;
        for (size_t j = 0; n->op == KN_PROD && j < n->nchild; j++)
            if (j != i)
                wi *= cov_node(n->child[j], theta, damp, tau);
        double c = cov_grad_node(n->child[i], theta, damp, tau, wi, dk);
        r = n->op == KN_SUM ? r + c : r * c;
    }
    return r;
}

double gmm_kernel_cov_grad(const gmm_kernel *k, const double *theta, double damp, double tau,
                           double *dk)
{
    for (size_t i = 0; i < k->nparam; i++)
        dk[i] = 0.0;
    return cov_grad_node(k->root, theta ? theta : k->value, damp * k->zweight, tau, 1.0, dk);
}

double gmm_kernel_spacing_limit(const gmm_kernel *k, const double *theta, int rows,
                                size_t *param)
{
    double lim = 0.0;
    size_t which = SIZE_MAX;
    for (size_t l = 0; l < k->nleaves; l++) {
        const knode *n = k->leaves[l];
        const gmm_kernel_type *t = n->type;
        double r1 = rows ? t->min_dt_rel_rows : t->min_dt_rel;
        double r2 = rows ? t->min_dt_rel_osc_rows : t->min_dt_rel_osc;
        double rel = n->osc_partner ? fmax(r1, r2) : r1;
        if (t->scale_param >= t->nparam || rel <= 0.0)
            continue;
        size_t j = n->tix[t->scale_param];
        double v = rel * theta[j];
        if (v > lim) {
            lim = v;
            which = j;
        }
    }
    if (param)
        *param = which;
    return lim;
}

/* ---- work and validation ------------------------------------------------------- */

gmm_kernel_work *gmm_kernel_work_alloc(const gmm_kernel *k)
{
    gmm_kernel_work *w = gmm_calloc(1, sizeof *w);
    if (!w)
        goto fail;
    w->a = gmm_calloc(k->arena ? k->arena : 1, sizeof *w->a);
    w->lp = gmm_calloc(k->nleaves * GMM_KERNEL_MAXPARAM, sizeof *w->lp);
    if (!w->a || !w->lp)
        goto fail;
    return w;
fail:
    gmm_kernel_work_free(w);
    gmm_error(GMM_ENOMEM, "out of memory for the kernel workspace");
    return NULL;
}

void gmm_kernel_work_free(gmm_kernel_work *w)
{
    if (!w)
        return;
    gmm_free(w->a);
    gmm_free(w->lp);
    gmm_free(w);
}

gmm_status gmm_kernel_check(const gmm_kernel *k, const double *theta)
{
    for (size_t i = 0; i < k->nparam; i++)
        if (!(theta[i] > 0.0) || !isfinite(theta[i]))
            return gmm_error(GMM_EDOM, "parameter %s = %g must be positive and finite",
                             k->name[i], theta[i]);
    return GMM_OK;
}

/* ---- forward passes --------------------------------------------------------- */

static void stat_node(const gmm_kernel *k, gmm_kernel_work *w, knode *n)
{
    double *a = w->a;
    size_t d = n->d;
    if (n->op == KN_LEAF) {
        double *p = w->lp + n->leaf * GMM_KERNEL_MAXPARAM;
        n->type->stat(p, a + n->oP, a + n->odP, a + n->oH);
        return;
    }
    for (size_t i = 0; i < n->nchild; i++)
        stat_node(k, w, n->child[i]);
    if (n->op == KN_SUM) {
        md_zero(d * d, a + n->oP);
        size_t o = 0;
        for (size_t i = 0; i < n->nchild; i++) {
            const knode *c = n->child[i];
            for (size_t r = 0; r < c->d; r++) {
                memcpy(a + n->oP + (o + r) * d + o, a + c->oP + r * c->d, c->d * sizeof *a);
                a[n->oH + o + r] = a[c->oH + r];
            }
            o += c->d;
        }
    } else {
        const knode *L = n->child[0], *R = n->child[1];
        md_kron(L->d, a + L->oP, R->d, a + R->oP, a + n->oP);
        for (size_t i = 0; i < L->d; i++)
            for (size_t j = 0; j < R->d; j++)
                a[n->oH + i * R->d + j] = a[L->oH + i] * a[R->oH + j];
    }
}

gmm_status gmm_kernel_stat(const gmm_kernel *k, const double *theta, double damp,
                           gmm_kernel_work *w, double *Pinf, double *H)
{
    gmm_status st = gmm_kernel_check(k, theta);
    if (st)
        return st;
    if (!(damp >= 0.0) || !isfinite(damp))
        return gmm_error(GMM_EINVAL, "damping rate %g must be finite and >= 0", damp);
    for (size_t l = 0; l < k->nleaves; l++)
        leaf_params(k->leaves[l], theta, w->lp + l * GMM_KERNEL_MAXPARAM);
    w->damp = damp * k->zweight;
    stat_node(k, w, k->root);
    size_t dd = k->d * k->d;
    for (size_t i = 0; i < dd; i++)
        if (!isfinite(w->a[k->root->oP + i]))
            return gmm_error(GMM_EDOM, "stationary covariance not finite at these parameters");
    if (Pinf)
        memcpy(Pinf, w->a + k->root->oP, dd * sizeof *Pinf);
    if (H)
        memcpy(H, w->a + k->root->oH, k->d * sizeof *H);
    w->have_stat = 1;
    w->have_disc = 0;
    return GMM_OK;
}

static void disc_node(gmm_kernel_work *w, knode *n, double dt)
{
    double *a = w->a;
    size_t d = n->d, dd = d * d;
    if (n->op == KN_LEAF) {
        const gmm_kernel_type *t = n->type;
        double *p = w->lp + n->leaf * GMM_KERNEL_MAXPARAM;
        t->disc(p, dt, a + n->oA, a + n->oQ, a + n->odA, a + n->odQ);
        if (n->demod) {
            /* rotating coordinates: the rotation moves into h(tau) (DEMODULATION);
             * Q = 0 and dQ = 0 for a zero-noise type */
            md_zero(dd, a + n->oA);
            for (size_t i = 0; i < d; i++)
                a[n->oA + i * d + i] = 1.0;
            for (size_t j = 0; j < t->nparam; j++)
                if (!t->param[j].structural)
                    md_zero(dd, a + n->odA + j * dd);
        }
        if (n->damped && w->damp > 0.0) {
            /* A_reg = rho A, Q_reg = (1 - rho^2) Pinf + rho^2 Q (kernel.h); w->damp is
             * this factor's share damp/Z */
            double rho = exp(-w->damp * dt), g = -expm1(-2.0 * w->damp * dt), r2 = rho * rho;
            for (size_t i = 0; i < dd; i++) {
                a[n->oA + i] *= rho;
                a[n->oQ + i] = g * a[n->oP + i] + r2 * a[n->oQ + i];
            }
            for (size_t j = 0; j < t->nparam; j++) {
                if (t->param[j].structural)
                    continue;
                for (size_t i = 0; i < dd; i++) {
                    a[n->odA + j * dd + i] *= rho;
                    a[n->odQ + j * dd + i] = g * a[n->odP + j * dd + i]
                                             + r2 * a[n->odQ + j * dd + i];
                }
            }
        }
        return;
    }
    for (size_t i = 0; i < n->nchild; i++)
        disc_node(w, n->child[i], dt);
    if (n->op == KN_SUM) {
        md_zero(dd, a + n->oA);
        md_zero(dd, a + n->oQ);
        size_t o = 0;
        for (size_t i = 0; i < n->nchild; i++) {
            const knode *c = n->child[i];
            for (size_t r = 0; r < c->d; r++) {
                memcpy(a + n->oA + (o + r) * d + o, a + c->oA + r * c->d, c->d * sizeof *a);
                memcpy(a + n->oQ + (o + r) * d + o, a + c->oQ + r * c->d, c->d * sizeof *a);
            }
            o += c->d;
        }
    } else {
        const knode *L = n->child[0], *R = n->child[1];
        size_t dl = L->d;
        double *M = a + n->oM;
        md_kron(dl, a + L->oA, R->d, a + R->oA, a + n->oA);
        /* M = A_L P_L A_L^T; the Q_L block of Q_L (x) P_R holds A_L P_L as scratch */
        double *T = a + n->oMb; /* Mbar slot is free during the forward pass */
        md_gemm(dl, 0, 0, 1.0, a + L->oA, a + L->oP, 0.0, T);
        md_gemm(dl, 0, 1, 1.0, T, a + L->oA, 0.0, M);
        md_symmetrise(dl, M);
        md_kron(dl, a + L->oQ, R->d, a + R->oP, a + n->oQ);
        md_kron_acc(1.0, dl, M, R->d, a + R->oQ, a + n->oQ);
    }
}

gmm_status gmm_kernel_disc(const gmm_kernel *k, gmm_kernel_work *w, double dt, double *A,
                           double *Q)
{
    if (!w->have_stat)
        return gmm_error(GMM_EINVAL, "gmm_kernel_disc called before gmm_kernel_stat");
    if (!(dt > 0.0) || !isfinite(dt))
        return gmm_error(GMM_EINVAL, "time step %g must be positive and finite", dt);
    disc_node(w, k->root, dt);
    size_t dd = k->d * k->d;
    double *Ar = w->a + k->root->oA, *Qr = w->a + k->root->oQ;
    md_symmetrise(k->d, Qr);
    for (size_t i = 0; i < dd; i++)
        if (!isfinite(Ar[i]) || !isfinite(Qr[i]))
            return gmm_error(GMM_EDOM, "transition not finite at dt = %g", dt);
    if (A)
        memcpy(A, Ar, dd * sizeof *A);
    if (Q)
        memcpy(Q, Qr, dd * sizeof *Q);
    w->dt = dt;
    w->have_disc = 1;
    return GMM_OK;
}

/* ---- reverse pass ----------------------------------------------------------- */

static void zero_bars(knode *n, double *a, int aq)
{
    size_t dd = n->d * n->d;
    md_zero(dd, a + n->oPb);
    if (aq) {
        md_zero(dd, a + n->oAb);
        md_zero(dd, a + n->oQb);
    }
    if (n->op == KN_PROD && aq)
        md_zero(n->child[0]->d * n->child[0]->d, a + n->oMb);
    for (size_t i = 0; i < n->nchild; i++)
        zero_bars(n->child[i], a, aq);
}

static void rev_node(gmm_kernel_work *w, knode *n, int aq, double *thetabar)
{
    double *a = w->a;
    size_t d = n->d, dd = d * d;
    if (n->op == KN_LEAF) {
        const gmm_kernel_type *t = n->type;
        for (size_t j = 0; j < t->nparam; j++) {
            if (n->tix[j] == SIZE_MAX)
                continue;
            double g = md_dot(dd, a + n->oPb, a + n->odP + j * dd);
            if (aq)
                g += md_dot(dd, a + n->oAb, a + n->odA + j * dd)
                     + md_dot(dd, a + n->oQb, a + n->odQ + j * dd);
            thetabar[n->tix[j]] += g;
        }
        return;
    }
    if (n->op == KN_SUM) {
        size_t o = 0;
        for (size_t i = 0; i < n->nchild; i++) {
            knode *c = n->child[i];
            for (size_t r = 0; r < c->d; r++)
                for (size_t s = 0; s < c->d; s++) {
                    size_t src = (o + r) * d + o + s, dst = r * c->d + s;
                    a[c->oPb + dst] += a[n->oPb + src];
                    if (aq) {
                        a[c->oAb + dst] += a[n->oAb + src];
                        a[c->oQb + dst] += a[n->oQb + src];
                    }
                }
            o += c->d;
        }
    } else {
        knode *L = n->child[0], *R = n->child[1];
        size_t dl = L->d, dr = R->d;
        md_kron_rev(dl, a + L->oP, dr, a + R->oP, a + n->oPb, a + L->oPb, a + R->oPb);
        if (aq) {
            double *M = a + n->oM, *Mb = a + n->oMb;
            md_kron_rev(dl, a + L->oA, dr, a + R->oA, a + n->oAb, a + L->oAb, a + R->oAb);
            md_kron_rev(dl, a + L->oQ, dr, a + R->oP, a + n->oQb, a + L->oQb, a + R->oPb);
            md_kron_rev(dl, M, dr, a + R->oQ, a + n->oQb, Mb, a + R->oQb);
            /* M = A P A^T: Abar += (Mb + Mb^T) A P, Pbar += A^T Mb A.  M's own
             * slot (no longer needed) holds first A P, then Mb A. */
            md_gemm(dl, 0, 0, 1.0, a + L->oA, a + L->oP, 0.0, M);
            md_gemm(dl, 0, 0, 1.0, Mb, M, 1.0, a + L->oAb);
            md_gemm(dl, 1, 0, 1.0, Mb, M, 1.0, a + L->oAb);
            md_gemm(dl, 0, 0, 1.0, Mb, a + L->oA, 0.0, M);
            md_gemm(dl, 1, 0, 1.0, a + L->oA, M, 1.0, a + L->oPb);
        }
    }
    for (size_t i = 0; i < n->nchild; i++)
        rev_node(w, n->child[i], aq, thetabar);
}

gmm_status gmm_kernel_rev(const gmm_kernel *k, gmm_kernel_work *w, const double *Abar,
                          const double *Qbar, const double *Pbar, double *thetabar)
{
    int aq = Abar || Qbar;
    if (!w->have_stat || (aq && !w->have_disc))
        return gmm_error(GMM_EINVAL, "gmm_kernel_rev needs the forward pass first");
    size_t dd = k->d * k->d;
    zero_bars(k->root, w->a, aq);
    double *a = w->a;
    if (Pbar)
        memcpy(a + k->root->oPb, Pbar, dd * sizeof *a);
    if (Abar)
        memcpy(a + k->root->oAb, Abar, dd * sizeof *a);
    if (Qbar)
        memcpy(a + k->root->oQb, Qbar, dd * sizeof *a);
    rev_node(w, k->root, aq, thetabar);
    /* the products' M slots were overwritten: a further rev needs a new disc */
    w->have_disc = 0;
    return GMM_OK;
}

/* ---- time-varying observation row ------------------------------------------------ */

static void obs_node(gmm_kernel_work *w, knode *n, double tau)
{
    double *a = w->a;
    if (n->op == KN_LEAF) {
        if (n->demod)
            n->type->hmod(w->lp + n->leaf * GMM_KERNEL_MAXPARAM, tau, a + n->oHt, a + n->odH);
        else
            memcpy(a + n->oHt, a + n->oH, n->d * sizeof *a);
        return;
    }
    for (size_t i = 0; i < n->nchild; i++)
        obs_node(w, n->child[i], tau);
    if (n->op == KN_SUM) {
        size_t o = 0;
        for (size_t i = 0; i < n->nchild; i++) {
            memcpy(a + n->oHt + o, a + n->child[i]->oHt, n->child[i]->d * sizeof *a);
            o += n->child[i]->d;
        }
    } else {
        const knode *L = n->child[0], *R = n->child[1];
        for (size_t i = 0; i < L->d; i++)
            for (size_t j = 0; j < R->d; j++)
                a[n->oHt + i * R->d + j] = a[L->oHt + i] * a[R->oHt + j];
    }
}

gmm_status gmm_kernel_obs(const gmm_kernel *k, gmm_kernel_work *w, double tau, double *H)
{
    if (!w->have_stat)
        return gmm_error(GMM_EINVAL, "gmm_kernel_obs called before gmm_kernel_stat");
    obs_node(w, k->root, tau);
    memcpy(H, w->a + k->root->oHt, k->d * sizeof *H);
    return GMM_OK;
}

static void obs_rev_node(gmm_kernel_work *w, knode *n, double *thetabar)
{
    double *a = w->a;
    if (n->op == KN_LEAF) {
        if (!n->demod)
            return;
        for (size_t j = 0; j < n->type->nparam; j++)
            if (n->tix[j] != SIZE_MAX)
                thetabar[n->tix[j]] += md_dot(n->d, a + n->oHb, a + n->odH + j * n->d);
        return;
    }
    if (n->op == KN_SUM) {
        size_t o = 0;
        for (size_t i = 0; i < n->nchild; i++) {
            memcpy(a + n->child[i]->oHb, a + n->oHb + o, n->child[i]->d * sizeof *a);
            o += n->child[i]->d;
        }
    } else {
        const knode *L = n->child[0], *R = n->child[1];
        md_zero(L->d, a + L->oHb);
        md_zero(R->d, a + R->oHb);
        for (size_t i = 0; i < L->d; i++)
            for (size_t j = 0; j < R->d; j++) {
                double g = a[n->oHb + i * R->d + j];
                a[L->oHb + i] += g * a[R->oHt + j];
                a[R->oHb + j] += g * a[L->oHt + i];
            }
    }
    for (size_t i = 0; i < n->nchild; i++)
        obs_rev_node(w, n->child[i], thetabar);
}

gmm_status gmm_kernel_obs_rev(const gmm_kernel *k, gmm_kernel_work *w, double tau,
                              const double *Hbar, double *thetabar)
{
    if (!w->have_stat)
        return gmm_error(GMM_EINVAL, "gmm_kernel_obs_rev called before gmm_kernel_stat");
    if (!k->modulated)
        return GMM_OK;
    obs_node(w, k->root, tau);
    memcpy(w->a + k->root->oHb, Hbar, k->d * sizeof *Hbar);
    obs_rev_node(w, k->root, thetabar);
    return GMM_OK;
}

/* ---- SDE ---------------------------------------------------------------------- */

static gmm_status sde_node(const knode *n, gmm_kernel_work *w, double *F, double *LQL)
{
    size_t d = n->d, dd = d * d;
    double damp = w->damp;
    if (n->op == KN_LEAF) {
        n->type->sde(w->lp + n->leaf * GMM_KERNEL_MAXPARAM, F, LQL);
        if (n->damped && damp > 0.0) {
            /* F - damp I with Pinf kept stationary: L Qc L^T += 2 damp Pinf */
            for (size_t i = 0; i < d; i++)
                F[i * d + i] -= damp;
            md_axpy(dd, 2.0 * damp, w->a + n->oP, LQL);
        }
        return GMM_OK;
    }
    gmm_status st = GMM_OK;
    md_zero(dd, F);
    md_zero(dd, LQL);
    if (n->op == KN_SUM) {
        size_t o = 0;
        for (size_t i = 0; i < n->nchild && !st; i++) {
            const knode *c = n->child[i];
            size_t cd = c->d * c->d;
            double *Fc = gmm_malloc(2 * cd, sizeof *Fc);
            if (!Fc)
                return gmm_error(GMM_ENOMEM, "out of memory");
            st = sde_node(c, w, Fc, Fc + cd);
            for (size_t r = 0; r < c->d; r++)
                for (size_t s = 0; s < c->d; s++) {
                    F[(o + r) * d + o + s] = Fc[r * c->d + s];
                    LQL[(o + r) * d + o + s] = Fc[cd + r * c->d + s];
                }
            o += c->d;
            gmm_free(Fc);
        }
        return st;
    }
    const knode *L = n->child[0], *R = n->child[1];
    size_t dl = L->d, dr = R->d;
    double *buf = gmm_malloc(2 * (dl * dl + dr * dr) + dl * dl + dr * dr, sizeof *buf);
    if (!buf)
        return gmm_error(GMM_ENOMEM, "out of memory");
    double *FL = buf, *QL = FL + dl * dl, *FR = QL + dl * dl, *QR = FR + dr * dr;
    double *IL = QR + dr * dr, *IR = IL + dl * dl;
    st = sde_node(L, w, FL, QL);
    if (!st)
        st = sde_node(R, w, FR, QR);
    if (!st) {
        md_zero(dl * dl, IL);
        md_zero(dr * dr, IR);
        for (size_t i = 0; i < dl; i++)
            IL[i * dl + i] = 1.0;
        for (size_t i = 0; i < dr; i++)
            IR[i * dr + i] = 1.0;
        md_kron_acc(1.0, dl, FL, dr, IR, F);
        md_kron_acc(1.0, dl, IL, dr, FR, F);
        /* -(F P + P F^T) = LQL_L (x) P_R + P_L (x) LQL_R */
        md_kron_acc(1.0, dl, QL, dr, w->a + R->oP, LQL);
        md_kron_acc(1.0, dl, w->a + L->oP, dr, QR, LQL);
    }
    gmm_free(buf);
    return st;
}

gmm_status gmm_kernel_sde(const gmm_kernel *k, const double *theta, double damp,
                          gmm_kernel_work *w, double *F, double *LQL)
{
    gmm_status st = gmm_kernel_stat(k, theta, damp, w, NULL, NULL);
    if (st)
        return st;
    return sde_node(k->root, w, F, LQL);
}

