/* latent_asm.h -- the interface glue shared by the latents whose prior is
 * an assembled banded precision Q(theta) (graph and stacked latents): the
 * exact Gaussian likelihood through marglik, its posterior, and the pieces
 * of the whitening W = L^-T (L L' = Q^, Q with pinned latents' rows and
 * columns replaced by the identity's) common to both.  What differs -- Q's
 * assembly, the constraints' normaliser and pins, the observation map --
 * comes in as a latent_asm's callbacks and fields.  Private to src/model/. */
#ifndef GMM_LATENT_ASM_H
#define GMM_LATENT_ASM_H

#include "gmm/latent.h"
#include "gmm/obsmap.h"


/* The exact Gaussian likelihood's workspace, allocated by the family (Q and
 * Qbar n x n SYMMETRIC bands of Q's bandwidth, w for n and that bandwidth,
 * ooff and oy nrows, ocoef nrows x width with sparse rows, else NULL), and
 * the band Cholesky's panels (cwork, ccap doubles: latent_asm_chol_work's),
 * freed by latent_asm_gauss_free. */
typedef struct {
    gmm_band *Q, *Qbar;
    gmm_marglik_work *w;
    size_t *ooff;
    double *oy, *ocoef, one;
    gmm_obs obs;
    double *cwork;
    size_t ccap;
} latent_asm_gauss;

/* The adapter: the prior's precision as the family assembles it, the data
 * rows and the Gaussian workspace.  It is the first member of the family's
 * impl, so that latent_asm_gaussian and latent_asm_posterior* serve as its
 * vtable entries (latent_impl.h); ctx (the impl) is handed back to every
 * callback. */
typedef struct {
    void *ctx;
    const char *what;     /* the latent's name in messages */
    size_t n, nparam;
    size_t npin;          /* pinned latents (0: a proper prior) */
    const size_t *pin;    /* npin (owned by the family) */
    /* Q (n x n, SYMMETRIC band) at theta (nparam) */
    gmm_status (*assemble)(void *ctx, const double *theta, gmm_band *Q);
    /* thetabar += sum over stored entries of Qbar dQ/dtheta */
    gmm_status (*assemble_rev)(void *ctx, const double *theta, const gmm_band *Qbar,
                               double *thetabar);
    /* NULL: none.  Called after Q's assembly at theta with the observed
     * rows of y and the noise; *given = 1 when the prior's log-determinant
     * for marglik is in *ld (intrinsic priors), 0 for Q's own. */
    gmm_status (*normaliser)(void *ctx, const double *theta, const double *y, double noise,
                             const gmm_band *Q, double *ld, int *given);
    /* Qbar += ldbar d(ld)/dQ after a normaliser that gave ld */
    gmm_status (*normaliser_rev)(void *ctx, double ldbar, gmm_band *Qbar);
    /* gs's bands and marglik workspace on first use (GMM_ENOMEM) */
    gmm_status (*work)(void *ctx);
    gmm_obsmap map;       /* the data rows (a view of the latent's; dense
                           * maps here are unit rows of width 1) */
    latent_asm_gauss gs;
} latent_asm;

/* Free g's members (not g); NULL members are skipped. */
void latent_asm_gauss_free(latent_asm_gauss *g);

/* The vtable's gaussian (impl starts with a latent_asm): log p(y | theta,
 * noise) into *loglik with, when thetabar (nparam) is not NULL, its
 * gradient in theta (overwritten) and, when noisebar is not NULL, in the
 * noise variance.  y has map.nrows entries, NaN for missing.  GMM_EDOM:
 * noise not positive and finite; GMM_EINVAL: an infinite y (index r); the
 * callbacks' and marglik's errors. */
gmm_status latent_asm_gaussian(void *impl, const double *theta, const double *y, double noise,
                               double *loglik, double *thetabar, double *noisebar);

/* The vtable's posterior of the last latent_asm_gaussian
 * (gmm_marglik_posterior, mean n, cov n x n band) and its solve
 * (gmm_marglik_posterior_solve, v n, in place).  GMM_EINVAL naming the
 * latent when there was no evaluation. */
gmm_status latent_asm_posterior(void *impl, double *mean, gmm_band *cov);
gmm_status latent_asm_posterior_solve(void *impl, double *v);

/* B's (SYMMETRIC band) row and column i set to zero. */
void latent_asm_zero_rowcol(gmm_band *B, size_t i);
/* B's pinned rows and columns (a->pin) replaced by the identity's. */
void latent_asm_pin(const latent_asm *a, gmm_band *B);

/* The work of gmm_band_chol_decomp_work and _rev_work on a band of lower
 * bandwidth kl, kept in a->gs and grown on first use, so that the prior's
 * factorisations at every evaluation and whitening allocate nothing after
 * the first.  NULL when it cannot be had: the band routines then allocate
 * their own (and return GMM_ENOMEM if they cannot either). */
double *latent_asm_chol_work(latent_asm *a, size_t kl);

/* L = chol(Q^(theta)), assembled in L's storage (n x n, Q's bandwidth; its
 * kind set SYMMETRIC first, LOWER after).  The callbacks' errors;
 * GMM_ENOTPD from the Cholesky. */
gmm_status latent_asm_factor(latent_asm *a, const double *theta, gmm_band *L);

/* GMM_EINVAL naming fn unless ready and a and b are not NULL: the
 * whitening's common argument check. */
gmm_status latent_asm_wready(int ready, const double *a, const double *b, const char *fn);
/* The same for whiten_rev (latent.h): thetabar not NULL, v NULL only when
 * the last whiten's z is kept (z_ok), xbar NULL only when the last
 * whiten_t's g is (g_ok). */
gmm_status latent_asm_wready_rev(int ready, int z_ok, int g_ok, const double *v,
                                 const double *xbar, const double *thetabar);

/* z = L^-T P_S v (n; z may alias v; P_S zeroes the pinned entries), with
 * reach (gmm_band_tri_reach of L) or, when NULL, the plain solve. */
gmm_status latent_asm_whiten_z(const latent_asm *a, const gmm_band *L, const size_t *reach,
                               const double *v, double *z);

/* Lb = the adjoint in Q of c = zbar . z, z = L^-T P_S v (z from
 * latent_asm_whiten_z), pinned rows and columns dropped (constants): Lb is
 * L's shape, overwritten and left SYMMETRIC; work n.  g: L^-1 zbar when the
 * caller has it (the whitening's transpose), which spares the solve (zbar
 * then unused), else NULL.  The band routines' errors. */
gmm_status latent_asm_factor_rev(latent_asm *a, const gmm_band *L, const double *z,
                                 const double *zbar, const double *g, gmm_band *Lb,
                                 double *work);

#endif
