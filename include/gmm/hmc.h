/* hmc.h -- Hamiltonian Monte Carlo for a log density on R^dim given as a
 * callback: the No-U-Turn sampler as Stan runs it, or fixed-length HMC, with
 * Stan's warm-up adaptation of the step size and a diagonal metric (the
 * algorithm: src/infer/hmc.c).  The sampler knows nothing of models.  Use:
 * gmm_hmc_alloc (all memory), gmm_hmc_init, gmm_hmc_iterate once per
 * transition (warmup + draws of them), gmm_hmc_free.
 */
#ifndef GMM_HMC_H
#define GMM_HMC_H

#include <stddef.h>
#include <stdint.h>

#include "gmm/status.h"

/* log density at q (dim values) into *lp and its gradient into grad (dim
 * values).  GMM_OK, or GMM_EDOM / GMM_ENOTPD where the density is not
 * defined, or another status for a real error.  A refused point (GMM_EDOM,
 * GMM_ENOTPD, or a non-finite lp or gradient) is logp = -inf: a divergence
 * that ends the trajectory, as Stan treats a model's exception, reported in
 * gmm_hmc_draw.divergent and counted by gmm_hmc_failures -- not an error of
 * the sampler.  Any other status is an error that gmm_hmc_iterate returns;
 * the chain must then be restarted by gmm_hmc_init. */
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
                             * stepsize by Stan's heuristic (hmc.c, WARM-UP) even
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
                             * (hmc.c, WARM-UP) -- for coordinates whose variances
                             * are alike a priori, as under a whitening by an
                             * approximation of the posterior; 0: Stan's
                             * estimator.  Default 0. */
    size_t init_buffer;     /* metric windows (hmc.c, WARM-UP).  Defaults 75, */
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
 * step size.  The metric is kept (unit, set, or adapted by a previous run).
 * Every random number comes from the sampler's own generator: a chain is a
 * function of (seed, chain), q0 and the target alone, so chains may run in
 * any threads, in any order, with identical results.
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
