/* vi.h -- variational inference with a Gaussian q(x) = N(m, (L L')^-1), L
 * a lower band: the ELBO of a problem (problem.h), its exact gradient in q
 * and the hyperparameters, its maximisation, and q used as a posterior --
 * all linear in the number of latents.  The ELBO's derivation is at the top
 * of vi_elbo.c, the fit's scaling and stopping at the top of vi_fit.c.
 * Objects are not thread-safe; they borrow the problem (and its latent),
 * which must outlive them.
 */
#ifndef GMM_VI_H
#define GMM_VI_H

#include <stddef.h>

#include "gmm/band.h"
#include "gmm/problem.h"
#include "gmm/status.h"

/* q AND ITS PARAMETERS.  lambda (gmm_vi_nvar = n + n (b + 1) doubles) is m
 * (n), then L's band in LAPACK layout (band.h: column j's b + 1 slots
 * L(j, j), L(j + 1, j), ..., contiguous) with the diagonal stored as its
 * log; the slots past row n - 1 of the last b columns are ignored and get
 * gradient 0.  ELBO = sum_r E_q log p(y_r | f_r) - KL(q || prior), a lower
 * bound of the marginal likelihood (marglik.h).  With the latent's
 * constraints A x = 0 (gmm_latent_nconstr), q is N(m, (L L')^-1)
 * conditioned on them (mean m_c, covariance Sigma_c; vi_elbo.c,
 * CONSTRAINTS) and the bound is of the constrained marginal likelihood. */

/* Bandwidth value meaning "the prior's" (gmm_latent_bandwidth). */
#define GMM_VI_BANDWIDTH_PRIOR ((size_t)-1)

/* Which form of the prior the KL uses. */
typedef enum {
    GMM_VI_PRIOR_AUTO = 0,  /* rows when the latent has them, else assembled */
    GMM_VI_PRIOR_ROWS,      /* the square root Q_p = G'G (state-space only):
                             * keeps its digits at close inputs (vi_elbo.c,
                             * PRIOR TERMS) */
    GMM_VI_PRIOR_ASSEMBLED  /* Q_p as gmm_latent_prior assembles it */
} gmm_vi_prior_form;

/* What the progress callback sees after each accepted L-BFGS iteration. */
typedef struct {
    size_t iteration;    /* 1-based */
    size_t evaluations;  /* ELBO evaluations so far */
    double elbo;         /* at the new iterate */
    double grad_norm;    /* Euclidean norm of the ELBO's gradient in the
                          * optimiser's variables: u, preconditioned
                          * (vi_fit.c, SCALING), and the free hyperparameters on their
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
                         * a final run follows (vi_fit.c, STOPPING). */
    double epsilon;     /* converged when |grad| <= epsilon max(1, |u|)
                         * (u the optimiser's variables, as in grad_norm:
                         * about a posterior sd of q per unit); > 0.
                         * Default 1e-6. */
    size_t memory;      /* L-BFGS corrections kept, 1 .. 1000.  Default 10. */
    size_t nquad;       /* Gauss-Hermite points for the families without a
                         * closed form: 0 (default: chosen per row from its
                         * variance s2_r, vi_elbo.c, EXPECTATIONS) or
                         * 1 .. GMM_LIK_QUAD_MAX */
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
                          * (vi_fit.c, STOPPING) */
    size_t iterations;   /* over all runs */
    size_t evaluations;
    size_t restarts;     /* runs after the first (vi_fit.c, SCALING) */
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
 * objective's values are the starting hyperparameters, copied here; the
 * hyperparameters theta follow the problem's layout).
 * Workspaces are sized here: about 4 bands of (l' + 1) n doubles plus
 * (kl + 1) n (rows) or 3 bands of (kl + 1) n (assembled).  No start is set
 * (gmm_vi_fit starts from the Laplace approximation unless
 * gmm_vi_set_state or gmm_vi_start_laplace ran).  Errors: GMM_EINVAL (NULL,
 * bad params, ROWS for a latent without a square root or whose square root
 * does not take its constraints), GMM_ENOMEM. */
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
 * (the prior); GMM_EINVAL (NULL v, theta or lambda).  The gradient is exact
 * (reverse mode, the coefficients h_r included); O(n b l') + O(n kl^2),
 * l' = max(b, width - 1, kl), and no allocation. */
gmm_status gmm_vi_elbo(gmm_vi *v, const double *theta, const double *lambda, double *elbo,
                       double *lambar, double *thetabar);

/* ---- state: hyperparameters and q ----------------------------------------- */

/* Current hyperparameters (nparam; the problem's layout) and variational
 * parameters (nvar), owned by v; after gmm_vi_fit, its final point. */
const double *gmm_vi_theta(const gmm_vi *v);
const double *gmm_vi_lambda(const gmm_vi *v);
/* m (n entries: the first of lambda; with constraints q's mean m_c). */
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
 * *start (may be NULL) says "prior", else "laplace".  With constraints
 * the Gaussian optimum is reached by gmm_vi_fit rather than set here
 * (P is pinned where singular off the subspace: vi_elbo.c, CONSTRAINTS).
 * Errors: those of the prior at theta, GMM_ENOMEM.  O(n kl^2) plus the
 * Laplace approximation. */
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
 * preconditioner's O(n b^2) (vi_fit.c, SCALING; O(n b^3) once per run).
 * Memory besides v's: L-BFGS's 2 memory nvar doubles, the preconditioner's
 * n (b + 1)^2 (n (b + 1) when b + 1 > 2 memory: its diagonal only). */
gmm_status gmm_vi_fit(gmm_vi *v, gmm_vi_result *res);

/* The error of the expectations' quadrature at the current state (set by
 * gmm_vi_set_state, gmm_vi_start_laplace or gmm_vi_fit): *err = sum_r
 * |E_r(K) - E_r(K')|, E_r(K) with the rule of nquad points (0: the
 * automatic per-row choice) and K' = 2K (K = GMM_LIK_QUAD_MAX: K / 2, an
 * overestimate): the rule's own error for these smooth integrands
 * (likelihood.h's table; it depends on the data through s2_r).  0 for the
 * families in closed form (gaussian, poisson), whatever nquad.  Errors:
 * GMM_EINVAL (NULL, no state set, nquad > GMM_LIK_QUAD_MAX), those of
 * gmm_vi_elbo.  O(nrows K). */
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
