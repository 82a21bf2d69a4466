/* problem_impl.h -- what the files of a gmm_problem share.  Private.
 *
 * The files call one way: problem_joint.c and problem_predict.c above
 * problem_whiten.c and problem_sparse.c above problem.c above
 * problem_laplace.c above problem_coef.c (each may call any below it). */
#ifndef GMM_PROBLEM_IMPL_H
#define GMM_PROBLEM_IMPL_H

#include <stddef.h>

#include "gmm/band.h"
#include "gmm/factor.h"
#include "gmm/laplace.h"
#include "gmm/obsmap.h"
#include "gmm/problem.h"
#include "gmm/sparse.h"
#include "infer_impl.h"

struct gmm_problem {
    gmm_laplace_params lpar; /* every Laplace evaluation's (the caller's stop) */
    gmm_latent *lat;
    const gmm_lik *lik0;
    gmm_lik lik;          /* values of the current evaluation */
    size_t nrows, n, nl, np, nparam, nobs;
    gmm_obsmap map;       /* the latent's (every row's coefficients: coef_all) */
    int exact;
    double *y, *e;        /* nrows (e NULL: no exposure) */
    double *wt, *owt;     /* prior weights: nrows, observed rows' (NULL: none) */
    /* fixed effects: the last ncoef parameters, design X (nrows x ncoef) */
    size_t ncoef, c0;     /* c0 = nparam - ncoef */
    int const_off;        /* X is empty or a column of ones */
    const double *X;      /* owned (Xown, freed here) or the caller's (borrowed) */
    double *Xown;
    double *off, *offbar; /* nrows each: X beta, and its adjoint */
    double *oshift, *oshiftbar; /* observed rows' X beta and adjoint (Laplace) */
    double *ry, *rx;      /* exact: y - X beta (nrows), posterior mean of x (n) */
    /* observed rows, in the latent's row order */
    size_t *orow, *ooff, *orowptr, *opos; /* orowptr: nobs + 1; opos: sparse */
    double *oy, *oe, *ocoef, *coef_all, *coefbar_all, *ocoefbar; /* nnz of theirs or all */
    double *ocst;         /* their likelihood constants (nobs x nconst) */
    gmm_laplace_obs lobs;
    gmm_band *Q, *Qbar;   /* NULL on the sparse path */
    int sparse;           /* the sparse path (problem.h): Qs, Qsbar instead */
    gmm_sparse *Qs, *Qsbar;
    gmm_sparse *Ss;       /* the posterior covariance's entries kept
                           * (problem_sparse.c), made on first use */
    gmm_laplace *lap;
    /* the Laplace approximation in the square-root form (laplace.h): the
     * smoother over the latent's rows, full-length scratch (nrows each:
     * data, weights, variances, adjoint weights and values), theta and the
     * gradient of the current evaluation, the observations' total weight
     * at the last mode (for the choice) */
    gmm_laplace_smoother sm;
    double *sy, *sw, *sv, *sr, *su, *ssh; /* ssh: nrows x width (rows that vary) */
    const double *stheta;
    double *sgrad;
    double wsum, sbound;
    int sqrt_form;        /* the last Laplace evaluation took it */
    int sqrt_declined;    /* ... or the family's rule asked for it, but the
                           * likelihood is not log-concave */
    double *thetabar;     /* nparam scratch */
    double ld;            /* log|Q| of the last prior (NAN: not known) */
    int cold;             /* the next Laplace evaluation starts from x = 0 */
    /* whitened log joint: theta fixed by gmm_problem_whiten_setup */
    int wready;
    double *woff;         /* X beta at the setup's theta (nrows) */
    double wb;            /* the intercept there, when the offset is constant */
    gmm_lik wlik;
    double *wcoef, *wx, *wg; /* nnz, n, n */
    /* The observed rows packed for the density's loops (row i of the nobs
     * is data row wrow[i]): y, e (1 without exposure), the likelihood's
     * constants (nobs x nconst); coefficients [wptr[i], wptr[i + 1]) of
     * wh, each reading latent widx[k]; at the setup's theta X beta (wo)
     * and the coefficients (wh); scratch f, d log p / df and h'x (wf, wd,
     * whx) */
    size_t *wrow, *wptr, *widx;
    int wone;             /* every row has one coefficient (wptr[i] = i) */
    double *wy, *we, *wconst, *wo, *wh, *wf, *wd, *whx;
    /* the Laplace metric: x = wxh + wL^-T v, wL wL' = Q + H' diag(wwt) H
     * at the mode (wwt: nobs), wc = wL' wxh; wL the factor in wfac */
    gmm_metric metric;
    gmm_factor *wfac;     /* the band's copy of wL (NULL on the sparse path) */
    const gmm_factor *wL; /* wfac, or the sparse form's factor (borrowed:
                           * valid until the next Laplace evaluation) */
    double *wxh, *wqx, *wc, *wwt; /* n, n, n, nobs */
    /* joint sampling of the hyperparameters */
    int *jsamp;           /* nparam flags */
    gmm_prior *jprior;    /* nparam */
    double *jtheta, *jbar, *jcbar; /* nparam, nparam, nnz */
    /* the sampled parameters' coordinates (their scales; the coefficients
     * in the design basis when all are sampled) and the coefficients'
     * prior on the centred design (PRIORS, problem.h) */
    size_t *jidx;         /* jn: the sampled parameters */
    infer_scale jsc;
    double *cmean, *jg;   /* ncoef: observed rows' column means; nparam scratch */
    long icpt;            /* the intercept's coefficient (a column of ones), -1 none */
    size_t jn;            /* sampled count */
    gmm_objective obj;
    /* the average information (problem_info.c): each latent's variance
     * parameter (n); scratch x (2 n) and w (a column per parameter, then D
     * and V^-1 w: (nparam + 2) nobs) */
    size_t *ipar;
    double *ix, *iw;
    char (*names)[64];
    size_t *lin_idx;      /* the coefficients' basis (gmm_problem_coef_basis) */
    double *lin_R;
};

static inline gmm_status set_lik(gmm_problem *p, const double *theta)
{
    return gmm_problem_lik_at(p, theta, &p->lik);
}

/* problem_laplace.c: the observed rows and the Laplace workspace (at
 * allocation for a non-Gaussian likelihood, else on first use); the prior
 * and the mode at theta (allow_sqrt: the square-root form may be taken);
 * the same with allow_sqrt set. */
gmm_status problem_laplace_alloc(gmm_problem *p);

/* problem_info.c: obj.info set where the average information applies (a
 * Gaussian likelihood on the Laplace path, a prior of scale blocks), else
 * NULL; its workspace.  GMM_ENOMEM. */
gmm_status problem_info_enable(gmm_problem *p);
gmm_status problem_laplace_forward_form(gmm_problem *p, const double *theta, double *f,
                                        int allow_sqrt);
gmm_status problem_laplace_forward(gmm_problem *p, const double *theta, double *f);

/* problem_sparse.c: on the sparse path, the posterior moments at theta
 * of nq linear forms (gmm_problem_predict_forms' arguments), of the data
 * rows with their offsets (gmm_problem_predict_rows'), and of the latent
 * at the nodes (graph numbering; without the offset). */
gmm_status problem_sparse_forms(gmm_problem *p, const double *theta, size_t nq,
                                const size_t *ptr, const size_t *idx, const double *w,
                                double *mean, double *var);
gmm_status problem_sparse_rows(gmm_problem *p, const double *theta, double *mean, double *var);
gmm_status problem_sparse_nodes(gmm_problem *p, const double *theta, double *mean, double *var);

/* problem_whiten.c: the linear predictor of the packed rows at the whitened
 * latents; scatter a (nobs) to the packed rows' latents; x from v. */
void problem_packed_f(gmm_problem *p);
void problem_packed_scatter(gmm_problem *p, const double *a);
/* sum_i log p(y_i | f_i) over the packed rows at p->wf (p->wlik), d/df_i
 * into g (NULL: not formed) and d/dpar_k added into parbar[k] (NULL: not
 * formed), with the rows' prior weights when there are (gmm_lik_eval_weighted);
 * gmm_lik_sum_const's arithmetic when neither weights nor parbar. */
double problem_packed_lik(gmm_problem *p, double *g, double *parbar);
gmm_status problem_whiten(gmm_problem *p, const double *v, double *x);

#endif
