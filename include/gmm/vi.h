/* vi.h -- variational inference with a precision-parameterised Gaussian
 * (paper, section 3.3 and the appendix's VI algorithm), in banded form:
 * linear in the number of latents.
 *
 *   model  x ~ p = N(0, Q_p^-1)  (latent.h, Q_p banded, bandwidth kl),
 *          f_r = b0 + h_r' x[o_r .. o_r + width),  y_r ~ p(y_r | f_r)
 *          (likelihood.h; the data, likelihood and intercept of a problem.h)
 *   q(x) = N(m, (L L')^-1),  L lower band of bandwidth b,
 *
 *   ELBO = sum_r E_q log p(y_r | f_r) - KL(q || p),
 *   KL   = 1/2 [tr(Sigma Q_p) + m'Q_p m - n - log|Q_p| + log|L L'|],
 *
 * Sigma = (L L')^-1.  (The paper's eq. 4 is mis-bracketed; this is the
 * KL of two Gaussians.)  E_q log p(y_r | f_r) depends on q only through
 * mu_r = b0 + h_r' m_o and s2_r = h_r' Sigma_oo h_r, and tr(Sigma Q_p) on
 * Sigma inside Q_p's band: both come from the Takahashi inverse subset of
 * L on a band of width max(b, width - 1, kl) (gmm_band_chol_selinv).
 *
 * VARIATIONAL PARAMETERS (lambda, gmm_vi_nvar = n + n (b + 1) doubles):
 * m (n), then L's band in LAPACK layout (band.h: column j's b + 1 slots
 * L(j, j), L(j + 1, j), ..., contiguous) with the DIAGONAL STORED AS ITS
 * LOG (so L stays a Cholesky factor); the slots past row n - 1 of the last
 * b columns exist, are ignored and get gradient 0.
 *
 * CONSTRAINTS.  A latent with constraints A x = 0 (gmm_latent_nconstr,
 * intrinsic components of a stack) has its prior on that subspace; q is
 * then N(m, (L L')^-1) conditioned on A x = 0 (kriging under q's own
 * precision, constr.h without pins): mean m_c, covariance Sigma_c = Sigma
 * - Sigma A'(A Sigma A')^-1 A Sigma, and the ELBO is that of the two
 * Gaussians on the subspace, a bound of the constrained marginal
 * likelihood (marglik.h), equal to it at the Gaussian posterior:
 *
 *   KL = 1/2 [tr(Sigma_c Q_p) + m_c'Q_p m_c - (n - k) - log|Q_p|_c
 *             + log|L L'| + log|A Sigma A'|],
 *
 * log|Q_p|_c the prior's generalised determinant (latent.h).  The
 * gradient stays exact (vi.c, CONSTRAINTS); O(n (b + l') k) more per
 * evaluation.  m and L are then defined up to directions that do not move
 * the conditioned q; the state's m (gmm_vi_mean, the q files) is kept
 * as q's mean m_c.  Only the assembled prior takes constraints.
 *
 * PRIOR TERMS.  Graphs use the assembled Q_p (gmm_latent_prior; log|Q_p|
 * from a banded Cholesky of it).  State-space models use the prior's
 * square root, Q_p = G'G (gmm_latent_prior_rows): m'Q_p m = |G m|^2,
 * log|Q_p| from the rows, tr(Sigma Q_p) = n + tr(Sigma (G'G - L L')) with
 * G'G - L L' accumulated in double-double (its entries are of the data's
 * size near the posterior, Q_p's grow like (lengthscale / spacing)^(2 nu +
 * 1)), and the hyperparameter gradient from the moments of the whitened
 * rows G x under q (gmm_latent_prior_rows_rev_moments; vi.c, WHITENED
 * MOMENTS), G m and G'(G m) in double-double.  So there is no spacing limit
 * (the assembled Q_p is refused below the Cholesky's limits, ssm.h) and
 * the ELBO and its gradient keep their digits: against a dense binary128
 * computation, Matern-3/2, the ELBO within 6e-14 relative down to spacing
 * / lengthscale 1e-6, where the assembled Q_p gives 7e-8 at 1e-3; the
 * theta-gradient within 5e-10 of the dense GP's at the posterior (vi.c,
 * ACCURACY).
 *
 * GRADIENT.  Exact reverse mode (vi.c derives it) in lambda and, on
 * request, in the hyperparameters theta of the problem (problem.h's layout:
 * the latent's, "likelihood.<param>", "intercept"), the coefficients h_r
 * included (gmm_latent_obs_coef_rev).  O(n b l') + O(n kl^2), l' = max(b,
 * width - 1, kl); no allocation per evaluation.
 *
 * EXPECTATIONS of the families without a closed form (bernoulli,
 * negbinomial) use Gauss-Hermite rules (gmm_lik_expect), whose error grows
 * with s2 (likelihood.h's table).  nquad = 0 chooses per row from s2: 20
 * points up to s2 = 0.4, 40 up to 1, 100 beyond (from that table: about
 * 1e-11 relative or better up to s2 = 4, 1e-7 at s2 = 9).  The derivative
 * in s2 is the rule's E[d2 log p] / 2, equal to the derivative of the
 * rule's value up to the rule's own error.  In gmm_vi_fit each row keeps
 * its rule through a line search (chosen again at each accepted iterate),
 * so the objective the line search sees is smooth.
 *
 * Objects are not thread-safe; they borrow the problem (and its latent),
 * which must outlive them.
 */
#ifndef GMM_VI_H
#define GMM_VI_H

#include <stddef.h>

#include "gmm/band.h"
#include "gmm/problem.h"
#include "gmm/status.h"

/* Bandwidth value meaning "the prior's" (gmm_latent_bandwidth). */
#define GMM_VI_BANDWIDTH_PRIOR ((size_t)-1)

/* Which form of the prior the KL uses. */
typedef enum {
    GMM_VI_PRIOR_AUTO = 0,  /* rows when the latent has them, else assembled */
    GMM_VI_PRIOR_ROWS,      /* the square root (state-space only) */
    GMM_VI_PRIOR_ASSEMBLED  /* Q_p as gmm_latent_prior assembles it */
} gmm_vi_prior_form;

/* What the progress callback sees after each accepted L-BFGS iteration. */
typedef struct {
    size_t iteration;    /* 1-based */
    size_t evaluations;  /* ELBO evaluations so far */
    double elbo;         /* at the new iterate */
    double grad_norm;    /* Euclidean norm of the ELBO's gradient in the
                          * optimiser's variables: u, preconditioned (vi.c,
                          * SCALING), and the free hyperparameters on their
                          * optimisation scale (objective.h, SCALES) */
} gmm_vi_progress;

/* Nonzero return cancels gmm_vi_fit (GMM_ECANCEL). */
typedef int (*gmm_vi_progress_fn)(void *user, const gmm_vi_progress *p);

typedef struct {
    size_t bandwidth;   /* b of L; GMM_VI_BANDWIDTH_PRIOR (default) = kl;
                         * clamped to n - 1.  b >= the posterior's
                         * bandwidth (kl: width - 1 <= kl) makes the family
                         * contain the Gaussian posterior. */
    size_t max_iter;    /* L-BFGS iterations; 0 = no limit.  Default 2000. */
    double tol;         /* the first phase ends when the ELBO rose by at
                         * most tol max(1, |ELBO|) over the last 3
                         * iterations; >= 0 (0: only by the gradient
                         * test).  Default 1e-9.  Not a convergence test:
                         * a final run follows (vi.c, STOPPING). */
    double epsilon;     /* converged when |grad| <= epsilon max(1, |u|)
                         * (u the optimiser's variables, as in grad_norm:
                         * about a posterior sd of q per unit); > 0.
                         * Default 1e-6. */
    size_t memory;      /* L-BFGS corrections kept, 1 .. 1000.  Default 10. */
    size_t nquad;       /* Gauss-Hermite points, 0 (default: chosen per row
                         * from s2, above) or 1 .. GMM_LIK_QUAD_MAX */
    int learn_hyper;    /* nonzero: also maximise over the problem's free
                         * hyperparameters (its objective's fixed[] flags
                         * hold the others; each on its scale,
                         * objective.h), jointly with q.  Default 0. */
    gmm_vi_prior_form prior; /* default AUTO */
    gmm_vi_progress_fn progress; /* may be NULL */
    void *user;
} gmm_vi_params;

/* Defaults above. */
void gmm_vi_params_init(gmm_vi_params *p);
/* GMM_EINVAL naming the bad field ("vi: tol must be finite and >= 0, got
 * -1"). */
gmm_status gmm_vi_params_check(const gmm_vi_params *p);

typedef struct {
    double elbo;         /* at the final point */
    double grad_norm;    /* as in gmm_vi_progress, at the final point */
    double grad_limit;   /* the gradient test's bound there */
    double grad_noise;   /* the norm of the gradient's rounding noise
                          * there, when measured (else 0).  converged: the
                          * Newton decrement grad_norm^2 / 2 <= 1e-8, or
                          * grad_norm <= grad_limit, or <= 4 grad_noise
                          * (vi.c, STOPPING) */
    size_t iterations;   /* over all runs */
    size_t evaluations;
    size_t restarts;     /* runs after the first (vi.c, SCALING) */
    int converged;       /* a test at the final point holds (grad_noise) */
    const char *message; /* static: how it stopped ("converged: gradient
                          * norm below epsilon", "stopped: maximum number
                          * of iterations reached", "stopped at the ELBO's
                          * resolution: ...", "line search failed: ...") */
    const char *start;   /* static: where q started: "given" (set_state),
                          * "laplace", or "prior" (m = 0, L = chol(Q_p),
                          * when the Laplace approximation failed) */
} gmm_vi_result;

typedef struct gmm_vi gmm_vi;

/* VI for the problem p (its latent, likelihood, data and intercept; its
 * objective's values are the starting hyperparameters, copied here).
 * Workspaces are sized here: about 4 bands of (l' + 1) n doubles plus
 * (kl + 1) n (rows) or 3 bands of (kl + 1) n (assembled).  No start is set
 * (gmm_vi_fit starts from the Laplace approximation unless
 * gmm_vi_set_state or gmm_vi_start_laplace ran).  Errors: GMM_EINVAL (NULL,
 * bad params, ROWS for a latent without a square root), GMM_ENOMEM. */
gmm_status gmm_vi_alloc(gmm_problem *p, const gmm_vi_params *par, gmm_vi **out);
void gmm_vi_free(gmm_vi *v); /* NULL-safe */

size_t gmm_vi_dim(const gmm_vi *v);       /* n */
size_t gmm_vi_bandwidth(const gmm_vi *v); /* b */
size_t gmm_vi_nvar(const gmm_vi *v);      /* n + n (b + 1) */
size_t gmm_vi_nparam(const gmm_vi *v);    /* the problem's */
/* Nonzero when the KL uses the prior's square root. */
int gmm_vi_uses_rows(const gmm_vi *v);

/* The ELBO at hyperparameters theta (nparam) and variational parameters
 * lambda (nvar, layout above) into *elbo; with lambar (nvar) non-NULL its
 * gradient in lambda (OVERWRITTEN; 0 at the unused corner slots), with
 * thetabar (nparam) non-NULL its gradient in theta (OVERWRITTEN; natural
 * scale, fixed parameters included).  Does not change v's state.  nquad 0:
 * each row's rule from its s2 here.  Errors (ordinary outcomes for a line
 * search): GMM_EDOM (theta outside its domain, exp of a log-diagonal
 * entry not a positive finite double, a non-finite value), GMM_ENOTPD
 * (the prior); GMM_EINVAL (NULL v, theta or lambda). */
gmm_status gmm_vi_elbo(gmm_vi *v, const double *theta, const double *lambda, double *elbo,
                       double *lambar, double *thetabar);

/* ---- state: hyperparameters and q ----------------------------------------- */

/* Current hyperparameters (nparam; the problem's layout) and variational
 * parameters (nvar), owned by v; after gmm_vi_fit, its final point. */
const double *gmm_vi_theta(const gmm_vi *v);
const double *gmm_vi_lambda(const gmm_vi *v);
/* m (n entries: the first of lambda). */
const double *gmm_vi_mean(const gmm_vi *v);
/* L at the current state (its diagonal exponentiated) into a caller's
 * LOWER n x n band of any bandwidth (restricted or zero-extended).
 * GMM_EDIM for another order or kind.  O(n b). */
gmm_status gmm_vi_factor(gmm_vi *v, gmm_band *L);

/* Set the state: theta (nparam; NULL keeps the current), m (n; NULL: 0)
 * and L (LOWER, n x n, any bandwidth: restricted or zero-extended to b,
 * diagonal > 0 and finite; NULL: the identity).  GMM_EINVAL (bad theta, a
 * diagonal entry not > 0), GMM_EDIM (L's order or kind). */
gmm_status gmm_vi_set_state(gmm_vi *v, const double *theta, const double *m, const gmm_band *L);
/* The same with src's q (of the same order; its L restricted or
 * zero-extended to v's bandwidth): resuming from another vi result.
 * gmm_vi_set_state's errors, GMM_ENOMEM. */
gmm_status gmm_vi_set_state_from(gmm_vi *v, const double *theta, gmm_vi *src);
/* Set q from the Laplace approximation at the current theta
 * (gmm_problem_posterior: exact for the Gaussian likelihood): m = its mode
 * and L = chol(P), P = Q_p + H'WH at the mode (W = -d2 log p), restricted
 * to b -- q's optimum when b >= kl and the likelihood is Gaussian.  The
 * factor comes from the prior's rows when the KL uses them (never
 * forming P).  When the Laplace approximation fails (GMM_EDOM, GMM_ENOTPD,
 * GMM_ENOCONV: the assembled Q_p refused at close inputs, Newton not
 * converging) q starts at the prior instead (m = 0, L = chol(Q_p)) and
 * *start (may be NULL) says "prior", else "laplace".  With constraints,
 * P (always the prior's Q_p) gets constr.h's pins where it is singular
 * off the subspace (in rounding: vi.c, CONSTRAINTS); the Gaussian optimum
 * is then reached by gmm_vi_fit rather than set here.  Errors: those of
 * the prior at theta, GMM_ENOMEM.  O(n kl^2) plus the Laplace
 * approximation. */
gmm_status gmm_vi_start_laplace(gmm_vi *v, const char **start);

/* Maximise the ELBO by L-BFGS on its exact gradient (liblbfgs, More-Thuente
 * line search), over lambda and, with learn_hyper, the free
 * hyperparameters; from the state set before, else from
 * gmm_vi_start_laplace.  A trial point where the ELBO is not defined
 * (GMM_EDOM, GMM_ENOTPD) is rejected as in fit.h (DOMAIN FAILURES).  On
 * GMM_OK the state holds the final point and *res describes it; a stop on
 * the iteration limit or a failed line search is GMM_OK with converged = 0.
 * Errors: the start's (the ELBO not defined at the starting point: message
 * prefixed "vi: starting point: "), GMM_ECANCEL (the state then holds the
 * last accepted iterate and *res describes it), GMM_ENOMEM.  Cost per
 * iteration: ~1-2 ELBO evaluations plus O(memory nvar) and the
 * preconditioner's O(n b^2) (vi.c, SCALING; O(n b^3) once per run).
 * Memory besides v's: L-BFGS's 2 memory nvar doubles, the preconditioner's
 * n (b + 1)^2 (n (b + 1) when b + 1 > 2 memory: its diagonal only). */
gmm_status gmm_vi_fit(gmm_vi *v, gmm_vi_result *res);

/* The error of the expectations' quadrature at the current state (set by
 * gmm_vi_set_state, gmm_vi_start_laplace or gmm_vi_fit): *err = sum_r
 * |E_r(K) - E_r(K')|, E_r(K) with the rule of nquad points (0: the
 * automatic per-row choice) and K' = 2K (K = GMM_LIK_QUAD_MAX: K / 2, an
 * overestimate) -- the rule's own error when K' is the more accurate, as
 * it is for these smooth integrands (likelihood.h's table).  0 for the
 * families in closed form (gaussian, poisson), whatever nquad.  A fixed
 * rule's accuracy depends on the variances s2_r, so no nquad is accurate
 * for every data set: check it here.  Errors: GMM_EINVAL (NULL, no state
 * set, nquad > GMM_LIK_QUAD_MAX), those of gmm_vi_elbo.  O(nrows K). */
gmm_status gmm_vi_quad_error(gmm_vi *v, size_t nquad, double *err);

/* The largest quadrature error accepted, relative to max(1, |ELBO|): below
 * the digits the ELBO is printed with (the automatic rule keeps 1e-11
 * relative per row up to s2 = 4, likelihood.h). */
#define GMM_VI_QUAD_RTOL 1e-8
/* gmm_vi_quad_error's *err and its limit GMM_VI_QUAD_RTOL max(1, |ELBO|)
 * at the current state; the rule is accurate when *err <= *limit.  Errors
 * as gmm_vi_quad_error and gmm_vi_elbo. */
gmm_status gmm_vi_quad_check(gmm_vi *v, size_t nquad, double *err, double *limit);

/* ---- q as a posterior ------------------------------------------------------- */

/* m (n, or NULL) and the band of Sigma = (L L')^-1 (SYMMETRIC n x n, any
 * bandwidth, or NULL) at the current state: exact entries of Sigma on
 * cov's band (Takahashi); with constraints q's conditioned moments m_c
 * and Sigma_c.  O(n b max(b, cov->kl)) (+ O(n kl k)). */
gmm_status gmm_vi_posterior(gmm_vi *v, double *mean, gmm_band *cov);
/* Mean and variance of the linear predictor b0 + f under q at the current
 * state: at every data row (nrows), at every node of a graph latent (n,
 * graph numbering), or at new inputs of a state-space latent -- as
 * problem.h's gmm_problem_predict_* do for the Laplace posterior.  GMM_EINVAL
 * where the family has no such sites; GMM_ENOMEM. */
gmm_status gmm_vi_predict_rows(gmm_vi *v, double *mean, double *var);
gmm_status gmm_vi_predict_nodes(gmm_vi *v, double *mean, double *var);
gmm_status gmm_vi_predict_at(gmm_vi *v, const double *xq, size_t nq, double *mean, double *var);
/* The latent part alone (h' x, without the coefficients' offset) under q:
 * at nq new inputs xq (state-space) or at every node (graphs; xq NULL, nq
 * ignored, n outputs).  Errors as gmm_vi_predict_at. */
gmm_status gmm_vi_predict_latent(gmm_vi *v, const double *xq, size_t nq, double *mean,
                                 double *var);
/* Mean and variance under q of nq sparse linear forms a_q'x (no offset; as
 * problem.h's gmm_problem_predict_forms): from Sigma's band where a form's
 * latents lie within it, else |L^-1 a|^2 by one banded solve (O(n b)).
 * Errors: GMM_EINVAL (NULL, a latent out of range), GMM_ENOMEM. */
gmm_status gmm_vi_predict_forms(gmm_vi *v, size_t nq, const size_t *ptr, const size_t *idx,
                                const double *w, double *mean, double *var);

#endif
