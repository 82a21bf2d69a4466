/* stack.h -- a latent vector stacking K components (iid, random walks,
 * Besag, BYM2, graph, kernel, AR(1) and seasonal fields, interactions),
 * each indexed by the levels or the values of a data column, as one
 * gmm_latent (latent.h) with one banded precision: data row r reads f_r =
 * sum_k x_k[level_k(r)].  Intrinsic components carry constraints A x = 0; a
 * damped kernel puts the stack in a square-root form.  Design:
 * src/model/stack/ -- priors in latent_stack.c, stack_ts.c, stack_kron.c,
 * order stack_order.c, constraints stack_normaliser.c, stack_sqrt.c. */
#ifndef GMM_STACK_H
#define GMM_STACK_H

#include <stddef.h>

#include "gmm/gmrf.h"
#include "gmm/graph.h"
#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/status.h"

typedef enum {
    GMM_STACK_IID = 0,
    GMM_STACK_RW1,
    GMM_STACK_RW2,
    GMM_STACK_BESAG,
    GMM_STACK_BYM2,
    GMM_STACK_GRAPH,
    GMM_STACK_KERNEL,
    GMM_STACK_CORR,
    GMM_STACK_AR1,         /* stack_ts.c */
    GMM_STACK_SEASONAL     /* stack_ts.c */
} gmm_stack_model;
/* gmm_latent_stack_kind's answer out of range */
#define GMM_STACK_NO_MODEL ((gmm_stack_model)-1)

/* CORR: at most this many correlated effects per level (its parameters
 * k (k + 1) / 2). */
#define GMM_STACK_CORR_MAX 8

/* One component.  Read by gmm_latent_stack_alloc only, except gmrf. */
typedef struct {
    gmm_stack_model model;
    const char *name;      /* parameter prefix, e.g. "f.week" (copied) */
    size_t nlevel;         /* IID: number of levels (BESAG, BYM2, GRAPH: the graph's) */
    const size_t *level;   /* IID, BESAG, BYM2, GRAPH: nrows levels (graph nodes) */
    const double *value;   /* RW1, RW2, KERNEL: nrows finite index values */
    const gmm_graph *graph; /* BESAG, BYM2 */
    const gmm_gmrf *gmrf;  /* GRAPH: borrowed, must outlive the latent */
    const gmm_kernel *kernel; /* KERNEL: borrowed, must outlive the latent; its
                            * values are the starting values */
    int cyclic;            /* RW1, RW2: nonzero for the cyclic walk (0 otherwise) */
    double period;         /* cyclic: the circumference; 0: the default, the
                            * values' range plus one mean spacing.  Nonzero
                            * without cyclic is GMM_EINVAL */
    double merge_tol;      /* KERNEL: values within merge_tol of their group's
                            * first share its state (gmm_ssm_params.merge_tol);
                            * 0: exact ties only.  Finite and >= 0; nonzero on
                            * another model is GMM_EINVAL */
    double variance, phi;  /* starting values; 0: the defaults 1 and 0.5
                            * (GRAPH: the gmrf's own values; CORR: each
                            * effect's variance, correlations start at 0) */
    /* CORR: neffect (1 .. GMM_STACK_CORR_MAX) correlated effects per level
     * of level/nlevel; row r reads sum_a z[r neffect + a] u_{level[r], a}
     * (z: nrows x neffect, row-major; 1 for an intercept); effect[a] the
     * effects' names, in the parameters' names (latent_stack.c, CORR) */
    size_t neffect;
    const double *z;
    const char *const *effect;
    /* AR1, SEASONAL (stack_ts.c): the index values must be integers; the
     * latents are the positions min..max (a gap a latent without data) */
    double rho;            /* AR1: starting rho in (-1, 1); 0: the default 0.5 */
    size_t season;         /* SEASONAL: the season length m >= 2 */
    /* GROUP and REPLICATE (stack_kron.c): with group non-NULL, nrows integer
     * group values (positions min..max), the component the Kronecker product
     * Q_control (x) Q_main, control one of IID, RW1, RW2 (unit spacing, no
     * variance of their own) or AR1 (unit marginal variance, its own rho,
     * "<name>.group.rho", starting at group_rho, 0: 0.5); with replicate
     * non-NULL, nrows integer replicate values, independent copies
     * I (x) Q.  Neither on a GRAPH or KERNEL main. */
    const double *group;
    gmm_stack_model control;
    double group_rho;
    const double *replicate;
} gmm_stack_term;

/* The stacked latent over nrows data rows and nterm components into
 * *out (nterm 0: the empty latent, n = 0, of a model without latent
 * terms -- a GLM, the offsets X beta alone; freed with gmm_latent_free;
 * terms read only here, except the borrowed gmrf and kernel).  limit:
 * bytes allowed for a band of Q (the joint one, a graph component's, a
 * besag scaling's): a nonzero limit is checked here, before anything is
 * allocated; 0 (GMM_GMRF_BAND_LIMIT) when the band path first allocates
 * (gmm_latent_band_check), so that the sparse prior (latent.h) serves a
 * stack of any bandwidth.  Errors: GMM_EINVAL (NULL, a level out of range or a
 * non-finite value with the row in gmm_error_index(), RW1 with fewer than 2
 * distinct values, RW2 or a cyclic walk with fewer than 3, a starting value
 * out of its domain, a missing graph or kernel, cyclic, period or merge_tol
 * on a model that has none, a period not positive and finite or onto which
 * the values reduce to a full period, merge_tol negative or not finite),
 * GMM_ENOMEM (over limit, with the bytes; allocation).  O(rows K^2 + edges
 * log) for the ordering; scaling BESAG and BYM2 O(n l^2) by the band when
 * the graph's RCM bandwidth l is at most 64, else by the sparse factor. */
gmm_status gmm_latent_stack_alloc(size_t nrows, size_t nterm, const gmm_stack_term *terms,
                                  size_t limit, gmm_latent **out);

/* For a stack latent (GMM_EINVAL otherwise): the number of components, the
 * size of component k (latents), its first index in the UNPERMUTED stacked
 * vector, and the latent (permuted) index of component k's local latent j
 * (GMM_NO_INDEX out of range).  Local order: IID, BESAG, GRAPH: the level;
 * RW1: the j-th smallest value; RW2: x_j at 2j, x'_j at 2j + 1; BYM2: b_v at
 * v, u_v at m + v; KERNEL: the SSM's band order (the d states of the j-th
 * smallest value at j d .. j d + d - 1, in the SSM's block order). */
size_t gmm_latent_stack_nterm(const gmm_latent *l);
size_t gmm_latent_stack_size(const gmm_latent *l, size_t k);
size_t gmm_latent_stack_index(const gmm_latent *l, size_t k, size_t j);
/* The f value of component k's level j (IID, BESAG, GRAPH: level j; BYM2:
 * j < m its b_j, then u_{j-m}; RW1, RW2, KERNEL: the j-th smallest value) as
 * sum_e w[e] x[idx[e]], x the stacked (permuted) latent: *nnz entries
 * (room: gmm_latent_stack_row_max).  The number of such levels is
 * gmm_latent_stack_nlevel.  GMM_EINVAL (not a stack, k or j out of range,
 * NULL). */
size_t gmm_latent_stack_nlevel(const gmm_latent *l, size_t k);
gmm_status gmm_latent_stack_level(const gmm_latent *l, size_t k, size_t j, size_t *idx,
                                  double *w, size_t *nnz);
/* RW1/RW2/KERNEL: the sorted distinct values (m, owned by l; KERNEL with
 * merge_tol: each state's, the first value of its group); AR1, SEASONAL:
 * the positions' values min..max; NULL otherwise. */
const double *gmm_latent_stack_values(const gmm_latent *l, size_t k, size_t *m);
/* KERNEL: the distinct values merged into an earlier state by its
 * merge_tol (gmm_ssm_nmerged: a nonzero count is the caller's warning); 0
 * otherwise. */
size_t gmm_latent_stack_nmerged(const gmm_latent *l, size_t k);
/* Cyclic RW1/RW2: the period (the default resolved); NAN otherwise. */
double gmm_latent_stack_period(const gmm_latent *l, size_t k);
/* Cyclic RW1/RW2: t reduced modulo the period onto [t_0, t_0 + period), t_0
 * the smallest level, as the rows' values were (so that a new row's value
 * compares with gmm_latent_stack_values); t itself otherwise. */
double gmm_latent_stack_wrap(const gmm_latent *l, size_t k, double t);
/* BESAG/BYM2: the scaling factor c of R* = c R for graph node v's
 * connected component (1 for an island); NAN otherwise. */
double gmm_latent_stack_scale(const gmm_latent *l, size_t k, size_t v);

/* A new row's reading of one component: level (IID, BESAG, BYM2, GRAPH,
 * CORR: a level or graph node < gmm_latent_stack_size's levels (CORR: its
 * grouping's levels, size / neffect); GMM_NO_INDEX: an IID or CORR level
 * the data do not have) or value (RW1, RW2: any finite value); z (CORR):
 * the row's neffect coefficients. */
typedef struct {
    size_t level;
    double value;
    const double *z;
} gmm_stack_at;

/* Room gmm_latent_stack_row needs per component in idx and w, components
 * other than KERNEL. */
#define GMM_STACK_ROW_MAX 4
/* Room gmm_latent_stack_row needs for one row in all (the sum over the
 * components: GMM_STACK_ROW_MAX, a KERNEL's 2 d or a CORR's neffect); 0 for
 * another latent. */
size_t gmm_latent_stack_row_max(const gmm_latent *l);

/* The linear predictor of a new row that reads at[k] of each component:
 *
 *     f = sum_e w[e] x[idx[e]] + eps,   eps ~ N(0, *evar), independent of x,
 *
 * x the stacked (permuted) latent, *nnz entries written (idx, w: room for
 * gmm_latent_stack_row_max).  A data level or value reads its latent; a new
 * IID or CORR level is its prior (CORR: variance z' Sigma z); a new value of
 * a walk or kernel is the process's
 * conditional law given its neighbouring states (bridge between two,
 * dynamics beyond the ends; a cyclic value wrapped first), derived in
 * stack_predict.c.  theta: the latent's parameters (the variances; the
 * weights do not depend on them).  Errors: GMM_EINVAL (not a stack, NULL, a
 * level out of range, a new level of a BESAG, BYM2 or GRAPH component, a
 * value not finite), with the component in gmm_error_index().  O(K log m). */
gmm_status gmm_latent_stack_row(const gmm_latent *l, const double *theta, const gmm_stack_at *at,
                                size_t *idx, double *w, size_t *nnz, double *evar);
/* As gmm_latent_stack_row, with grp[2 k], grp[2 k + 1] the group and
 * replicate values of component k (read by a grouped or replicated one,
 * stack_kron.c NEW ROWS: a fitted group, or beyond them a forecast; a
 * fitted replicate); grp NULL: none (GMM_EINVAL on such a component). */
gmm_status gmm_latent_stack_row_group(const gmm_latent *l, const double *theta,
                                      const gmm_stack_at *at, const double *grp, size_t *idx,
                                      double *w, size_t *nnz, double *evar);
/* CORR component k's Sigma (neffect x neffect, row-major) at its own
 * parameters theta_k (its variances, then its correlations); GMM_EINVAL
 * (not a stack, not a CORR component, NULL), GMM_EDOM (a parameter out of
 * its domain).  O(neffect^3). */
gmm_status gmm_latent_stack_sigma(const gmm_latent *l, size_t k, const double *theta_k,
                                  double *Sigma);
/* The model of component k (its main model for a grouped or replicated
 * one; GMM_STACK_NO_MODEL out of range). */
gmm_stack_model gmm_latent_stack_kind(const gmm_latent *l, size_t k);

/* The constraints A x = 0 in the latent (permuted) numbering: nconstr rows
 * of n doubles, row-major, into A (caller allocates nconstr n). */
gmm_status gmm_latent_stack_constraints(const gmm_latent *l, double *A);

/* log det(V'Q(theta)V), V an orthonormal basis of {A x = 0} (all of R^n
 * without constraints): the log-determinant of the prior precision on the
 * constrained subspace, from a banded factor (stack_normaliser.c,
 * INTRINSIC COMPONENTS).  Equal to the log of the product of Q's nonzero
 * eigenvalues when A spans Q's null space (RW1, BESAG, cyclic RW1 and
 * RW2).  Errors as gmm_latent_prior.  O(n l^2). */
gmm_status gmm_latent_stack_logdet(gmm_latent *l, const double *theta, double *logdet);

/* One line describing the stack into buf (size bytes, truncated): each
 * component's name, model and size, n, the joint bandwidth, the
 * observation width and the band's megabytes. */
void gmm_latent_stack_describe(const gmm_latent *l, char *buf, size_t size);

#endif
