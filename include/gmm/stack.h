/* stack.h -- a latent vector stacking K components, each indexed by the
 * levels of a data column, as one gmm_latent (latent.h) with one banded
 * precision: the linear predictor of data row r is
 *
 *     f_r = sum_k x_k[level_k(r)].
 *
 * COMPONENTS (variance = the component's "<name>.variance"):
 *
 *   IID    x_k ~ N(0, variance I) over nlevel levels.
 *   RW1    Wiener process on the sorted distinct values t_0 < ... < t_{m-1}
 *          of the index: x'Q x = sum_j (x_{j+1} - x_j)^2 / (variance dt_j),
 *          dt_j = t_{j+1} - t_j.  m latents.  Intrinsic: constraint
 *          sum_j x_j = 0.
 *   RW2    integrated Wiener process, EXACT two-state form: a state (x_j,
 *          x'_j) per level, transition F = [1 dt; 0 1], innovation
 *          covariance variance [dt^3/3 dt^2/2; dt^2/2 dt] (its posterior mean
 *          is the cubic smoothing spline).  2m latents (data read x_j);
 *          bandwidth 3 on its own.  Chosen over the one-state approximation
 *          of Lindgren & Rue (2008) because it is exact at any spacing for
 *          the price of a doubled dimension.  Intrinsic (null space: lines
 *          a + b t): constraints sum_j x_j = 0 and sum_j (t_j - tbar) x_j = 0.
 *   CYCLIC RW1, RW2  (term.cyclic) the walk on a circle of circumference
 *          `period`: the values t_0 < ... < t_{m-1} are points on it and
 *          the last is followed by the first, a wrap-around distance
 *          d = period - (t_{m-1} - t_0) further on; the walk gains that
 *          interval (RW1: (x_0 - x_{m-1})^2 / (variance d); RW2: the
 *          integrated-Wiener transition over d from (x_{m-1}, x'_{m-1})
 *          back to (x_0, x'_0)), so a seasonal effect is continuous (RW2:
 *          with its derivative) from the last level to the first.  period
 *          0: the default t_{m-1} - t_0 plus one mean spacing, i.e. the
 *          levels 1..P of an evenly spaced index (week of the year 1..52:
 *          period 52, week 52 one week before week 1).  An explicit
 *          period > 0 reduces the values modulo it onto [t_min, t_min +
 *          period), t_min the smallest value (week numbers 1..416 with
 *          period 52: the levels 1..52, week 53 at week 1's);
 *          gmm_latent_stack_wrap maps a new value the same way.
 *          Sizes as the open walks; at least 3 distinct values.  The null
 *          space is the constant alone (on a circle RW2's slope direction
 *          x' = b gives b period = 0), so both carry the one constraint
 *          sum_j x_j = 0.  The wrap's long edge leaves the band O(1): RCM
 *          folds the cycle into a zigzag, twice the open walk's bandwidth
 *          (RW1 2, RW2 6 on its own, whatever m).
 *   BESAG  ICAR on a graph: variance * R*^-, R* = c R the SCALED Laplacian
 *          (Sorbye & Rue 2014): per connected component, c makes the
 *          geometric mean of the marginal variances of the sum-to-zero
 *          constrained field 1.  One constraint per connected component of
 *          two or more nodes; an isolated node (an island) is N(0, variance)
 *          (Freni-Sterrantino et al. 2018).  nlevel = graph nodes.
 *   BYM2   Riebler et al. (2016): b = sqrt(variance) (sqrt(1 - phi) v +
 *          sqrt(phi) u), v ~ N(0, I), u the scaled BESAG field with unit
 *          variance.  2m latents (b, u), data read b; parameters
 *          "<name>.variance" and "<name>.phi" (0 < phi < 1).  Joint
 *          precision [I/(s(1-phi)), -sqrt(phi/s)/(1-phi) I; ., R* +
 *          phi/(1-phi) I], s = variance.  Constraints on u as BESAG.
 *   GRAPH  a graph precision from gmrf.h's table (borrowed gmm_gmrf; its
 *          parameters named "<name>.<gmrf parameter name>").  Proper.
 *   KERNEL a stationary GP of the index values through its state-space
 *          form (ssm.h, borrowed gmm_kernel): the d states at each distinct
 *          value, their banded precision Q(theta) from gmm_ssm_prior (its
 *          parameters named "<name>.<ssm parameter name>", e.g.
 *          "f.t.0.matern32.variance"); a data row reads H x at its value's
 *          state, H the kernel's observation row (only H's nonzero entries).
 *          With term.merge_tol > 0, values within merge_tol of the first
 *          value of their group share its state (ssm.h, MODEL: a group's
 *          first value is the smallest, the next group starts more than
 *          merge_tol above it): near-ties closer than the spacing limit
 *          (below) become one state.  Proper.  Q is nonlinear in theta, so a factor of the joint
 *          precision inherits the SSM's spacing limit (gmm_ssm_prior's
 *          GMM_EDOM: inputs closer, relative to a lengthscale, than the
 *          Cholesky of the assembled precision resolves).  A kernel with a
 *          damped zero-noise factor (constant, cosine or periodic not
 *          multiplied by a factor with process noise, kernel.h ZERO PROCESS
 *          NOISE: precision entries ~ K / damp_rel) puts the whole stack in
 *          the SQUARE-ROOT FORM below.
 *
 * SQUARE-ROOT FORM (stack_sqrt.c).  With a damped kernel the joint
 * posterior precision is folded from rows (the kernel's transition rows,
 * the other components' Cholesky rows, the data's), never assembled: the
 * exact Gaussian likelihood and the Laplace approximation's smoothing
 * (latent.h, wls) take it, with their gradients, constraints included (the
 * pins among the rows); a demodulated oscillator's rows h(t) vary with
 * theta (gmm_latent_obs_varies), and so do new rows' (gmm_latent_stack_row).
 * The whitening is block diagonal: the other components' as below, each
 * damped kernel's innovations form.  The prior's square root is the merged
 * rows, one per latent, the pins among them with constraints
 * (gmm_latent_prior_rows, gmm_latent_prior_rows_pins; VI), with the reverse
 * from q's moments (gmm_latent_prior_rows_rev_q).  The assembled prior
 * (gmm_latent_prior, hence the Laplace map) and gmm_latent_stack_logdet
 * refuse it with GMM_EINVAL and the reason (gmm_latent_assembled says so
 * beforehand).
 *
 * ORDER AND BAND.  The stacked vector (components one after another, each
 * in its own local order) is permuted by reverse Cuthill-McKee over the
 * union of the components' precision graphs and the data's graph (each
 * data row joins the K latents it reads), so that Q is banded with lower
 * bandwidth kl and each data row reads a window of width <= kl + 1 of the
 * permuted vector (coefficients 1 at its K entries, 0 elsewhere; obs width
 * = the widest such window).  An iid term alone adds no band; a factor
 * crossed with a time series adds about the smaller of the two sizes.
 *
 * INTRINSIC COMPONENTS.  Their prior is the limit of a proper GMRF
 * conditioned on the constraints A x = 0: the Gaussian on {A x = 0} with
 * precision Q there (covariance V (V'QV)^-1 V', V a basis of that
 * subspace).  The normalising constant comes from the banded determinant
 * of Q with the rows and columns of k pinned latents S removed (N_S
 * invertible, N the null space of Q): det(V'QV) det(AA') = det(Q_-S)
 * det(AN)^2 / det(N_S)^2.  gmm_latent_nconstr gives the number of
 * constraints, gmm_latent_constraints and gmm_latent_constraint_pins A and
 * S.  The exact Gaussian likelihood (gmm_latent_gaussian), the Laplace
 * approximation (gmm_problem) and their gradients and posteriors condition
 * on them (constr.h); the whitening (hence HMC) maps v onto the subspace:
 * x = M L^^-T P_S v, M = I - N (AN)^-1 A the projection along Q's null
 * space, L^ the Cholesky factor of Q with S pinned, P_S zeroing v_S (k
 * coordinates of v the likelihood never reads, left N(0, 1)).  VI
 * conditions its q on them (vi.h, CONSTRAINTS).
 *
 * MEMORY.  The band of Q holds (kl + 1) n doubles and the observation map
 * nrows x width; either above `limit` bytes (0: GMM_GMRF_BAND_LIMIT) is
 * GMM_ENOMEM with the bytes needed, before either is allocated.
 */
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
    GMM_STACK_KERNEL
} gmm_stack_model;

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
    double period;         /* cyclic: the circumference; 0: the default (above).
                            * Nonzero without cyclic is GMM_EINVAL */
    double merge_tol;      /* KERNEL: values within merge_tol of their group's
                            * first share its state (gmm_ssm_params.merge_tol);
                            * 0: exact ties only.  Finite and >= 0; nonzero on
                            * another model is GMM_EINVAL */
    double variance, phi;  /* starting values; 0: the defaults 1 and 0.5
                            * (GRAPH: the gmrf's own values) */
} gmm_stack_term;

/* The stacked latent over nrows data rows and nterm >= 1 components.
 * limit: bytes allowed for one band (0: GMM_GMRF_BAND_LIMIT).  Errors:
 * GMM_EINVAL (NULL, a level out of range or a non-finite value with the row
 * in gmm_error_index(), RW1 with fewer than 2 distinct values or RW2 or a
 * cyclic walk fewer than 3, a starting value out of its domain, a missing
 * graph or kernel, cyclic on another model, merge_tol negative, not finite or on
 * another model than KERNEL, a period without cyclic, not positive
 * and finite, or onto which the values reduce to a full period), GMM_ENOMEM
 * (the band or observation map over limit, with the bytes; allocation).
 * O(rows K^2 + edges log) for the ordering, O(n l^2) for the scaling of
 * BESAG and BYM2. */
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
 * merge_tol: each state's, the first value of its group); NULL otherwise. */
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

/* A new row's reading of one component: level (IID, BESAG, BYM2, GRAPH: a
 * level or graph node < gmm_latent_stack_size's levels; GMM_NO_INDEX: an
 * IID level the data do not have) or value (RW1, RW2: any finite value). */
typedef struct {
    size_t level;
    double value;
} gmm_stack_at;

/* Room gmm_latent_stack_row needs per component in idx and w, components
 * other than KERNEL. */
#define GMM_STACK_ROW_MAX 4
/* Room gmm_latent_stack_row needs for one row in all (the sum over the
 * components: GMM_STACK_ROW_MAX, or a KERNEL's 2 d); 0 for another latent. */
size_t gmm_latent_stack_row_max(const gmm_latent *l);

/* The linear predictor of a new row that reads at[k] of each component:
 *
 *     f = sum_e w[e] x[idx[e]] + eps,   eps ~ N(0, *evar), independent of x,
 *
 * x the stacked (permuted) latent, *nnz entries written (idx, w: room for
 * gmm_latent_stack_row_max).  A level or a data value of the index reads its
 * latent (w = 1).  A new IID level is its prior, eps ~ N(0, variance).  A
 * new RW1/RW2 value is the process's conditional law given the walk at the
 * data's values (Markov: given its neighbours alone): between two values,
 * the Brownian bridge (RW1; mean weights d2/d, d1/d, variance variance d1
 * d2 / d) or the integrated Wiener bridge on the neighbours' states (x, x')
 * (RW2); beyond the last value by d, x + N(0, variance d) (RW1) and x + d x'
 * + N(0, variance d^3/3) (RW2), and before the first the same backwards (the
 * intrinsic walk's initial state is flat, so its reversal is the same
 * process); a KERNEL's value between two data values reads the Markov
 * bridge of its states (x(t) | x_l, x_r has precision Q1^-1 + A2' Q2^-1 A2,
 * A_i = A(d_i), Q_i = Q(d_i), and f = H x(t)), beyond the last value the
 * prior dynamics (H A(d) x_last, variance H Q(d) H'), before the first the
 * stationary process's reversal (H Pinf A(d)' Pinf^-1 x_first, variance H
 * (Pinf - Pinf A' Pinf^-1 A Pinf) H'), and a value within its merge_tol of
 * a state (on either side) that state's reading, as a data value there was
 * merged into it; a cyclic walk's value is first reduced onto its circle
 * (gmm_latent_stack_wrap), and one between the last value and the first
 * bridges the wrap-around interval.  theta: the latent's parameters (for
 * the variances; the weights do not depend on them).  Errors: GMM_EINVAL
 * (not a stack, NULL, a level out of range, a new level of a BESAG, BYM2 or
 * GRAPH component, a value not finite), with the component in
 * gmm_error_index().  O(K log m). */
gmm_status gmm_latent_stack_row(const gmm_latent *l, const double *theta, const gmm_stack_at *at,
                                size_t *idx, double *w, size_t *nnz, double *evar);
/* The model of component k (GMM_STACK_KERNEL + 1 out of range). */
gmm_stack_model gmm_latent_stack_kind(const gmm_latent *l, size_t k);

/* The constraints A x = 0 in the latent (permuted) numbering: nconstr rows
 * of n doubles, row-major, into A (caller allocates nconstr n). */
gmm_status gmm_latent_stack_constraints(const gmm_latent *l, double *A);

/* log det(V'Q(theta)V), V an orthonormal basis of {A x = 0} (all of R^n
 * without constraints): the log-determinant of the prior precision on the
 * constrained subspace, banded (see INTRINSIC COMPONENTS).  Equal to the
 * log of the product of Q's nonzero eigenvalues when A spans Q's null space
 * (RW1, BESAG, cyclic RW1 and RW2).  Errors as gmm_latent_prior.  O(n l^2). */
gmm_status gmm_latent_stack_logdet(gmm_latent *l, const double *theta, double *logdet);

/* One line for --verbose: each component's name, model and size, n, the
 * joint bandwidth, the observation width and the band's megabytes. */
void gmm_latent_stack_describe(const gmm_latent *l, char *buf, size_t size);

#endif
