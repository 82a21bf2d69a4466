/* ssm_impl.h -- the state-space model's private state, shared by ssm.c
 * (layout), ssm_prior.c (blocks, prior precision, marginal likelihood and
 * their reverse modes) and ssm_predict.c.  Private to src/model/. */
#ifndef GMM_SSM_IMPL_H
#define GMM_SSM_IMPL_H

#include <stddef.h>

#include "gmm/band.h"
#include "gmm/marglik.h"
#include "gmm/ssm.h"

/* A reader of the prior's square root (SQUARE ROOT in ssm_prior.c): row
 * next is row p of interval k, so rows read in order need no division. */
typedef struct {
    const struct gmm_ssm *m;
    size_t next, k, p;
} ssm_cursor;

struct gmm_ssm {
    const gmm_kernel *k;
    gmm_ssm_params par;
    size_t n, K, d, N, kl, nobs, np;
    double *x, *y;        /* n, caller's row order (y: NAN until gmm_ssm_set_y) */
    size_t *order;        /* n: rows sorted by x (stable) */
    int ydata;            /* gmm_ssm_set_y was called */
    int prior_ok;         /* gmm_ssm_prior succeeded; nothing else ran since */
    int (*progress)(void *user, size_t done, size_t total); /* predictions */
    void *progress_user;
    double *t;            /* K state inputs */
    size_t *row_state;    /* n */
    size_t ng;            /* distinct intervals */
    double *gdt;          /* ng */
    size_t *gcount;       /* ng */
    size_t *ig;           /* K - 1: group of the interval ending at state k + 1 */
    size_t imin;          /* an interval (ending at state imin + 1) of the smallest dt */
    size_t *obs_off;
    double *obs_y, *H, *Hp; /* H in kernel order, and in band order (see BLOCKS) */
    size_t *perm;           /* d: band position p of a state holds variable perm[p] */
    size_t nb, *boff;       /* blocks: band positions boff[b] .. boff[b+1]-1 */
    int *dblk;              /* nb: damped blocks (ssm_damped.c; NULL until asked) */
    double *bs;             /* 10 smax^2: per-block scratch */
    gmm_obs obs;
    /* demodulated kernels (kernel.h, DEMODULATION): one observation row per
     * observation, and the posterior for the gradient through them */
    int modulated;
    double *Hobs, *mu;
    gmm_band *cov;
    double damp, noise; /* noise: of the last evaluation */
    size_t nmerged;
    /* numeric */
    gmm_kernel_work *kw;
    double *blk;          /* per group: A, W, WA, AtWA, S1, S2, S3 */
    double *ldQ;          /* ng */
    double *P, *W0, *T;   /* d^2, d^2, 4 d^2 scratch */
    double *C0;           /* d^2: chol(Pinf)^-1 in band order (SQUARE ROOT) */
    double *L0;           /* d^2: chol(Pinf) in band order (ROWS GRADIENT) */
    double *xl;           /* ROWS GRADIENT: two states' lanes (xlcap doubles) */
    size_t xlcap;
    size_t *rowstart;     /* d: first band position of each position's block */
    int rows;             /* this evaluation uses the square-root form */
    double bound;         /* the Cholesky's rounding bound at the last theta */
    double *tpl;          /* d (kl + 1): one state's band columns (see STATE COLUMNS) */
    double *rtpl;         /* (ng + 1) d (kl + 1): per group the d rows of the square
                           * root, then C0's (SQUARE ROOT), each zero-padded */
    double ldP;
    gmm_marglik_work *mw; /* the prior precision is assembled in its band */
    /* whitening (ssm_whiten.c): one buffer, allocated by the first
     * gmm_ssm_whiten_setup; per group d x d in band order, nonzero on the
     * blocks only: A, chol(Q) and their gradients; chol(Pinf) and its
     * gradient; x of whiten_rev's forward pass (N); two d-vectors; the
     * setup's theta; what whiten_rev reuses: v and x of the last whiten
     * and every lam_k of the last whiten_t (N each) */
    double *wbuf, *wA, *wL, *wAb, *wLb, *wL0, *wL0b, *wx, *wlam, *wtheta, *wsv, *wsx, *wslam;
    int wready;      /* the setup succeeded */
    int wsx_ok, wslam_ok; /* whiten, whiten_t since the setup */
    /* the prior's square root (ssm_rows.c): one buffer, allocated by the
     * first gmm_ssm_prior_rows: per group Cbar and (C A)bar (d x d, band
     * order), C0bar, the forward call's theta; the cursor its G reads
     * through */
    double *rbuf, *rCb, *rCAb, *rC0b, *rtheta;
    ssm_cursor rcur;
    int rready; /* the last gmm_ssm_prior_rows succeeded */
    /* weighted smoothing (ssm_wls.c): one buffer, allocated by the first
     * gmm_ssm_wls: the weighted observation rows (n d), each observation's
     * weight and row (n each), N-vectors (mean, zeta, right-hand side,
     * scratch), the row means (2 N, then 2 d of scratch) and the
     * observations' variances (n);
     * log|Q_prior| at the blocks */
    double *lbuf, *lH, *lw, *lmu, *lz, *lb, *lx, *lgx, *lvar, *lhr, lld;
    size_t *lrow;
    int lready;  /* the last gmm_ssm_wls succeeded and recorded its fold */
    int lblocks; /* the blocks are a gmm_ssm_wls's at its theta (for theta NULL) */
    /* objective */
    char **oname;
    double *oval;
    int *opos, *ofix;
};

/* Per group: A, W = Q^-1, W A, A' W A, the gradient sums S1..S3, and for
 * the square-root form C = chol(Q)^-1 and C A (SQUARE ROOT), and A and
 * chol(Q) for its gradient's states (ROWS GRADIENT), these four in band
 * order. */
enum { B_A, B_W, B_WA, B_AWA, B_S1, B_S2, B_S3, B_C, B_CA, B_AB, B_L, B_N };

static inline double *blk(const gmm_ssm *m, size_t g, int which)
{
    return m->blk + (g * B_N + (size_t)which) * m->d * m->d;
}

/* out (s x s) = M[idx, idx], M d x d row-major; and back. */
static inline void ssm_gather(size_t d, const double *M, const size_t *idx, size_t s, double *out)
{
    for (size_t i = 0; i < s; i++)
        for (size_t j = 0; j < s; j++)
            out[i * s + j] = M[idx[i] * d + idx[j]];
}

static inline void ssm_scatter(size_t d, double *M, const size_t *idx, size_t s, const double *in)
{
    for (size_t i = 0; i < s; i++)
        for (size_t j = 0; j < s; j++)
            M[idx[i] * d + idx[j]] = in[i * s + j];
}

/* Everything up to the marginal likelihood at theta (kernel parameters)
 * with Gaussian noise `noise` on the observed rows (ssm_prior.c); grad: a
 * gradient will follow. */
gmm_status ssm_forward(gmm_ssm *m, const double *theta, double noise, double *loglik, int grad);

/* Pinf, H and Pinf^-1 (W0), C0 = chol(Pinf)^-1 at theta (ssm_prior.c). */
gmm_status ssm_pinf(gmm_ssm *m, const double *theta);

/* The d x d blocks at theta (Pinf, C0, and per interval group A, W, W A,
 * A' W A, C, C A) and log|Q_prior| into *logdet, with no spacing check
 * (ssm_prior.c). */
gmm_status ssm_blocks(gmm_ssm *m, const double *theta, double *logdet);

/* The Cholesky's rounding bound at the blocks of the last ssm_blocks, with
 * observations of total precision obs_prec (sum of 1/noise) (ssm_prior.c,
 * CHOICE OF FACTORISATION). */
double ssm_chol_rounding_bound(const gmm_ssm *m, double obs_prec);

/* ROWS GRADIENT in two steps (ssm_prior.c): the row moments of the last
 * recorded square-root evaluation into the per-group sums S1, S2 (and the
 * first rows' into T + 3 d^2), *noisebar (may be NULL) += dlogp/dnoise;
 * then grad += the chain from those sums to the kernel parameters.  A
 * caller may add to the sums in between (ssm_wls.c). */
gmm_status ssm_rows_moments(gmm_ssm *m, double *noisebar);
gmm_status ssm_rows_chain(gmm_ssm *m, double *grad);

/* Refuses inputs closer than the accuracy limit (ssm_prior.c). */
gmm_status ssm_check_spacing(gmm_ssm *m, const double *theta, int chol_limit);

/* Whether the automatic choice takes the square-root form: damping, a
 * spacing below the Cholesky's limit, or its bound above tol (ssm_prior.c). */
int ssm_rows_rule(gmm_ssm *m, const double *theta, double tol);

/* The square-root form's fold of the prior rows at the last ssm_blocks and
 * m->obs with noise m->noise (log|Q_prior| = logdet), recorded for the
 * row moments when record is set (ssm_prior.c). */
gmm_status ssm_fold(gmm_ssm *m, double logdet, int record, double *loglik);

/* Row i of the square root G (SQUARE ROOT in ssm_prior.c) through the
 * cursor ctx (an ssm_cursor on m): first column into *first, entries into
 * v, returns the width.  Any order; consecutive rows cost no division. */
size_t ssm_prior_row(void *ctx, size_t i, size_t *first, double *v);

#endif
