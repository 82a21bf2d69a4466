/* likelihood.h -- observation models p(y_i | f_i): a const type object per
 * family found by name (like the kernels), with the derivatives in f that
 * the Laplace approximation needs, the gradient in the family's own
 * parameters, and Gaussian expectations for variational inference.
 *
 *   gaussian(variance)        y real,      y ~ N(f, variance)
 *   poisson                   y in 0,1,.., y ~ Poisson(e exp(f))
 *   bernoulli                 y in {0, 1}, P(y = 1) = 1 / (1 + exp(-f))
 *   negbinomial(dispersion)   y in 0,1,.., mean mu = e exp(f),
 *                             variance mu + mu^2 / dispersion
 *
 * e > 0 is the row's exposure (1 unless the family takes one: poisson,
 * negbinomial).  Parameters are named "likelihood.<param>" in a model's
 * parameter vector; every one must be finite and > 0.  Adding a family is
 * one file (src/model/lik/lik_<name>.c) and one row in the table of
 * src/model/lik/likelihood.c.
 */
#ifndef GMM_LIKELIHOOD_H
#define GMM_LIKELIHOOD_H

#include <stddef.h>

#include "gmm/status.h"

#define GMM_LIK_MAXPARAM 2
/* Default and largest number of Gauss-Hermite points of gmm_lik_expect. */
#define GMM_LIK_QUAD_DEFAULT 20
#define GMM_LIK_QUAD_MAX 100

typedef struct gmm_lik_type gmm_lik_type;

struct gmm_lik_type {
    const char *name;                 /* "poisson" */
    size_t nparam;
    const char *const *param;         /* nparam short names ("variance") */
    int exposure;                     /* nonzero: reads an exposure e > 0 */
    int conjugate;                    /* nonzero (gaussian only): the marginal
                                       * likelihood is exact, no Laplace */
    int link_log;                     /* nonzero: the mean of y is e exp(f) */
    /* NULL when y is acceptable, else a static reason ("is not a non-negative
     * integer").  y is finite here (missing rows are never checked). */
    const char *(*check_y)(double y);
    /* log p(y | f) and its first three derivatives in f: out[0..3].  dpar
     * (NULL, or 3 nparam doubles): d/dpar_k of out[0], out[1], out[2] at
     * dpar[3 k + 0 .. 2].  Finite for finite f (no overflow to inf for
     * |f| < 700 and, with an exposure, |f + log e| < 700). */
    void (*eval)(const double *par, double y, double e, double f, double out[4], double *dpar);
    /* E_{f ~ N(mu, s2)} log p(y | f) and its derivatives in mu and s2 into
     * out[0..2]; dpar (NULL or nparam): d/dpar of out[0].  NULL: none in closed
     * form, gmm_lik_expect uses Gauss-Hermite quadrature. */
    void (*expect)(const double *par, double y, double e, double mu, double s2, double out[3],
                   double *dpar);
    /* E[y | f] (the inverse link times e). */
    double (*mean)(const double *par, double e, double f);
};

/* A likelihood: its type and parameter values. */
typedef struct {
    const gmm_lik_type *type;
    double par[GMM_LIK_MAXPARAM];
} gmm_lik;

/* The table: number of families and the i-th; lookup by name (NULL if none). */
size_t gmm_lik_ntypes(void);
const gmm_lik_type *gmm_lik_type_at(size_t i);
const gmm_lik_type *gmm_lik_type_find(const char *name);

/* Parse "NAME" or "NAME(KEY=VALUE, ...)" (spec.h grammar, one factor) into
 * *out.  Keys are the family's short names; an omitted parameter is NAN
 * (the caller fills a default, see gmm_lik_fill_defaults).  Errors:
 * GMM_EPARSE with gmm_error_index() the offset in text of the bad character
 * (unknown family -- the message lists the known ones --, unknown or
 * repeated key, a value not > 0 (the offset of its key, as for kernels), a
 * sum or product (its first '+' or '*'), or a syntax error from
 * gmm_spec_parse); GMM_EINVAL (NULL), GMM_ENOMEM.  *out is unchanged on
 * failure. */
gmm_status gmm_lik_parse(const char *text, gmm_lik *out);

/* Replace NAN parameters by defaults from the data: gaussian variance = a
 * tenth of the sample variance of the observed y (gmm_kernel_default_noise:
 * 1 when fewer than two, 0.1 when all are equal), negbinomial dispersion =
 * 1.  y: n values, NAN = missing. */
void gmm_lik_fill_defaults(gmm_lik *lik, const double *y, size_t n);

/* "likelihood.<param>" for parameter k into buf (size >= 64); NULL when k
 * >= nparam. */
const char *gmm_lik_param_name(const gmm_lik *lik, size_t k, char *buf);

/* Check the outcomes and exposures of n rows (y NAN = missing: neither y
 * nor that row's exposure is checked; e NULL = all 1).  The first bad row r:
 * GMM_EINVAL, index r in gmm_error_index(), message "y = 2.5 is not a
 * non-negative integer (poisson)", "y = inf is not finite", "exposure = 0
 * must be positive and finite" or, for a NaN exposure of an observed y,
 * "missing exposure for an observed outcome" (no file or row in the message:
 * the caller adds them).  An exposure (e != NULL) given to a family without one is
 * GMM_EINVAL with no index: "the bernoulli likelihood takes no exposure". */
gmm_status gmm_lik_check_data(const gmm_lik *lik, const double *y, const double *e, size_t n);

/* log p(y | f) with derivatives (see eval above); par = lik->par. */
void gmm_lik_eval(const gmm_lik *lik, double y, double e, double f, double out[4], double *dpar);

/* E_{N(mu, s2)} log p(y | f) and derivatives in mu, s2 (out[0..2]) and in
 * the parameters (dpar, NULL or nparam): the closed form where the family
 * has one (nquad is then only range-checked), else Gauss-Hermite with nquad
 * points (0: GMM_LIK_QUAD_DEFAULT; at most GMM_LIK_QUAD_MAX), derivatives by
 * d/dmu E = E[d1], d/ds2 E = E[d2] / 2; s2 = 0 is the exact point mass.
 * Nodes are computed once per nquad and cached (thread-safe).  Choose nquad
 * from s2 (the rule's accuracy by nquad and s2: docs/accuracy.md,
 * Likelihoods).  GMM_EINVAL for nquad > GMM_LIK_QUAD_MAX, s2 < 0 or NAN, NULL
 * lik or out; GMM_ENOCONV if building a rule fails (QL not converging:
 * never seen for n <= GMM_LIK_QUAD_MAX). */
gmm_status gmm_lik_expect(const gmm_lik *lik, double y, double e, double mu, double s2,
                          size_t nquad, double out[3], double *dpar);

/* The mean outcome per unit exposure, E[y | f] at e = 1 (the rate exp(f)
 * for a log link, the probability for bernoulli, f for gaussian), under f ~
 * N(mu, s2): out[0] its posterior mean (closed form for the log link,
 * Gauss-Hermite otherwise), out[1], out[2] its quantiles at mu -/+ z sd
 * (the inverse link is monotone).  GMM_EINVAL for s2 < 0. */
gmm_status gmm_lik_response(const gmm_lik *lik, double mu, double s2, double z, double out[3]);

/* The log predictive density of an outcome, log E_{f ~ N(mu, s2)} p(y | f)
 * (e the exposure): closed form for gaussian (N(y; mu, s2 + variance)),
 * else adaptive Gauss-Hermite (40 points centred at the mode of p(y|f)
 * N(f; mu, s2), scaled by its curvature: accurate however narrow the
 * likelihood is against the Gaussian).  s2 = 0: log p(y | mu).  For held-out
 * scoring.  GMM_EINVAL (s2 < 0, non-finite input), GMM_EDOM. */
gmm_status gmm_lik_predictive(const gmm_lik *lik, double y, double e, double mu, double s2,
                              double *lpd);

/* The same from draws f[0..nf) of the linear predictor: log of the mean of
 * p(y | f_s) (log-sum-exp).  GMM_EINVAL (no draws), GMM_EDOM (no finite
 * density). */
gmm_status gmm_lik_predictive_draws(const gmm_lik *lik, double y, double e, const double *f,
                                    size_t nf, double *lpd);

#endif
