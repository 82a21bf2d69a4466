/* hmc.h -- Hamiltonian Monte Carlo for a log density on R^dim given as a
 * callback: the No-U-Turn sampler as Stan runs it, or fixed-length HMC, with
 * Stan's warm-up adaptation of the step size and a diagonal metric.  The
 * sampler knows nothing of models: whitening, transforms and output belong to
 * its callers.
 *
 * HAMILTONIAN.  H(q, p) = -logp(q) + p' M^-1 p / 2 with M^-1 = diag(inv_metric)
 * (unit unless adapted or set), integrated by leapfrog with step size eps.
 *
 * NUTS (Hoffman & Gelman 2014; Betancourt 2017, "A conceptual introduction to
 * HMC", appendix A), as in Stan's base_nuts since 2.26:
 *   - the trajectory doubles in a random direction (forward or backward in
 *     time) until the generalised no-U-turn criterion fails, a new subtree is
 *     invalid, or max_depth doublings were made;
 *   - the criterion p#_-.rho > 0 and p#_+.rho > 0 (p# = M^-1 p, rho the sum of
 *     the momenta between the two ends) is checked at every merge of two
 *     subtrees, over the merged tree and over each subtree extended by the
 *     neighbouring state of the other (the checks Stan added in 2.26, which
 *     catch U-turns that fall between subtrees);
 *   - states are drawn by multinomial sampling, weights exp(-H): within a new
 *     subtree uniformly-progressively (here as a reservoir over its leaves, one
 *     proposal buffer instead of one per level; the same distribution as
 *     Stan's merge-by-merge choice), and between the old trajectory and the
 *     new subtree by biased progressive sampling (the new subtree's proposal
 *     is taken with probability min(1, W_new / W_old));
 *   - a leaf with H - H0 > max_energy_error is a divergence: its subtree is
 *     invalid and the trajectory stops.
 * accept_stat__ is the mean over all leaves built of min(1, exp(H0 - H)).
 *
 * FIXED-LENGTH HMC: `steps` leapfrog steps, then a Metropolis accept/reject.
 *
 * DOMAIN FAILURES.  The callback may refuse a point: a return of GMM_EDOM or
 * GMM_ENOTPD, or a non-finite log density or gradient, is taken as logp = -inf
 * (H = +inf) -- a divergence of that trajectory, which stops there, as Stan
 * treats an exception thrown by a model.  It is not an error of the sampler;
 * gmm_hmc_draw.divergent reports it and gmm_hmc_failures() counts them.  Any
 * other status from the callback (GMM_ENOMEM, GMM_EINVAL, ...) is an error:
 * gmm_hmc_iterate returns it, and the chain must be restarted by
 * gmm_hmc_init.
 *
 * WARM-UP (the first `warmup` iterations; as Stan's adapt_diag_e_nuts):
 *   - step size: before the first iteration, Stan's heuristic (double or halve
 *     eps from params.stepsize until the one-step acceptance crosses 0.8);
 *     then Nesterov dual averaging of log eps towards accept_stat =
 *     target_accept (Hoffman & Gelman 2014, section 3.2), mu = log(10 eps0),
 *     gamma, t0, kappa as in params; at the end of warm-up eps = exp(x_bar);
 *   - metric (adapt_metric): the variance of each coordinate over windows --
 *     an initial buffer of init_buffer iterations, then windows of
 *     base_window, doubling, the last stretched to end term_buffer iterations
 *     before the end of warm-up; when init_buffer + base_window + term_buffer
 *     exceed warmup, 15% / 75% / 10% of warmup; with warmup < 20 no metric
 *     adaptation.  At the end of a window inv_metric = (n / (n + 5)) var +
 *     1e-3 (5 / (n + 5)) (Welford variance of the window's n draws), the step
 *     size heuristic runs again from the current point, mu = log(10 eps), and
 *     dual averaging restarts.  With metric_pooling the window's estimates
 *     var_i are pooled instead: inv_metric_i = m + w (var_i - m), m their
 *     mean, w = tau^2 / (tau^2 + e^2) with e^2 the estimates' noise (from
 *     the differences between the window's two halves, mean_i (var_a,i -
 *     var_b,i)^2 n_a n_b / n^2) and tau^2 = max(0, sample variance of the
 *     var_i - e^2) the true variances' spread: Stan's rule with the
 *     pseudo-sample size n e^2 / tau^2 estimated from the window, toward the
 *     common value (w = n / (n + 5) when a half has fewer than 2 draws).  So a
 *     metric that should be unit is not made noisy by its estimate (the
 *     noise of ~ 1/sqrt(n) per coordinate over thousands of coordinates
 *     shortens the step size), and one that should not be keeps its
 *     estimates (w -> 1 as the spread exceeds the noise).
 * With warmup = 0 there is no adaptation: eps is the heuristic's from
 * params.stepsize (params.search_stepsize = 0: params.stepsize itself) and
 * the metric is kept, for every transition.
 *
 * REPRODUCIBILITY.  Every random number comes from the sampler's own gmm_rng,
 * seeded at gmm_hmc_init with (params.seed, params.chain): a chain is a
 * function of its seed, chain number, q0 and target alone.  No global state,
 * so chains may run in any threads, in any order, with identical results.
 *
 * USE.
 *     gmm_hmc_params par;  gmm_hmc_params_init(&par);  par.seed = 7;
 *     gmm_hmc *h = gmm_hmc_alloc(dim, &par);            (all memory here)
 *     gmm_hmc_target t = {logp, ctx};
 *     st = gmm_hmc_init(h, q0, &t);
 *     for (i = 0; i < par.warmup + par.draws; i++) {
 *         st = gmm_hmc_iterate(h, &d);                   (one transition)
 *         if (!d.warmup) write d.q, d.lp, ...;
 *     }
 *     gmm_hmc_free(h);
 */
#ifndef GMM_HMC_H
#define GMM_HMC_H

#include <stddef.h>
#include <stdint.h>

#include "gmm/status.h"

/* log density at q (dim values) into *lp and its gradient into grad (dim
 * values).  GMM_OK, or GMM_EDOM / GMM_ENOTPD where the density is not
 * defined (see DOMAIN FAILURES), or another status for a real error. */
typedef gmm_status (*gmm_hmc_logp_fn)(void *ctx, const double *q, double *lp, double *grad);

typedef struct {
    gmm_hmc_logp_fn logp;
    void *ctx;
} gmm_hmc_target;

typedef enum {
    GMM_HMC_NUTS = 0,   /* the No-U-Turn sampler (default) */
    GMM_HMC_STATIC = 1  /* fixed-length HMC, `steps` leapfrog steps */
} gmm_hmc_kind;

/* One transition: CmdStan's sampler columns and the new point. */
typedef struct {
    const double *q;     /* dim values of the draw; owned by the sampler, valid
                          * until the next gmm_hmc_iterate / _init / _free */
    double lp;           /* lp__: logp(q) */
    double accept_stat;  /* accept_stat__ */
    double stepsize;     /* stepsize__: the eps of this transition */
    unsigned treedepth;  /* treedepth__ (NUTS; 0 for fixed-length HMC) */
    size_t n_leapfrog;   /* n_leapfrog__ */
    int divergent;       /* divergent__: 1 when the trajectory diverged (energy
                          * error > max_energy_error, or a domain failure) */
    double energy;       /* energy__: H at the draw, with its momentum */
    int warmup;          /* 1 for a warm-up iteration */
    int metric_updated;  /* 1 when this warm-up iteration ended a metric
                          * window (the metric and step size were reset) */
    size_t iteration;    /* 0-based, warm-up included */
} gmm_hmc_draw;

/* What the progress callback sees after each transition. */
typedef struct {
    uint64_t chain;             /* params.chain */
    size_t iteration;           /* 1-based, warm-up included */
    size_t total;               /* warmup + draws */
    const gmm_hmc_draw *draw;   /* the transition just made */
    size_t warmup_divergences;  /* divergent transitions so far, per phase */
    size_t divergences;
} gmm_hmc_progress;

/* Nonzero return: gmm_hmc_iterate returns GMM_ECANCEL, with *draw still
 * describing the finished transition (the caller may write it). */
typedef int (*gmm_hmc_progress_fn)(void *user, const gmm_hmc_progress *p);

typedef struct {
    size_t warmup;          /* warm-up iterations, adapting.  Default 1000. */
    size_t draws;           /* iterations after warm-up.  Default 1000. */
    gmm_hmc_kind sampler;   /* Default GMM_HMC_NUTS. */
    unsigned max_depth;     /* NUTS: at most 2^max_depth - 1 leapfrog steps per
                             * transition; 1..30.  Default 10. */
    size_t steps;           /* fixed-length HMC: leapfrog steps per transition,
                             * 1..1e7 (checked only for GMM_HMC_STATIC).
                             * Default 10. */
    double stepsize;        /* initial step size, finite > 0.  Default 1. */
    double stepsize_jitter; /* J in [0, 1): after warm-up, each transition's
                             * step is eps (1 + J u), u ~ U(-1, 1) from the
                             * chain's stream (Neal 2011), so that trajectory
                             * lengths vary; CmdStan's stepsize_jitter, which
                             * jitters in warm-up as well.  0 (default): no
                             * draw, the fixed eps. */
    int search_stepsize;    /* nonzero: gmm_hmc_init searches eps from
                             * stepsize by Stan's heuristic (WARM-UP) even
                             * with warmup = 0, as CmdStan does, so draws
                             * without warm-up move at a step the target
                             * accepts; 0: only when warmup > 0 (eps =
                             * stepsize exactly without warm-up).
                             * Default 1. */
    double target_accept;   /* dual averaging's target (delta), in (0, 1).
                             * Default 0.8. */
    double gamma;           /* dual averaging: regularisation scale, > 0.
                             * Default 0.05. */
    double t0;              /* dual averaging: iteration offset, > 0.
                             * Default 10. */
    double kappa;           /* dual averaging: relaxation exponent, in (0, 1].
                             * Default 0.75. */
    int adapt_metric;       /* nonzero: adapt the diagonal metric in warm-up;
                             * 0 keeps it (unit, or gmm_hmc_set_inv_metric's).
                             * Default 1. */
    int metric_pooling;     /* nonzero: each window's variance estimates are
                             * pooled toward their mean by empirical Bayes
                             * (WARM-UP) -- for coordinates whose variances
                             * are alike a priori, as under a whitening by an
                             * approximation of the posterior; 0: Stan's
                             * estimator.  Default 0. */
    size_t init_buffer;     /* metric windows (see WARM-UP).  Defaults 75, */
    size_t term_buffer;     /* 50 */
    size_t base_window;     /* and 25 (>= 1). */
    double max_energy_error;/* divergence threshold on H - H0, finite > 0.
                             * Default 1000. */
    uint64_t seed;          /* Default 1. */
    uint64_t chain;         /* random stream of this chain (gmm_rng_seed's
                             * stream).  Default 0. */
    gmm_hmc_progress_fn progress; /* may be NULL (default) */
    void *user;             /* passed to progress */
} gmm_hmc_params;

/* Defaults above. */
void gmm_hmc_params_init(gmm_hmc_params *p);
/* GMM_EINVAL naming the bad field ("hmc: target_accept must be in (0, 1),
 * got 1.2"). */
gmm_status gmm_hmc_params_check(const gmm_hmc_params *p);

typedef struct gmm_hmc gmm_hmc;

/* A sampler for targets on R^dim with a copy of params; every workspace
 * (3 max_depth + 14 vectors of dim doubles) is allocated here, so
 * iterating never allocates.  The metric starts unit.  NULL on failure, with
 * the reason recorded (GMM_EINVAL: dim = 0 or bad params; GMM_ENOMEM). */
gmm_hmc *gmm_hmc_alloc(size_t dim, const gmm_hmc_params *params);
/* NULL-safe. */
void gmm_hmc_free(gmm_hmc *h);

/* Start (or restart) the chain at q0 (dim values, copied) on *target
 * (copied; target->ctx must outlive the chain): seeds the generator from
 * (seed, chain), resets the iteration count and the adaptation, evaluates
 * logp(q0) and, when warmup > 0 or search_stepsize, searches the initial
 * step size.  The metric
 * is kept (unit, set, or adapted by a previous run).
 * Errors: GMM_EINVAL (NULL, non-finite q0), the callback's status at q0
 * (a start must be inside the domain: GMM_EDOM, prefixed "hmc: initial
 * point: "), GMM_EDOM when the step-size search leaves (0, 1e7) (an improper
 * or discontinuous target), or any real error of the callback. */
gmm_status gmm_hmc_init(gmm_hmc *h, const double *q0, const gmm_hmc_target *target);

/* One transition (NUTS or fixed-length HMC), adapting during warm-up; *draw
 * describes it.  Cost: n_leapfrog callback evaluations plus O(dim) work per
 * leapfrog step; no allocation.
 * Errors: GMM_EINVAL (not initialised, or all warmup + draws iterations
 * made), GMM_ECANCEL (the progress callback asked to stop; *draw is valid),
 * GMM_EDOM (the metric estimate overflowed, or the step-size search failed
 * after a metric window), or a real error of the callback; after these the
 * chain must be restarted by gmm_hmc_init. */
gmm_status gmm_hmc_iterate(gmm_hmc *h, gmm_hmc_draw *draw);

/* Move the chain to q (dim values, copied), keeping the adaptation, the
 * iteration count and the random stream: for a caller whose own
 * accept/reject step on top of the sampler's transitions keeps the previous
 * point (the sampler's transitions are reversible, so such a composition is
 * a valid Metropolis-Hastings chain).  One callback evaluation; q must be
 * inside the domain.  Errors: GMM_EINVAL (not initialised, NULL), the
 * callback's status or GMM_EDOM at q (then the chain must be restarted by
 * gmm_hmc_init). */
gmm_status gmm_hmc_set_point(gmm_hmc *h, const double *q);

/* The nominal step size (adapted so far; exp(x_bar) after warm-up). */
double gmm_hmc_stepsize(const gmm_hmc *h);
/* The diagonal inverse metric M^-1 (dim values, owned by h). */
const double *gmm_hmc_inv_metric(const gmm_hmc *h);
/* Set M^-1 (dim finite positive values, copied) -- e.g. an adapted metric
 * from an earlier run; takes effect from the next transition (or init).
 * GMM_EINVAL for a value that is not finite and > 0. */
gmm_status gmm_hmc_set_inv_metric(gmm_hmc *h, const double *inv_metric);
/* Callback evaluations refused as domain failures since init, and the last
 * refusal's message ("" when none). */
size_t gmm_hmc_failures(const gmm_hmc *h, const char **last_message);

#endif
