/* likelihood.h -- observation models p(y_i | f_i): a const type object per
 * family found by name, with the derivatives in f the Laplace approximation
 * needs, the gradient in the family's parameters, Gaussian expectations for
 * variational inference, and what callers need to treat a family without
 * asking which one it is (link, row check, defaults, predictive density,
 * response scale).
 */
#ifndef GMM_LIKELIHOOD_H
#define GMM_LIKELIHOOD_H

#include <stddef.h>

#include "gmm/status.h"

#define GMM_LIK_MAXPARAM 2
#define GMM_LIK_MAXCONST 2
/* Default and largest number of Gauss-Hermite points of gmm_lik_expect. */
#define GMM_LIK_QUAD_DEFAULT 20
#define GMM_LIK_QUAD_MAX 100

/* The families:
 *
 *   gaussian(variance)        y real,      y ~ N(f, variance)
 *   poisson                   y in 0,1,.., y ~ Poisson(e exp(f))
 *   binomial                  y in 0..n,   y ~ Binomial(n, 1 / (1 + exp(-f)))
 *   bernoulli                 binomial with n = 1 (no per-row quantity)
 *   negbinomial(dispersion)   y in 0,1,.., mean mu = e exp(f),
 *                             variance mu + mu^2 / dispersion
 *   studentt(df, scale)       y real, (y - f) / scale ~ t with df degrees of
 *                             freedom (not log-concave in f)
 *
 * e is the row's per-row quantity, named by the type's rowq: the exposure
 * e > 0 of poisson and negbinomial, the number of trials n of binomial; 1
 * for a family without one.  Parameters are named "likelihood.<param>" in a
 * model's parameter vector; every one must be finite and > 0.  Adding a
 * family is one file (src/model/lik/lik_<name>.c) and one row in the table
 * of src/model/lik/likelihood.c. */

typedef struct gmm_lik_type gmm_lik_type;

struct gmm_lik_type {
    const char *name;                 /* "poisson" */
    size_t nparam;
    const char *const *param;         /* nparam short names ("variance") */
    /* The per-row quantity e the family reads ("exposure", "trials"), for
     * messages and column names; NULL: none, e is 1. */
    const char *rowq;
    int conjugate;                    /* nonzero (gaussian only): the marginal
                                       * likelihood is exact, no Laplace; the
                                       * data are centred, new observations
                                       * are normal */
    /* 1 + the index of the parameter a prior weight w divides (gaussian:
     * its variance, y ~ N(f, variance / w), as R's lm); 0: the weight
     * multiplies the row's log p(y | f) (R's glm).  gmm_lik_eval_weighted. */
    size_t weight_param;
    int not_log_concave;              /* nonzero: -d2 log p may be negative
                                       * (studentt); the Laplace approximation
                                       * then keeps the assembled precision
                                       * (laplace.h, THE SQUARE-ROOT FORM) */
    /* The name of the response scale of predictions, E[y | f] / e: "rate",
     * "prob"; NULL when it is f itself (identity link). */
    const char *resp;
    /* NULL when y is acceptable given the row's e, else the reason ("is not
     * a non-negative integer"), static or written into buf (size bytes).  y
     * is finite here (missing rows are never checked); e may be invalid (it
     * is checked after y, by check_e): compare y with e only when e is
     * valid.  NULL: every finite y is. */
    const char *(*check_y)(double y, double e, char *buf, size_t size);
    /* NULL when e (finite or not) is acceptable, else the reason ("must be
     * positive and finite").  NULL when rowq is. */
    const char *(*check_e)(double e);
    /* log p(y | f) and its first three derivatives in f: out[0..3].  dpar
     * (NULL, or 3 nparam doubles): d/dpar_k of out[0], out[1], out[2] at
     * dpar[3 k + 0 .. 2].  Finite for finite f (no overflow to inf for
     * |f| < 700 and, with an exposure, |f + log e| < 700). */
    void (*eval)(const double *par, double y, double e, double f, double out[4], double *dpar);
    /* Per-row constants: the nconst (<= GMM_LIK_MAXCONST) values eval forms
     * from y and e alone (log e, log y!), written into c by row_const, and
     * eval given them (eval_const), with eval's own arithmetic: eval is
     * row_const then eval_const.  nconst 0 and both NULL: none. */
    size_t nconst;
    void (*row_const)(double y, double e, double *c);
    void (*eval_const)(const double *par, double y, double e, const double *c, double f,
                       double out[4], double *dpar);
    /* gmm_lik_sum_const over m rows (y, e, f: m each; c: m nconst): sum of
     * out[0] in row order, g[i] = out[1] (g NULL: not formed), eval_const's
     * arithmetic to the bit with no call per row and without the higher
     * derivatives.  NULL: gmm_lik_sum_const calls eval_const per row. */
    double (*sum_const)(const double *par, size_t m, const double *y, const double *e,
                        const double *c, const double *f, double *g);
    /* E_{f ~ N(mu, s2)} log p(y | f) and its derivatives in mu and s2 into
     * out[0..2]; dpar (NULL or nparam): d/dpar of out[0]; in closed form
     * or by the family's own rule (studentt: graded towards its poles).
     * NULL: gmm_lik_expect uses Gauss-Hermite quadrature. */
    void (*expect)(const double *par, double y, double e, double mu, double s2, double out[3],
                   double *dpar);
    /* E[y | f] (the inverse link times e). */
    double (*mean)(const double *par, double e, double f);
    /* The link: f for a mean m of y per unit e (m in the range of mean). */
    double (*link)(const double *par, double m);
    /* E_{f ~ N(mu, s2)} mean(par, 1, f) in closed form; NULL: none
     * (gmm_lik_response uses Gauss-Hermite quadrature). */
    double (*mean_normal)(const double *par, double mu, double s2);
    /* A working response on the scale of f for an observed y with e, for
     * data-driven defaults of the latent model (gaussian: y; log link:
     * log((y + 1/2) / e); binomial: 2 y / n - 1). */
    double (*working)(double y, double e);
    /* A default intercept from the n rows (y NAN = missing, e NULL = all
     * 1) into *b: 0 when no row is observed.  GMM_ENOMEM. */
    gmm_status (*intercept)(const double *y, const double *e, size_t n, double *b);
    /* Default parameter values from the outcomes (y NAN = missing) into
     * dflt[0..nparam).  GMM_ENOMEM.  NULL when nparam is 0. */
    gmm_status (*defaults)(const double *y, size_t n, double *dflt);
    /* NULL when the observed rows (y NAN = missing, e NULL = all 1; at
     * least one observed) identify a fit, else why not, written into buf
     * (size bytes) naming the outcome column yname: every y equal (no
     * variation: gaussian, studentt), every count 0 (log link), every y 0
     * or every y its trials (binomial): the maximum likelihood is at the
     * boundary. */
    const char *(*degenerate)(const double *y, const double *e, size_t n, const char *yname,
                              char *buf, size_t size);
    /* log E_{f ~ N(mu, s2)} p(y | f) for s2 > 0 (gmm_lik_predictive); NULL:
     * adaptive Gauss-Hermite about the mode, which needs a log-concave
     * p(y | f).  GMM_EDOM when not finite. */
    gmm_status (*predictive)(const double *par, double y, double e, double mu, double s2,
                             double *lpd);
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

/* Replace NAN parameters by the type's defaults from the data: gaussian
 * variance = a tenth of the sample variance of the observed y
 * (gmm_kernel_default_noise: 1 when fewer than two, 0.1 when all are
 * equal), negbinomial dispersion = 1, studentt df = 4 and scale^2 = a
 * tenth of the robust variance (1.4826 MAD(y))^2, which outliers do not
 * inflate (gaussian's default when the MAD is 0).  y: n values, NAN = missing.  GMM_ENOMEM
 * (lik unchanged); GMM_OK for a NULL lik. */
gmm_status gmm_lik_fill_defaults(gmm_lik *lik, const double *y, size_t n);

/* "likelihood.<param>" for parameter k into buf (size >= 64); NULL when k
 * >= nparam. */
const char *gmm_lik_param_name(const gmm_lik *lik, size_t k, char *buf);

/* Check one row: outcome y (NAN = missing: nothing is checked) and its
 * per-row quantity *e (e NULL: the row has none).  GMM_OK, or GMM_EINVAL
 * with the message of gmm_lik_check_data and *col (may be NULL) = 0 when y
 * is at fault, 1 when e is (the column named by the type's rowq); e given
 * to a family without one: GMM_EINVAL, *col unchanged. */
gmm_status gmm_lik_check_row(const gmm_lik *lik, double y, const double *e, int *col);

/* Check the outcomes and per-row quantities of n rows (y NAN = missing:
 * neither y nor that row's e is checked; e NULL = all 1).  The first bad
 * row r: GMM_EINVAL, index r in gmm_error_index(), message "y = 2.5 is not
 * a non-negative integer (poisson)", "y = 5 exceeds trials = 3
 * (binomial)", "y = inf is not finite", "exposure = 0 must be positive and
 * finite", "trials = 0 must be a positive integer" or, for a NaN e of an
 * observed y, "missing exposure for an observed outcome" (the type's rowq
 * in place of "exposure"; no file or row in the message: the caller adds
 * them).  An e given to a family without one is GMM_EINVAL with no index:
 * "the bernoulli likelihood takes no exposure". */
gmm_status gmm_lik_check_data(const gmm_lik *lik, const double *y, const double *e, size_t n);

/* Whether the observed rows can be fitted (see the type's degenerate):
 * GMM_OK, or GMM_EINVAL with a message such as "every observed count in
 * 'y' is 0: the rate's maximum likelihood is 0 (the intercept would go to
 * -infinity)" (yname the outcome's column name; no file in the message).
 * y is on the data's own scale (before any centring).  GMM_OK when no row
 * is observed (nothing to say here). */
gmm_status gmm_lik_check_fit_data(const gmm_lik *lik, const double *y, const double *e,
                                  size_t n, const char *yname);

/* The link f = g(m) of a mean m per unit e, and its inverse m = g^-1(f)
 * (E[y | f] at e = 1: exp(f), the probability, or f). */
double gmm_lik_link(const gmm_lik *lik, double m);
double gmm_lik_inv_link(const gmm_lik *lik, double f);

/* The working response of an observed y with per-row quantity e (1 when
 * the family has none) on the scale of f (see the type's working); NAN for
 * a missing y.  For data-driven defaults of a latent model. */
double gmm_lik_working(const gmm_lik *lik, double y, double e);

/* A default intercept from n rows (y NAN = missing, e NULL = all 1) into
 * *b: log((sum y + 1/2) / sum e) for a log link, the logit of (sum y + 1/2)
 * / (sum n + 1) for binomial, the mean of y for gaussian and their median
 * for studentt; 0 when no row is observed.  GMM_EINVAL (NULL), GMM_ENOMEM. */
gmm_status gmm_lik_default_intercept(const gmm_lik *lik, const double *y, const double *e,
                                     size_t n, double *b);

/* log p(y | f) with derivatives (see eval above); par = lik->par. */
void gmm_lik_eval(const gmm_lik *lik, double y, double e, double f, double out[4], double *dpar);

/* gmm_lik_eval for a caller that evaluates the same rows many times (the
 * samplers): gmm_lik_nconst(lik) doubles per row (0 .. GMM_LIK_MAXCONST:
 * log e, log y!, ... -- what depends on the row alone, whatever the
 * parameters), written into c by gmm_lik_row_const once, and
 * gmm_lik_eval_const given them, equal to gmm_lik_eval(lik, y, e, f, ...)
 * to the bit (the family's arithmetic, not an algebraic rearrangement).  c
 * is not read when nconst is 0 (NULL allowed). */
size_t gmm_lik_nconst(const gmm_lik *lik);
void gmm_lik_row_const(const gmm_lik *lik, double y, double e, double *c);
void gmm_lik_eval_const(const gmm_lik *lik, double y, double e, const double *c, double f,
                        double out[4], double *dpar);
/* A row with prior weight w (finite, >= 0; R's lm and glm): w log p(y |
 * f) with its derivatives times w, or for a family whose weight divides a
 * parameter (the type's weight_param: gaussian) log p(y | f) at that
 * parameter over w (y ~ N(f, variance / w), whose density carries log w /
 * 2), its dpar in the parameter itself; w = 0: zeros (the row drops out,
 * as in R).  c: the row's constants (gmm_lik_row_const) or NULL; out, dpar
 * as gmm_lik_eval.  The one place weights enter a row's likelihood. */
void gmm_lik_eval_weighted(const gmm_lik *lik, double y, double e, double w, const double *c,
                           double f, double out[4], double *dpar);
/* sum_i log p(y_i | f_i) over m rows with their constants c (m x nconst,
 * row i at c + i nconst), and g_i = d log p / d f_i into g (m, or NULL):
 * gmm_lik_eval_const's out[0] summed in row order and its out[1], to the
 * bit, for the samplers' gradients (one call for all rows; the family's
 * loop where it has one).  e: m values (1 for a family without a per-row
 * quantity). */
double gmm_lik_sum_const(const gmm_lik *lik, size_t m, const double *y, const double *e,
                         const double *c, const double *f, double *g);

/* E_{N(mu, s2)} log p(y | f) and derivatives in mu, s2 (out[0..2]) and in
 * the parameters (dpar, NULL or nparam): the family's expect where it has
 * one (closed form; studentt's own rule, accurate to ~1e-12 for any s2 and
 * scale; nquad is then only range-checked), else Gauss-Hermite with nquad
 * points (0: GMM_LIK_QUAD_DEFAULT; at most GMM_LIK_QUAD_MAX), derivatives by
 * d/dmu E = E[d1], d/ds2 E = E[d2] / 2; s2 = 0 is the exact point mass.
 * Nodes are computed once per nquad and cached (thread-safe).  Choose nquad
 * from s2 (the rule's accuracy by nquad and s2: docs/accuracy.md,
 * Likelihoods).  GMM_EINVAL for nquad > GMM_LIK_QUAD_MAX, s2 < 0 or NAN, NULL
 * lik or out; GMM_ENOCONV if building a rule fails (QL not converging:
 * never seen for n <= GMM_LIK_QUAD_MAX). */
gmm_status gmm_lik_expect(const gmm_lik *lik, double y, double e, double mu, double s2,
                          size_t nquad, double out[3], double *dpar);

/* gmm_lik_expect of a row with prior weight w (gmm_lik_eval_weighted's
 * rule: w times the expectation and its derivatives, or for the Gaussian
 * the expectation at variance / w, dpar in the variance itself; w = 0:
 * zeros).  Errors as gmm_lik_expect. */
gmm_status gmm_lik_expect_weighted(const gmm_lik *lik, double y, double e, double w, double mu,
                                   double s2, size_t nquad, double out[3], double *dpar);

/* The mean outcome per unit e, E[y | f] at e = 1 (the rate exp(f) for a
 * log link, the probability for binomial, f for gaussian and studentt: the
 * scale named by the type's resp), under f ~ N(mu, s2): out[0] its
 * posterior mean (the type's mean_normal, else Gauss-Hermite), out[1],
 * out[2] its quantiles at mu -/+ z sd (the inverse link is monotone).
 * GMM_EINVAL for s2 < 0. */
gmm_status gmm_lik_response(const gmm_lik *lik, double mu, double s2, double z, double out[3]);

/* The log predictive density of an outcome, log E_{f ~ N(mu, s2)} p(y | f)
 * (e the per-row quantity): the type's predictive where it has one
 * (gaussian: N(y; mu, s2 + variance); studentt: adaptive quadrature), else
 * adaptive Gauss-Hermite (40 points centred at the mode of p(y|f) N(f; mu,
 * s2), scaled by its curvature: accurate however narrow the likelihood is
 * against the Gaussian).  s2 = 0: log p(y | mu).  For held-out scoring.
 * GMM_EINVAL (s2 < 0, non-finite input), GMM_EDOM. */
gmm_status gmm_lik_predictive(const gmm_lik *lik, double y, double e, double mu, double s2,
                              double *lpd);

/* The same from draws f[0..nf) of the linear predictor: log of the mean of
 * p(y | f_s) (log-sum-exp).  GMM_EINVAL (no draws), GMM_EDOM (no finite
 * density). */
gmm_status gmm_lik_predictive_draws(const gmm_lik *lik, double y, double e, const double *f,
                                    size_t nf, double *lpd);

#endif
