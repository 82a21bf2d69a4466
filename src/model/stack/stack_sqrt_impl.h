/* stack_sqrt_impl.h -- the square-root form's workspace and the steps
 * that stack_sqrt.c (fold, likelihood, gradient) shares with
 * stack_sqrt_wls.c (weighted smoothing, prior rows).  Private to
 * src/model/stack/. */
#ifndef GMM_STACK_SQRT_IMPL_H
#define GMM_STACK_SQRT_IMPL_H

#include "stack_impl.h"

/* One damped kernel component's square root at theta and its blocks. */
typedef struct {
    size_t k;              /* component */
    gmm_prior_rows G;      /* its rows (owned by the SSM) */
    double ld;             /* log|Q_k| */
    size_t nb, blk0;       /* its blocks, their first index in the flat arrays */
} sq_kern;

struct stack_sq {
    size_t n, kl, nk, nblk, nG, nobs;
    gmm_band *Qr;          /* Q_r, factorised in place */
    gmm_band *S, *Qb, *Sr; /* Sigma's band; an adjoint band; Q_r^-1's band */
    gmm_marglik_work *w;
    sq_kern *kern;
    /* per damped-kernel block (flat over the kernels): damped, p, T, and
     * the accumulators |G_b mu|^2, (G_b zeta).(G_b mu), sum (E'WE Sigma)_ii,
     * its latent count */
    int *bdamp;
    double *bp, *bgm, *bgz, *bdl, *bcnt, *pbar;
    /* merged prior rows in order of first column: gsrc[i] < n: L_r' row at
     * that column; else kernel row (gker[i], grow[i]); gfirst[i] */
    size_t *gsrc, *gker, *grow, *gfirst;
    /* per latent: its damped block's flat index (SIZE_MAX: none) */
    size_t *lblk;
    /* data rows by offset (order), the observed ones' windows */
    size_t *order, *ooff, *orow;
    double *ocoef, *oy, *owt;
    gmm_obs obs;
    double *mu, *zeta, *vloc, *xloc, *gpart, *coefbar;
    double *theta;
    double noise, ld, tau; /* tau: the pins in Q_r's factor (constraints) */
    int weighted, have_theta, have_grad;
};

/* Kernel row i of s->kern[q] into v at its local window; returns the width
 * and the local first column. */
static inline size_t kern_row(struct stack_sq *s, size_t q, size_t i, size_t *lfirst, double *v)
{
    const gmm_prior_rows *G = &s->kern[q].G;
    return G->row(G->ctx, i, lfirst, v);
}

/* The workspace of c (c->sqrt_work) on first use; GMM_ENOMEM. */
gmm_status stack_sq_alloc(stack_impl *c, const gmm_latent *l);
/* The prior at theta: Q_r factorised, each kernel's rows and blocks; log|Q|
 * into *ld. */
gmm_status stack_sq_eval_prior(stack_impl *c, gmm_latent *l, const double *theta, double *ld);
/* The fold at theta (NULL: the last prior's) with the data rows of y (NAN:
 * unobserved), each with weight wt[r] (wt NULL: all 1, noise variance
 * noise); log p(y) into *loglik. */
gmm_status stack_sq_eval(stack_impl *c, gmm_latent *l, const double *theta, const double *y,
                         const double *wt, double noise, double *loglik);
/* The merged prior rows (gmm_prior_rows's row, ctx the stack_impl). */
size_t stack_sq_merged_row(void *ctx, size_t i, size_t *first, double *v);
/* (Sigma a_r)_i for data row r. */
double stack_sq_sigma_a(const struct stack_sq *s, const gmm_latent *l, size_t r, size_t i);
/* Per damped block: acc[b] += (G_b x) . (G_b y) over its rows (y NULL: x). */
void stack_sq_kern_dots(stack_impl *c, const double *x, const double *y, double *acc);
/* thetabar += the chain of Qbar (other components) and Kbar (the damped
 * kernels' undamped blocks, logdetbar on their log|Q_k|) through the
 * entries. */
gmm_status stack_sq_chain_entries(stack_impl *c, const gmm_band *Qbar, const gmm_band *Kbar,
                                  double logdetbar, double *thetabar);
/* thetabar += sum_b pbar_b dp_b / dtheta over the damped blocks. */
gmm_status stack_sq_chain_damped(stack_impl *c, const double *pbar, double *thetabar);
/* After stack_sq_eval: Sigma's band and mu, thetabar += Fisher's part and
 * *noisebar (may be NULL) the noise variance's. */
gmm_status stack_sq_fisher(stack_impl *c, gmm_latent *l, double *thetabar, double *noisebar);

#endif
