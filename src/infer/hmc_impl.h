/* hmc_impl.h -- what the files of a gmm_hmc share.  Private.
 * hmc.c (parameters, allocation, the run) calls hmc_adapt.c (warm-up) and
 * hmc_trajectory.c (leapfrog, NUTS, fixed-length HMC); hmc_adapt.c calls
 * hmc_trajectory.c; hmc_trajectory.c calls neither. */
#ifndef GMM_HMC_IMPL_H
#define GMM_HMC_IMPL_H

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "gmm/hmc.h"
#include "gmm/rng.h"

/* Conventions.  A point holds q, its log density lp and gradient g of logp
 * (Stan keeps V = -lp and dV/dq), and for trajectory ends the momentum p and
 * kinetic energy kin = p' M^-1 p / 2.  lp = -inf marks a refused point.
 */
typedef struct {
    double *q, *p, *g; /* p is NULL for the sample/proposal buffers */
    double lp, kin;
} point;

struct gmm_hmc {
    size_t dim;
    gmm_hmc_params par;
    gmm_hmc_target target;
    gmm_rng rng;
    int ready;

    double *inv_metric;
    double *sqrt_metric;  /* 1 / sqrt(inv_metric): momentum scale */
    point cur_a, cur_b;   /* the chain's state and the proposal (swapped) */
    point *cur, *prop;
    point zf, zb;         /* the trajectory's forward and backward ends */
    double *rho;          /* sum of the momenta over the trajectory */
    double *rho_new;      /* ... over the subtree being built */
    double *p_new_beg;    /* momentum at the subtree's first leaf */
    double *p_near;       /* old end momentum adjacent to the new subtree */
    /* Per recursion level d = 2 .. max_depth - 1, when merging the two halves
     * of a subtree of depth d: the momentum at the end of the first half, at
     * the start of the second, and the second half's momentum sum. */
    double **p_init_end, **p_final_beg, **rho_final;
    double *welford_mean, *welford_m2;
    double *half_mean, *half_m2; /* the window's first half (metric_pooling) */

    /* the transition being built */
    double H0;
    double lsw_sub;       /* log sum of weights exp(H0 - H) over the subtree */
    double sum_metro;
    size_t n_leapfrog;
    int divergent;

    /* step size and dual averaging (stepsize_adaptation.hpp) */
    double eps;           /* nominal step size */
    double step;          /* this transition's: eps, jittered after warm-up */
    double da_mu, da_sbar, da_xbar;
    double da_counter;

    /* metric windows (windowed_adaptation.hpp); unsigned as there */
    int windows;          /* 0: no metric adaptation */
    size_t w_warmup, w_init, w_term, w_base;
    size_t w_counter, w_next, w_size;
    size_t w_begin;       /* the window's first iteration */
    size_t welford_n, half_n;

    size_t iteration;
    size_t div_warmup, div_sampling;
    size_t failures;
    char fail_msg[GMM_ERROR_MAX];
};

static inline void copy_vec(double *dst, const double *src, size_t n) { memcpy(dst, src, n * sizeof *dst); }

static inline void copy_state(point *dst, const point *src, size_t n)
{
    copy_vec(dst->q, src->q, n);
    copy_vec(dst->g, src->g, n);
    if (dst->p && src->p)
        copy_vec(dst->p, src->p, n);
    dst->lp = src->lp;
    dst->kin = src->kin;
}

/* H at z; +inf for a refused point or NaN. */
static inline double hamiltonian(const point *z)
{
    double H = z->kin - z->lp;
    return isnan(H) || z->lp == -INFINITY ? INFINITY : H;
}

/* inv_metric changed: its root for hmc_sample_momentum. */
static inline void metric_changed(gmm_hmc *h)
{
    for (size_t i = 0; i < h->dim; i++)
        h->sqrt_metric[i] = 1.0 / sqrt(h->inv_metric[i]);
}

/* hmc_trajectory.c */
void hmc_sample_momentum(gmm_hmc *h, point *z);
gmm_status hmc_leapfrog(gmm_hmc *h, point *z, double eps);
gmm_status hmc_nuts_transition(gmm_hmc *h, gmm_hmc_draw *d);
gmm_status hmc_static_transition(gmm_hmc *h, gmm_hmc_draw *d);

/* hmc_adapt.c */
gmm_status hmc_init_stepsize(gmm_hmc *h);
void hmc_da_restart(gmm_hmc *h);
void hmc_da_learn(gmm_hmc *h, double accept_stat);
void hmc_windows_setup(gmm_hmc *h);
int hmc_learn_variance(gmm_hmc *h, const double *q);

#endif
