/* marglik_impl.h -- what marglik.c (workspace, assembled evaluation,
 * constraints), marglik_rows.c (square-root form) and marglik_grad.c
 * (reverse mode, posterior) share: the workspace's layout and the
 * evaluation's finish.  Private to those files.
 */
#ifndef GMM_MARGLIK_IMPL_H
#define GMM_MARGLIK_IMPL_H

#include "gmm/marglik.h"

#include <stddef.h>
#include <stdint.h>

#include "gmm/constr.h"

/* Rows per block of the square-root form (gmm_marglik_eval_rows): a
 * state-space model's segment is an interval's d transition rows and an
 * observation, and a block merges whole segments while it holds fewer than
 * BLOCK_MERGE rows (segment_fits; 32: about 5 intervals of the CO2 model,
 * the fastest of 16 .. 64 -- fewer sweep states twice more often,
 * more give the gradient's undo more lanes).  With block starts a block may
 * grow to BLOCK_MAX + kl + 1 rows so that prior rows with one first column
 * are never split (ROW MOMENTS). */
#define BLOCK_MAX 48
#define BLOCK_MERGE 32
/* Prior rows read at once through gmm_prior_rows' rows (a segment's). */
#define QCAP 64
/* An observation in a block's row sources (bsrc): OBS_TAG | its index. */
#define OBS_TAG (~(SIZE_MAX >> 1))

/* What ROW MOMENTS needs of one block of the fold beside its tape: where
 * its row sources (m of them) were saved, its prior rows g0 .. g1 - 1. */
typedef struct {
    size_t spos, g0, g1, tpos; /* tpos: the block's position on the tape */
} row_block;

struct gmm_marglik_work {
    size_t n, kl;
    /* P and L = chol(P) share storage (the Cholesky runs in place), as do
     * Lbar and Pbar (chol_decomp_rev may alias them): two views each, so
     * every band the band module sees has the kind it expects. */
    double *pdata, *bardata;
    gmm_band P, L, Pbar, Lbar;
    gmm_band *LQ;    /* chol(Q), when the prior log-determinant is computed here */
    double *r;       /* L^{-1} E'y */
    double *work, *work2; /* n doubles each */
    double *cwork;        /* the band Cholesky's and its reverse's panels */
    /* square-root form: a block of up to BLOCK_MAX rows (first columns,
     * entries, where each came from) and gmm_band_chol_add_rows' work */
    size_t *bfirst, *bsrc, bcap;
    double *bv, *bwork;
    /* prior rows read ahead by G->rows: up to QCAP, their first columns
     * and widths */
    size_t *qfirst, *qwidth;
    double *qv;
    /* ROW MOMENTS: recorded by eval_rows when record is set; all grow as
     * needed and are kept (later evaluations allocate nothing) */
    int record, recorded;
    double rows_tau;      /* the pins the rows hold (gmm_marglik_rows_pinned; NAN: none) */
    gmm_band_tape tape;
    row_block *rb;
    size_t nrb, rbcap;
    size_t *src;          /* the blocks' row sources */
    size_t nsrc, srccap;
    gmm_band_tape mwork;  /* gmm_band_chol_rows_moments' buffer */
    double *vbuf;         /* a block's vv and vx */
    size_t vcap;
    /* CONSTRAINTS (gmm_marglik_constrain; NULL: none) and the conditioned
     * posterior mean of the last eval */
    gmm_constr *con;
    double *cmu;
    double *ovar;         /* the next row moments' observation variances, or NULL */
    double *ubuf;         /* ROW MEANS: R's rows' lanes, then a block's (ucap doubles) */
    size_t ucap;
    /* What the last successful eval saw. */
    int valid, prior_here;
    const gmm_obs *obs;
    double noise, yy, rr;
};

/* Shared coefficient rows (coef_stride 0, a state-space model's H): the
 * pairs b <= a with c_a c_b != 0, at most PAIRS_MAX of them (else 0 and the
 * general loops run).  Every observation touches only these slots. */
#define PAIRS_MAX 64
typedef struct {
    size_t n, a[PAIRS_MAX], b[PAIRS_MAX];
    double v[PAIRS_MAX]; /* c_a c_b */
} obs_pairs;

static inline void shared_pairs(const gmm_obs *obs, obs_pairs *p)
{
    p->n = 0;
    if (obs->coef_stride != 0 || obs->nobs == 0)
        return;
    const double *c = obs->coef;
    for (size_t b = 0; b < obs->width; b++)
        for (size_t a = b; a < obs->width && c[b] != 0.0; a++) {
            if (c[a] == 0.0)
                continue;
            if (p->n == PAIRS_MAX) {
                p->n = 0;
                return;
            }
            p->a[p->n] = a;
            p->b[p->n] = b;
            p->v[p->n++] = c[a] * c[b];
        }
}

/* r = E'y (length obs->n, overwritten); returns y'y.  Both forms of the
 * evaluation start from it. */
double marglik_obs_rhs(const gmm_obs *obs, double *r);

/* E against a workspace of order n and bandwidth kl, the noise, the data. */
gmm_status marglik_check_obs_map(const gmm_obs *obs, double noise, const gmm_marglik_work *w);

/* From L (in w->L) and r = E'y (in w->r): the log-likelihood, and what the
 * reverse mode and the posterior keep. */
gmm_status marglik_finish(gmm_marglik_work *w, const gmm_obs *obs, double noise,
                          double logdet_q, double yy, double *loglik);

/* The same under constraints (marglik.c, CONSTRAINTS), the factor's pins
 * tau. */
gmm_status marglik_finish_constrained(gmm_marglik_work *w, const gmm_obs *obs, double noise,
                                      double logdet_q, double yy, double tau, double *loglik);

#endif
