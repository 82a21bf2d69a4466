/* vi_impl.h -- what the files of a gmm_vi share.  Private.
 *
 * The files call one way: vi_fit.c -> vi.c -> vi_elbo.c -> vi_q.c, and
 * vi_predict.c -> vi_q.c. */
#ifndef GMM_VI_IMPL_H
#define GMM_VI_IMPL_H

#include <stddef.h>
#include <string.h>

#include "gmm/band.h"
#include "gmm/constr.h"
#include "gmm/factor.h"
#include "gmm/likelihood.h"
#include "gmm/obsmap.h"
#include "gmm/problem.h"
#include "gmm/vi.h"
#include "infer_impl.h"

struct gmm_vi {
    gmm_problem *prob;
    gmm_latent *lat;
    gmm_vi_params par;
    gmm_lik lik;              /* values of the current evaluation */
    size_t n, kl, b, sk, dk, nrows, nobs, nl, np, nparam, nvar, nrowsG;
    size_t ncoef, c0;         /* coefficients: theta[c0 ..] (problem.h) */
    double *offs, *oshift;    /* X beta at every row (nrows; also its adjoint), observed */
    int varies, rows, have_start;
    const char *start;
    /* observed rows in the latent's row order; oord sorts them by offset.
     * Their coefficients as the latent's map keeps them (latent.h): row i's
     * entries orowptr[i] .. orowptr[i + 1] of ocoef, reading latents ooff[i]
     * + opos[k] (opos NULL: dense windows, ooff[i] + k - orowptr[i]);
     * coef_all and coefbar_all every row's (nnz). */
    size_t *orow, *ooff, *oord, *orowptr, *opos;
    gmm_obsmap map;           /* the latent's: every row (coef_all) */
    gmm_obsmap omap;          /* the observed rows' view of ooff, orowptr, opos, ocoef */
    double *oy, *oe, *ocoef, *coef_all, *coefbar_all;
    double *ow;           /* observed rows' prior weights (NULL: none) */
    double *mu, *s2, *ea, *ec; /* per observed row */
    unsigned char *rule;      /* Gauss-Hermite points per row / 4 (adaptive) */
    int freeze;               /* use rule[] as is (inside a line search) */
    double *dpar;             /* np, summed */
    gmm_band *L, *Lbar, *S, *Sbar;
    gmm_band *D, *Dlo;        /* Q_p - L L' (rows: with its low part) */
    gmm_band *Q, *Qbar;       /* assembled prior (NULL with rows) */
    gmm_band *K, *Kbar;       /* the start's chol of P; Kbar: fQ's factor's adjoint */
    gmm_factor *fQ;           /* Q's factorisation (family without log|Q|; NULL with rows) */
    double *grow, *Sg, *work; /* kl + 1 each, 4 (kl + 1) */
    double *cwork;            /* K's Cholesky's and its reverse's panels */
    size_t seg;               /* rows: rows per segment of G */
    double *Smo;              /* rows: per segment E[v v'] (N seg), then E[v x'] (N seg) */
    int qrev;                 /* rows: the family's reverse from q's moments (latent.h) */
    double *rw;               /* rows: one segment's rows and window (seg_moments) */
    size_t *rfirst;           /* rows: the segment's first columns, then widths */
    double *mlo;              /* rows: n, the low parts of the rows' share of mbar */
    double *lambda, *theta, *thbar, *tmp;
    int logdet_here;          /* log|Q| from K in the last evaluation */
    gmm_constr *con;          /* A x = 0 (NULL: none), conditioned under q's P (no pins) */
    gmm_band *Sc;             /* Sigma_c's band (sk) */
    double *mc, *mcbar;       /* m_c = krig(m) and its adjoint (n) */
    double ldq;               /* log|L L'| = 2 sum of the log-diagonal (unpack) */
};

static inline size_t smax(size_t a, size_t b) { return a > b ? a : b; }

/* The latent read by entry k of observed row i. */
static inline size_t entry_at(const gmm_vi *v, size_t i, size_t k)
{
    return v->ooff[i] + gmm_obsmap_row_pos(&v->omap, k, v->orowptr[i]);
}

/* The observed rows' coefficients from every row's (coef_all). */
static inline void gather_coef(gmm_vi *v)
{
    for (size_t i = 0; i < v->nobs; i++)
        memcpy(v->ocoef + v->orowptr[i], v->coef_all + gmm_obsmap_row_lo(&v->map, v->orow[i]),
               (v->orowptr[i + 1] - v->orowptr[i]) * sizeof *v->ocoef);
}

/* vi_q.c: L from lambda (GMM_EDOM where a diagonal is not a positive
 * normal double); lambda's band from L; with constraints, the state's m
 * replaced by q's mean; q's Sigma_c band under constraints. */
gmm_status vi_unpack(gmm_vi *v, const double *lambda);
void vi_pack(gmm_vi *v);
gmm_status vi_canonical(gmm_vi *v);
gmm_status vi_constrained_band(gmm_vi *v);

/* vi_elbo.c: the likelihood's parameters and the coefficients at theta;
 * Gauss-Hermite points for observed row i at variance s2. */
gmm_status vi_set_hyper(gmm_vi *v, const double *theta);
size_t vi_rule_of(gmm_vi *v, size_t i, double s2);

#endif
