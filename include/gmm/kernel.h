/* kernel.h -- stationary covariance kernels as linear time-invariant
 * stochastic differential equations (state-space models), and the composite
 * kernels built from a spec (sums and products).  Each kernel type gives
 * A, Q and Pinf in closed form with their derivatives in its parameters.
 */
#ifndef GMM_KERNEL_H
#define GMM_KERNEL_H

#include <stddef.h>

#include "gmm/spec.h"
#include "gmm/status.h"

/* Largest number of parameters of one kernel type. */
#define GMM_KERNEL_MAXPARAM 4
/* Largest state dimension of a composite kernel: a spec beyond it is a
 * GMM_EPARSE pointing at the term that crosses it (a state-space model
 * stores d x d blocks per distinct interval and factorises bands of
 * bandwidth up to 2d). */
#define GMM_KERNEL_MAXDIM 4096
/* Largest harmonics value accepted (state dimension of periodic 2(J+1)). */
#define GMM_KERNEL_MAXHARMONICS 64

/* STATE SPACE.  A kernel k(tau) with state dimension d is the covariance of
 * f = H x(t) for the stationary solution of dx = F x dt + L dW, with
 * stationary covariance Pinf (F Pinf + Pinf F^T + L Qc L^T = 0).  Between
 * two inputs dt apart x(t + dt) = A(dt) x(t) + q, A(dt) = expm(F dt),
 * q ~ N(0, Q(dt)), Q(dt) = Pinf - A Pinf A^T; k(tau) = H A(tau) Pinf H^T.
 *
 * SMALL DENSE MATRICES here are d x d, ROW-major (M[i*d + j]); their
 * gradients are full-matrix gradients (Mbar[i*d+j] = dc/dM(i,j), each entry
 * of a symmetric matrix free): band.h's stored-entry convention applies to
 * bands only.
 *
 * ZERO PROCESS NOISE.  constant, cosine and periodic have Q(dt) = 0 (flag
 * zero_noise).  In a composite every zero-noise factor that is not
 * multiplied by one with process noise is damped: k_reg(tau) = k(tau)
 * exp(-|tau| damp / Z), A_reg = rho A, Q_reg = (1 - rho^2) Pinf + rho^2 Q,
 * rho = exp(-damp dt / Z), Z the most damped factors in one term
 * (kernel_eval.c); ssm.h chooses damp, gmm_kernel_cov evaluates k_reg.
 *
 * DEMODULATION.  A damped oscillator factor (cosine, periodic) is carried in
 * rotating coordinates u(t) = R(t - t0)^-1 x(t): A = rho I, Q = (1 - rho^2)
 * Pinf, and the rotation moves into the observation row h(t - t0) = H R(t -
 * t0) (gmm_kernel_obs), through which the period's gradient flows. */

/* How an omitted parameter value is filled (gmm_kernel_fill_defaults). */
typedef enum {
    GMM_KDEF_VARIANCE,    /* sample variance of the observed y (first factor of a
                             product; later factors of the same product get 1) */
    GMM_KDEF_LENGTHSCALE, /* sqrt(median spacing * span) of the distinct x,
                             capped at 50 median spacings */
    GMM_KDEF_ONE,         /* 1: periods, and periodic's (dimensionless) lengthscale */
    GMM_KDEF_HARMONICS    /* 2 */
} gmm_kernel_default;

typedef struct {
    const char *name;          /* key in the spec, e.g. "lengthscale" */
    int structural;            /* nonzero: a positive integer fixing the state
                                  dimension (harmonics); never fitted */
    gmm_kernel_default def;
} gmm_kernel_param;

/* A kernel family: a const object found by name.  p holds all nparam
 * parameter values in the order of `param` (structural ones as doubles).
 * Every continuous parameter must be finite and > 0.  Derivative arrays
 * (dA, dQ, dP) hold one d x d matrix per parameter, nparam in all; the slots
 * of structural parameters are left untouched.  Any output pointer may be
 * NULL when not wanted.  Cost O(d^2) per matrix (O(d^3) for matern52). */
typedef struct {
    const char *name;
    const char *formula;       /* k(tau) in words, for usage and docs */
    size_t nparam;
    const gmm_kernel_param *param;
    size_t (*dim)(const double *p);
    int zero_noise;            /* Q(dt) == 0 exactly: see ZERO PROCESS NOISE */
    /* Accuracy limit (docs/accuracy.md, Close inputs): the smallest dt / p[scale_param]
     * at which the state-space log-likelihood agreed with the dense GP to 1e-6
     * relative in tests/bench/bench_ssm_accuracy.c; min_dt_rel_osc applies when
     * the factor is multiplied by a cosine or periodic factor.  0: no limit
     * was reached down to dt/lengthscale = 1e-6.  The _rows pair: the same
     * for the square-root form, used below the first. */
    size_t scale_param;
    double min_dt_rel, min_dt_rel_osc;
    double min_dt_rel_rows, min_dt_rel_osc_rows;
    /* F (d x d) and the diffusion L Qc L^T (d x d). */
    void (*sde)(const double *p, double *F, double *LQL);
    /* Pinf (d x d) and its derivatives, H (d). */
    void (*stat)(const double *p, double *P, double *dP, double *H);
    /* A(dt), Q(dt) (d x d) and their derivatives; dt > 0. */
    void (*disc)(const double *p, double dt, double *A, double *Q, double *dA, double *dQ);
    /* k(tau) (any sign of tau) and, when dk != NULL, dk/dp (nparam). */
    double (*cov)(const double *p, double tau, double *dk);
    /* Oscillator types only (NULL otherwise): the observation row of the
     * state rotated back by tau, h(tau) = H A(tau) with the decay removed
     * (d), and dh/dp (nparam x d, structural slots untouched).  See
     * DEMODULATION. */
    void (*hmod)(const double *p, double tau, double *h, double *dh);
    /* The state splits into independent blocks of this many consecutive
     * variables: F, A(dt), Q(dt) and Pinf are zero between blocks at every
     * parameter value and dt (2: the harmonics of oscillator types).  0: one
     * block.  See gmm_kernel_blocks. */
    size_t block;
} gmm_kernel_type;

extern const gmm_kernel_type gmm_kernel_matern12;
extern const gmm_kernel_type gmm_kernel_matern32;
extern const gmm_kernel_type gmm_kernel_matern52;
extern const gmm_kernel_type gmm_kernel_cosine;
extern const gmm_kernel_type gmm_kernel_constant;
extern const gmm_kernel_type gmm_kernel_periodic;
extern const gmm_kernel_type gmm_kernel_quasiperiodic;

/* The type called `name`, or NULL.  O(number of types). */
const gmm_kernel_type *gmm_kernel_type_find(const char *name);
/* The i-th type of the table (NULL past the end), for usage listings. */
const gmm_kernel_type *gmm_kernel_type_at(size_t i);

/* ---- composite kernels ----------------------------------------------------- */

/* A sum/product tree of kernel factors with its parameter vector.  The
 * continuous parameters of all factors form one vector theta (length
 * gmm_kernel_nparam), ordered by leaf and, within a leaf, as in its type;
 * they are named "<leaf>.<kernel>.<param>".  Structural values (harmonics)
 * are fixed in the tree. */
typedef struct gmm_kernel gmm_kernel;

/* Build the kernel of a parsed spec.  Values written in the spec are stored;
 * omitted continuous ones are NAN until gmm_kernel_fill_defaults.  Errors:
 * GMM_EPARSE with gmm_error_index() the offset in the spec text of an unknown
 * kernel name, an unknown or repeated key, or a bad structural value
 * (harmonics must be an integer in 1..GMM_KERNEL_MAXHARMONICS); a negative,
 * zero or non-finite continuous value is GMM_EPARSE too (pointing at the key).
 * GMM_ENOMEM.  *out is freed with gmm_kernel_free. */
gmm_status gmm_kernel_from_spec(const gmm_spec_node *spec, gmm_kernel **out);
void gmm_kernel_free(gmm_kernel *k);

size_t gmm_kernel_dim(const gmm_kernel *k);      /* state dimension d */
size_t gmm_kernel_nparam(const gmm_kernel *k);   /* continuous parameters */
size_t gmm_kernel_nleaves(const gmm_kernel *k);
const char *gmm_kernel_param_name(const gmm_kernel *k, size_t i);
/* The stored values (length nparam; NAN = omitted, not yet defaulted).  The
 * caller may write them. */
double *gmm_kernel_values(gmm_kernel *k);
const double *gmm_kernel_values_const(const gmm_kernel *k);
/* Index of the parameter called `name`, or GMM_EINVAL. */
gmm_status gmm_kernel_param_find(const gmm_kernel *k, const char *name, size_t *i);
/* True when some factor is regularised by damping: a zero-process-noise
 * factor not multiplied by a factor with process noise (periodic *
 * matern32 needs none: its Q is positive definite). */
int gmm_kernel_damped(const gmm_kernel *k);

/* Fill every NAN value with its data-driven default (gmm_kernel_default)
 * from the inputs x (n, any order) and outputs y (n; NAN = missing).
 * defaulted (nparam, or NULL): 1 where a value was filled, else 0.  Needs at
 * least one observed y for variances (else variance 1) and two distinct x for
 * lengthscales (else 1).  A zero sample variance gives 1.  O(n log n). */
gmm_status gmm_kernel_fill_defaults(gmm_kernel *k, const double *x, const double *y, size_t n,
                                    int *defaulted);
/* A default noise variance: a tenth of the sample variance of the observed y
 * (0.1 when they are all equal -- their variance is then taken as 1 --, and 1
 * when there are fewer than two observations). */
double gmm_kernel_default_noise(const double *y, size_t n);

/* Write the spec with every value (theta, or the stored values when NULL)
 * into buf, e.g. "matern32(variance=2, lengthscale=0.5) + constant(...)";
 * values printed with %.17g.  Returns the length it needed (as snprintf). */
size_t gmm_kernel_format(const gmm_kernel *k, const double *theta, char *buf, size_t size);

/* k(tau) of the composite kernel at parameters theta, with every
 * zero-process-noise factor multiplied by exp(-|tau| damp / Z) (damp = 0:
 * the exact kernel).  Dense oracles and docs; O(number of leaves + harmonics). */
double gmm_kernel_cov(const gmm_kernel *k, const double *theta, double damp, double tau);
/* The same, and dk (nparam, OVERWRITTEN) = dk(tau)/dtheta, analytic (product
 * rule over the tree; the damping rate is not a parameter): the dense GP's
 * gradient for oracles.  O(leaves x depth + harmonics + nparam). */
double gmm_kernel_cov_grad(const gmm_kernel *k, const double *theta, double damp, double tau,
                           double *dk);

/* The smallest interval dt every factor accepts at theta (its type's
 * min_dt_rel -- rows nonzero: min_dt_rel_rows -- times its scale parameter;
 * see docs/accuracy.md, Close inputs): the largest such value over the factors, 0 when
 * none has a limit.  *param (may be NULL) receives the index in theta of the
 * binding parameter (SIZE_MAX when none). */
double gmm_kernel_spacing_limit(const gmm_kernel *k, const double *theta, int rows,
                                size_t *param);

/* ---- state space of a composite kernel ------------------------------------- */

/* Scratch for the functions below, sized once from the tree.  Not shared
 * between threads. */
typedef struct gmm_kernel_work gmm_kernel_work;
gmm_kernel_work *gmm_kernel_work_alloc(const gmm_kernel *k);
void gmm_kernel_work_free(gmm_kernel_work *w);

/* Validate theta for this kernel: GMM_EDOM naming the parameter when one is
 * not finite and positive. */
gmm_status gmm_kernel_check(const gmm_kernel *k, const double *theta);

/* Stationary part at theta: Pinf (d x d) and H (d), each NULL if not wanted.
 * Must be called (it caches per-leaf Pinf and dPinf in w) before
 * gmm_kernel_disc / gmm_kernel_rev at the same theta.  Sums stack state
 * spaces (block-diagonal), products are Kronecker products (F = F1 (x) I +
 * I (x) F2, Pinf = Pinf1 (x) Pinf2, H = H1 (x) H2).  GMM_EDOM when a
 * parameter is invalid. */
gmm_status gmm_kernel_stat(const gmm_kernel *k, const double *theta, double damp,
                           gmm_kernel_work *w, double *Pinf, double *H);

/* A(dt) and Q(dt) (d x d) of the (damped, demodulated) composite, dt > 0.  Products use
 * Q = Q1 (x) P2 + (A1 P1 A1^T) (x) Q2, a sum of positive semidefinite terms
 * equal to Pinf - A Pinf A^T without its cancellation. */
gmm_status gmm_kernel_disc(const gmm_kernel *k, gmm_kernel_work *w, double dt, double *A,
                           double *Q);

/* Reverse mode: given full-matrix gradients Abar, Qbar (at the dt of the
 * preceding gmm_kernel_disc on w; either NULL) and Pbar (NULL if none),
 * thetabar (nparam) += the chained gradient.  Call gmm_kernel_disc(dt) right
 * before each call with Abar/Qbar.  O(d^3 + nparam d^2). */
gmm_status gmm_kernel_rev(const gmm_kernel *k, gmm_kernel_work *w, const double *Abar,
                          const double *Qbar, const double *Pbar, double *thetabar);

/* True when the observation row depends on time (some damped oscillator
 * factor is demodulated, see DEMODULATION). */
int gmm_kernel_modulated(const gmm_kernel *k);

/* The independent blocks of the composite state, structurally: block[i]
 * (d entries) labels state variable i with its block, 0 .. *nblocks - 1 in
 * order of first appearance, such that F, Pinf, A(dt) and Q(dt) (every
 * regularisation included) are zero between variables of different blocks
 * at every theta and dt.  A leaf's blocks are its type's (gmm_kernel_type
 * .block); a sum stacks its terms' blocks; the blocks of a product X (x) Y
 * are the pairs (block of X, block of Y) -- generally not consecutive
 * variables.  A state-space model orders each block consecutively to
 * narrow the band of its precision (ssm.h).  O(d^2); GMM_ENOMEM. */
gmm_status gmm_kernel_blocks(const gmm_kernel *k, size_t *block, size_t *nblocks);
/* damped (d entries): nonzero for the state variables of terms made of
 * damped zero-noise factors only (ZERO PROCESS NOISE): there, oscillators
 * being demodulated, A = rho I (rho the damping's, not a parameter) and Q
 * = (1 - rho^2) Pinf, so theta enters through Pinf alone.  GMM_EINVAL for
 * NULL, GMM_ENOMEM. */
gmm_status gmm_kernel_var_damped(const gmm_kernel *k, int *damped);

/* The composite's observation row at time offset tau from the reference t0
 * (d), at the theta of the last gmm_kernel_stat on w; equals the H of
 * gmm_kernel_stat when not modulated.  O(d + harmonics). */
gmm_status gmm_kernel_obs(const gmm_kernel *k, gmm_kernel_work *w, double tau, double *H);
/* Reverse mode: thetabar += (dH(tau)/dtheta)^T Hbar.  Needs no preceding
 * call at tau.  O(d nparam). */
gmm_status gmm_kernel_obs_rev(const gmm_kernel *k, gmm_kernel_work *w, double tau,
                              const double *Hbar, double *thetabar);

/* The SDE of the composite with damping rate damp: F and L Qc L^T (d x d
 * each), at theta (a damped zero-noise factor has F - damp I and L Qc L^T =
 * 2 damp Pinf) in the ORIGINAL (not demodulated) coordinates.  Docs and
 * tests (Lyapunov equation, A = expm(F dt)).  Calls
 * gmm_kernel_stat on w; allocates small temporaries. */
gmm_status gmm_kernel_sde(const gmm_kernel *k, const double *theta, double damp,
                          gmm_kernel_work *w, double *F, double *LQL);

#endif
