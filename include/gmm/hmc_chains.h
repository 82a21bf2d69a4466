/* hmc_chains.h -- chains of whitened HMC on a gmm_problem, run on threads
 * and read back in chain order through a sink of callbacks: the runner
 * behind `gmm-infer hmc`.  The library never prints; the caller decides the
 * format and the files.
 */
#ifndef GMM_HMC_CHAINS_H
#define GMM_HMC_CHAINS_H

#include <stddef.h>
#include <stdint.h>

#include "gmm/hmc.h"
#include "gmm/hmc_marginal.h"
#include "gmm/problem.h"
#include "gmm/status.h"

#define GMM_HMC_NSAMPLER 7

/* The step-size adaptation's target acceptance under the Laplace map: 0.651,
 * Beskos et al. (2013)'s optimum for HMC on near-Gaussian targets in high
 * dimension, which the map's coordinates are (docs/design.md, measured in
 * docs/benchmarks.md); Stan's 0.8 elsewhere. */
#define GMM_HMC_TARGET_ACCEPT_LAPLACE 0.651

typedef struct {
    gmm_hmc_params hmc;        /* sampler settings; hmc.chain, hmc.progress,
                                * hmc.user and hmc.metric_pooling are the
                                * runner's (ignored) */
    size_t nchain;             /* >= 1 */
    uint64_t chain0;           /* the first chain's id (>= 1; its stream) */
    const double *theta;       /* hyperparameters (the objective's nparam);
                                * the sampled ones start there */
    const int *sampled;        /* nparam flags, or NULL: theta fixed */
    const gmm_prior *prior;    /* nparam priors of the sampled ones (with
                                * sampled; gmm_hmc_default_priors) */
    gmm_marginal marginal;     /* with sampled: GMM_MARGINAL_NONE (default),
                                * the joint sampler, GMM_MARGINAL_LAPLACE,
                                * NUTS on theta's marginal and x drawn given
                                * each kept theta, or GMM_MARGINAL_LAPLACE_MH,
                                * those pairs corrected to exact draws
                                * (hmc_marginal.h); the rows are the same,
                                * lp__ is the marginal target's */
    size_t mh_draws;           /* GMM_MARGINAL_LAPLACE_MH: latents drawn per
                                * proposal (M of hmc_marginal.h; 0 = 1);
                                * default 32 (fewer rejections for M cheap
                                * solves: docs/benchmarks.md) */
    const double *x0;          /* the latent (n) to start at, or NULL: the
                                * posterior mode (exact or Laplace) at theta;
                                * with sampled hyperparameters the chains
                                * start at gmm_problem_joint_start's point,
                                * and x0 is not used */
    double offset;             /* added to every f (the data's centre) */
    const unsigned char *keep; /* f sites written (NULL: all) */
    int states;                /* nonzero: rows also hold x */
    int log_lik;               /* nonzero: rows also hold the observed rows'
                                * log-likelihoods (gmm_problem_nobs of them) */
    gmm_metric metric;         /* the whitening map at fixed theta (problem.h;
                                * GMM_METRIC_PRIOR by default); with sampled
                                * hyperparameters only the prior's.  Under
                                * GMM_METRIC_LAPLACE the sampler pools its
                                * metric's window estimates (hmc.h,
                                * metric_pooling); callers should also take
                                * GMM_HMC_TARGET_ACCEPT_LAPLACE as the default
                                * hmc.target_accept there */
    /* Called after every iteration of every chain, one call at a time (the
     * runner serialises them), from the chains' threads; nonzero cancels.
     * May be NULL. */
    int (*progress)(void *user, const gmm_hmc_progress *p);
    void *user;
} gmm_hmc_run_params;

/* Defaults: 4 chains from id 1, hmc's defaults, mh_draws 32, the rest
 * zero/NULL. */
void gmm_hmc_run_params_init(gmm_hmc_run_params *rp);

/* The free parameters of p's objective (not fixed) as sampled[k] = 1, and
 * their default priors by scale (problem.h): lognormal(log value, 1) for a
 * positive parameter, logitnormal(logit value, 1) for one in (0, 1) (mu 0
 * when the value is outside the open domain, which the sampler cannot take
 * on that scale: gmm_hmc_check_priors says so); for the coefficients, as
 * rstanarm's, on the centred and scaled design (problem.h, PRIORS ON THE
 * COEFFICIENTS): a slope normal(0, 2.5 s / sd(x_k)), the intercept (on
 * the centred predictors) normal(m, 2.5 s), with m and s the observed
 * outcomes' mean and sd for the Gaussian likelihood, else the family's
 * default intercept from the data and 1.  Neither depends on the fit, nor
 * on a covariate's location or units.  sampled, prior: nparam each,
 * caller's. */
void gmm_hmc_default_priors(gmm_problem *p, int *sampled, gmm_prior *prior);

/* GMM_EINVAL naming the first sampled parameter with a lognormal or
 * logitnormal prior whose value in theta (nparam) is outside the open
 * domain of its scale (its index in *bad); GMM_OK otherwise. */
gmm_status gmm_hmc_check_priors(gmm_problem *p, const double *theta, const int *sampled,
                                const gmm_prior *prior, size_t *bad);

/* One chain's account, valid while its gmm_hmc_chains lives. */
typedef struct {
    uint64_t id;
    size_t ndone;              /* draws made (before any cut) */
    size_t divergences;        /* over the draws kept */
    size_t leapfrog[2];        /* leapfrog steps of warm-up [0], kept draws [1] */
    double stepsize;           /* the step size after warm-up */
    const double *inv_metric;  /* the sampler's diagonal inverse metric after
                                * warm-up (metric_dim values), on the whitened
                                * latent field and the sampled hyperparameters */
    size_t metric_dim;
    double seconds[2];         /* wall time of warm-up [0] and draws [1] */
    size_t rejected;           /* GMM_MARGINAL_LAPLACE_MH: kept draws where
                                * the correction kept the previous pair */
} gmm_hmc_chain_info;

typedef struct gmm_hmc_chains gmm_hmc_chains;

/* Run rp->nchain chains (ids chain0, chain0 + 1, ...) on nthread threads
 * (probs: nthread problems of the same model, one per thread; nthread is
 * capped at nchain).  Chain c starts at the posterior mode (or x0) jittered
 * by N(0, 0.5^2) in the whitened coordinates from its own random stream, so
 * the draws depend on the seed and the chain id only, never on nthread.
 * Each chain's rows go to temporary storage until replayed.  A nonzero
 * progress return stops every chain at its next iteration (chains not yet
 * started do not start): GMM_ECANCEL, the chains with draws cut to the
 * shortest one's count, divergences and leapfrog steps recounted over the
 * draws kept.  On GMM_OK or GMM_ECANCEL, *out
 * holds the chains (free with gmm_hmc_chains_free); after a cancel it may
 * hold no draws (gmm_hmc_chains_kept 0).  Other errors: *out NULL, the first
 * failing chain's error recorded as "chain ID: reason" (its status), and
 * nothing kept.  GMM_EINVAL: bad params (gmm_hmc_params_check's, no
 * chain, thread or theta, sampled without priors, gmm_hmc_check_priors's);
 * GMM_EIO: the temporary storage failed; GMM_ENOMEM. */
gmm_status gmm_hmc_run_chains(gmm_problem *const *probs, size_t nthread,
                              const gmm_hmc_run_params *rp, gmm_hmc_chains **out);
void gmm_hmc_chains_free(gmm_hmc_chains *r); /* NULL-safe */

size_t gmm_hmc_chains_count(const gmm_hmc_chains *r);        /* nchain */
const gmm_hmc_chain_info *gmm_hmc_chains_info(const gmm_hmc_chains *r, size_t c);
/* Values per row: GMM_HMC_NSAMPLER sampler values (lp__, accept_stat__,
 * stepsize__, treedepth__, n_leapfrog__, divergent__, energy__), the
 * sampled hyperparameters (objective order), f + offset where keep[i] (at
 * each data row of a latent with inputs, or each node of a graph), with
 * states the latent x[0..n), with log_lik log p(y_r | f_r, theta) at every
 * observed data row r (the pointwise log-likelihood loo.h takes). */
size_t gmm_hmc_chains_ncol(const gmm_hmc_chains *r);
size_t gmm_hmc_chains_kept(const gmm_hmc_chains *r);         /* rows per chain kept */
int gmm_hmc_chains_cut(const gmm_hmc_chains *r);             /* cut after a cancel */
/* Chain c is in the output: it has kept rows. */
int gmm_hmc_chains_has_draws(const gmm_hmc_chains *r, size_t c);

/* Where the rows go.  Each callback returns GMM_OK to go on, or a status
 * (with gmm_error's record) that stops the replay and is returned. */
typedef struct {
    gmm_status (*begin)(void *user, const gmm_hmc_chain_info *c); /* may be NULL */
    /* the row of draw `iteration` (1-based) of chain c: ncol values */
    gmm_status (*row)(void *user, const gmm_hmc_chain_info *c, size_t iteration,
                      const double *row, size_t ncol);
    gmm_status (*end)(void *user, const gmm_hmc_chain_info *c);   /* may be NULL */
    void *user;
} gmm_hmc_sink;

/* The kept rows of chain c (begin, rows, end), or of every chain with draws
 * in chain order (gmm_hmc_chains_write).  May be called any number of times.
 * GMM_EIO when the temporary storage cannot be read; the sink's status. */
gmm_status gmm_hmc_chains_replay(const gmm_hmc_chains *r, size_t c, const gmm_hmc_sink *s);
gmm_status gmm_hmc_chains_write(const gmm_hmc_chains *r, const gmm_hmc_sink *s);

/* Chain c's sampler diagnostics over its kept draws, as CmdStan's diagnose
 * computes them: the transitions whose tree depth reached max_depth (the
 * run's; NUTS), the divergent ones, and the energy Bayesian fraction of
 * missing information
 *
 *   E-BFMI = sum_{n>1} (E_n - E_{n-1})^2 / sum_n (E_n - mean E)^2
 *
 * over energy__ (NAN with fewer than 2 draws or a constant energy).  Reads
 * the chain back (GMM_EIO as replay; GMM_ENOMEM: one double per draw). */
typedef struct {
    size_t draws, depth_hits, divergences;
    double ebfmi;
} gmm_hmc_chain_diag;
gmm_status gmm_hmc_chains_diagnose(const gmm_hmc_chains *r, size_t c, unsigned max_depth,
                                   gmm_hmc_chain_diag *d);

#endif
