/* latent_impl.h -- the latent-model vtable each family fills (latent.h).
 * Private to src/model/. */
#ifndef GMM_LATENT_IMPL_H
#define GMM_LATENT_IMPL_H

#include "gmm/latent.h"

typedef struct {
    const char *family;
    void (*free)(void *impl);
    gmm_status (*prior)(void *impl, const double *theta, gmm_band *Q, double *logdet);
    gmm_status (*prior_rev)(void *impl, const gmm_band *Qbar, double logdetbar, double *thetabar);
    /* NULL when the coefficients are constant (stored in the object) */
    gmm_status (*obs_coef)(void *impl, const double *theta, double *coef);
    gmm_status (*obs_coef_rev)(void *impl, const double *theta, const double *coefbar,
                               double *thetabar);
    gmm_status (*gaussian)(void *impl, const double *theta, const double *y, double noise,
                           double *loglik, double *thetabar, double *noisebar);
    gmm_status (*gaussian_posterior)(void *impl, double *mean, gmm_band *cov);
    /* NULL: no solve with the posterior covariance (latent.h) */
    gmm_status (*gaussian_posterior_solve)(void *impl, double *v);
    const char *(*factorisation)(const void *impl, double *bound);
    /* NULL: no new inputs */
    gmm_status (*predict_at)(void *impl, const double *theta, const double *mean,
                             const gmm_band *cov, const double *xq, size_t nq, double *fmean,
                             double *fvar);
    gmm_status (*whiten_setup)(void *impl, const double *theta);
    gmm_status (*whiten)(void *impl, const double *v, double *x);
    gmm_status (*whiten_t)(void *impl, const double *g, double *u);
    gmm_status (*unwhiten)(void *impl, const double *x, double *v);
    gmm_status (*whiten_rev)(void *impl, const double *v, const double *xbar, double *thetabar);
    /* NULL: no whitening from a sparse factor of Q (latent.h) */
    gmm_status (*whiten_setup_sparse)(void *impl, const double *theta);
    /* NULL: no natural square root of Q (prior_nrows 0) */
    gmm_status (*prior_rows)(void *impl, const double *theta, gmm_prior_rows *G,
                             double *logdet);
    gmm_status (*prior_rows_rev)(void *impl, const double *Gbar, double logdetbar,
                                 double *thetabar);
    gmm_status (*prior_rows_rev_moments)(void *impl, const double *Svv, const double *Svx,
                                         double *thetabar);
    /* NULL: the moments above instead (latent.h, gmm_latent_prior_rows_rev_q) */
    gmm_status (*prior_rows_rev_q)(void *impl, const gmm_band *S, const double *m,
                                   const gmm_band *D, double *thetabar);
    /* NULL: no weighted smoothing in the square-root form (latent.h) */
    gmm_status (*wls_rows)(void *impl, const double *theta, double obs_prec, int *rows);
    gmm_status (*wls)(void *impl, const double *theta, const double *y, const double *wt,
                      int record, double *loglik, double *mean);
    gmm_status (*wls_quad)(void *impl, const double *x, double *q);
    gmm_status (*wls_var)(void *impl, double *fvar);
    gmm_status (*wls_adjoint)(void *impl, const double *rw, double *u, double *thetabar);
    /* NULL: rows that vary are not smoothed (latent.h) */
    gmm_status (*wls_rowcov)(void *impl, double *zeta, double *sh);
    /* NULL: no sparse prior (latent.h, prior in sparse storage) */
    gmm_status (*prior_pattern)(const void *impl, gmm_sparse **Q);
    gmm_status (*prior_sparse)(void *impl, const double *theta, gmm_sparse *Q, double *logdet);
    gmm_status (*prior_rev_sparse)(void *impl, const gmm_sparse *Qbar, double logdetbar,
                                   double *thetabar);
    /* NULL: not a prior of scale blocks (latent.h, gmm_latent_scale_blocks) */
    int (*scale_blocks)(const void *impl, size_t *par);
    /* NULL: any band of Q's bandwidth is allowed (latent.h, gmm_latent_band_check) */
    gmm_status (*band_check)(const void *impl);
} gmm_latent_ops;

struct gmm_latent {
    const gmm_latent_ops *ops;
    void *impl;
    size_t n, kl, cov_kl, nrows, width, nparam;
    size_t prior_nrows;    /* rows of the prior's square root (0: none) */
    size_t prior_seg;      /* rows per segment of the square root (0: none) */
    size_t nconstr;        /* linear constraints of intrinsic priors */
    const double *constr;  /* nconstr x n, row-major (owned by the family) */
    const size_t *pin;     /* nconstr pinned latents (constr.h) */
    /* the observation map's storage, owned here and filled by the family;
     * layout and helpers in obsmap.h, gmm_latent_obs_map its view */
    size_t *offset;        /* nrows */
    size_t nnz;            /* entries of coef */
    size_t *rowptr, *pos;  /* sparse rows (NULL: dense windows) */
    double *coef;          /* nnz: constant coefficients (or the last
                            * obs_coef when they vary; dense only) */
    int varies;
    const char **name;     /* nparam (strings owned by the family) */
    double *start;         /* nparam */
    int *zero_ok;          /* nparam */
    gmm_param_domain *domain; /* nparam: each one's domain (latent.h) */
    int logdet_known;      /* the last prior call returned log|Q| */
    int rows_ok;           /* the last prior_rows call succeeded */
    int sqrt_only;         /* no accurate assembled prior (latent.h) */
    double rows_tau;       /* the pins the prior's rows hold (gmm_latent_prior_rows_pins) */
    size_t *node_row;      /* graphs: n, graph node -> latent index */
};

/* Allocate the common part (arrays sized from the fields set by the caller:
 * nrows, width, nparam); NULL + GMM_ENOMEM. */
gmm_latent *latent_new(const gmm_latent_ops *ops, size_t nrows, size_t width, size_t nparam);
/* The same with sparse rows of nnz entries in all (rowptr, pos and coef
 * allocated, zero, for the family to fill; constant coefficients only). */
gmm_latent *latent_new_sparse(const gmm_latent_ops *ops, size_t nrows, size_t width,
                              size_t nnz, size_t nparam);

#endif
