/* stack_impl.h -- the components of a stacked latent (stack.h) and the
 * object behind it.  Private to src/model/stack/.
 *
 * A component's precision is a sum of constant sparse matrices times
 * coefficients of its parameters, Q_k = sum_g c_g(theta_k) M_g, given as
 * slots (local row slot_row >= local column slot_col, value slot_value,
 * group slot_group); GRAPH and KERNEL components instead assemble their
 * own band (gmrf.h, ssm.h) and copy its slots.
 *
 * ROWS.  Data row r reads component k at local latents row_loc[r] + hidx[e]
 * with coefficient hval[e], e < nread (1 entry of coefficient 1 but for a
 * KERNEL, which reads H's nonzero entries over its value's state, and a
 * CORR, which reads its k effects with the row's own coefficients zrow). */
#ifndef GMM_STACK_IMPL_H
#define GMM_STACK_IMPL_H

#include "gmm/factor.h"
#include "gmm/ssm.h"
#include "gmm/stack.h"

#include "../latent_asm.h"

/* Groups and parameters of a component with groups: at most a CORR's
 * k (k + 1) / 2 each (dc_g/dtheta_p at dc[g * STACK_NPAR + p]). */
#define STACK_NGROUP (GMM_STACK_CORR_MAX * (GMM_STACK_CORR_MAX + 1) / 2)
#define STACK_NPAR STACK_NGROUP

typedef struct {
    gmm_stack_model model;
    char *name;
    size_t n;                /* latents */
    size_t off;              /* first index in the unpermuted stacked vector */
    size_t par0, npar;       /* its parameters in theta */
    char *pname[2];          /* IID .. BYM2: owned parameter names */
    char **gname;            /* GRAPH, KERNEL, CORR: npar owned names */
    double *gstart;          /* CORR: npar starting values */
    double start[2];
    size_t *row_loc;         /* nrows: local latent each data row reads */
    size_t nread;            /* entries each row reads (ROWS) */
    size_t *hidx;
    double *hval;
    double *zrow;            /* CORR: nrows x nread, each row's coefficients */
    /* structure slots (see above): local row >= local column, group and
     * value; joint_row >= joint_col their place in the joint order once it
     * is known; GRAPH, KERNEL: own_row, own_col the slot in the component's
     * own band */
    size_t nslot;
    size_t *slot_row, *slot_col, *slot_group, *joint_row, *joint_col, *own_row, *own_col;
    double *slot_value;
    /* constraints: ncon rows, entries con_start[c] .. con_start[c+1] - 1 at
     * local con_latent with value con_value; pinned local latent
     * con_pin[c]; the constant part of the normaliser 2 log|det AN| - 2
     * log|det N_S| (ldconst) and log det(AA') (ldaa), summed over the
     * component's constraints */
    size_t ncon;
    size_t *con_start, *con_latent, *con_pin;
    double *con_value, ldconst, ldaa;
    /* the null space's basis N, one column per constraint, the same way
     * (null_start, null_latent, null_value); null_is_b[e] nonzero marks
     * BYM2's b entries, which are sqrt(variance phi) times null_value */
    size_t *null_start, *null_latent;
    double *null_value;
    int *null_is_b;
    /* RW1, RW2, KERNEL: the sorted distinct values (m; KERNEL: each
     * state's, values within merge_tol of a group's first merged into it,
     * 0 for the others); cyclic: the period (NAN otherwise) */
    double *val;
    size_t m;
    double merge_tol;
    int cyclic;
    double period;
    /* BESAG, BYM2: per graph node, its component's scaling c, and the
     * marginal variance of the scaled constrained field (1 on an island) */
    double *scale, *mvar;
    /* BESAG: log det of its structure (the scaled Laplacian) pinned as the
     * constraints pin it, from the scaling's factorisation; NAN unknown */
    double ldpin;
    /* GRAPH, KERNEL: the component's own band and its adjoint */
    const gmm_gmrf *g;
    gmm_band *gQ, *gQbar;
    /* KERNEL: the state-space model over the rows' values, the state
     * dimension, level j's first latent (lvl_off, m), a kernel workspace
     * and d x d scratch for new rows */
    const gmm_kernel *kern;
    gmm_ssm *ssm;
    size_t d;
    size_t *lvl_off;
    gmm_kernel_work *kw;
    double *kscr;
    /* KERNEL: a damped zero-noise factor (the stack's square-root form,
     * stack_sqrt.c), and rows h(t) that vary with theta (demodulated) */
    int damped, modulated;
    /* AR1, SEASONAL (stack_ts.c): the value of position 0 (positions are
     * value - pos0), the season length */
    double pos0;
    size_t season;
    /* GROUP, REPLICATE (stack_kron.c): control the group's model
     * (GMM_STACK_NO_MODEL: none), ngroup its positions from group0, nmain
     * the main model's latents (one group's), npar_main its parameters;
     * nrep replicates from rep0 of nrep_one latents each (nrep 0: none) */
    gmm_stack_model control;
    size_t ngroup, nmain, npar_main, nrep, nrep_one;
    double group0, rep0;
} stack_comp;

/* Build component k's structure from its term (everything but joint_row,
 * joint_col and the parameters' place): n, row_loc, slots, constraints,
 * values, scaling.  limit as gmm_latent_stack_alloc.  Errors as there. */
gmm_status stack_comp_build(stack_comp *c, const gmm_stack_term *t, size_t nrows, size_t limit);
/* What every component's build starts with: the name, the rows' room, one
 * read of coefficient 1, the starting values and the checks of the keys
 * common to all models. */
gmm_status stack_comp_common(stack_comp *c, const gmm_stack_term *t, size_t nrows);
void stack_comp_free(stack_comp *c);
/* A GRAPH component's own band and its adjoint (gQ, gQbar) on the band
 * path's first use.  GMM_ENOMEM (over GMM_GMRF_BAND_LIMIT, with the
 * numbers; allocation). */
gmm_status stack_graph_bands(stack_comp *c);
/* (stack_scale.c) BESAG, BYM2: per node of g, the scaling of its connected
 * component into c->scale (1 for an island) and the scaled field's
 * marginal variance into c->mvar, comp the nodes' components (ncomp).
 * route 0: the band when g's RCM band is narrow, else the sparse factor;
 * 1: the sparse factor; -1: the band (tests).  limit: the band's bytes (0:
 * GMM_GMRF_BAND_LIMIT).  GMM_ENOMEM; the factorisations' errors. */
gmm_status stack_besag_scale(stack_comp *c, const gmm_graph *g, const size_t *comp,
                             size_t ncomp, size_t limit, int route);
/* (stack_slots.c) Room in c for cap slots and ncon constraints with nent
 * entries (2 nent for the null space's); the arrays must be unset.
 * GMM_ENOMEM. */
gmm_status stack_comp_arrays(stack_comp *c, size_t cap, size_t ncon, size_t nent);
/* Slot c->nslot++: local (i, j) in either order, value v, group g. */
void stack_comp_slot(stack_comp *c, size_t i, size_t j, double v, size_t g);

/* The constraints A x = 0 of the intrinsic components in the joint
 * numbering (stack_normaliser.c, stack_whiten.c). */
typedef struct {
    double *dense;          /* A: ncon x n, row-major */
    size_t *pinned;         /* ncon: the latent each constraint pins (S) */
    double ld_const;        /* 2 log|det AN| - 2 log|det N_S|, summed */
    double ld_aat;          /* log det(AA'), summed */
    /* A's rows sparse: constraint i's entries a_start[i] .. a_start[i+1] */
    size_t *a_start, *a_latent;
    double *a_value;
    /* the null space's basis N, one column per constraint, the same way;
     * null_is_b marks BYM2's b entries (stack_comp's nb) */
    size_t *null_start, *null_latent;
    double *null_value;
    int *null_is_b;
    size_t *component;      /* ncon: each constraint's component */
    size_t *block_start;    /* nblock + 1: constraints of one component */
    size_t nblock;
} stack_constraints;

/* The whitening's state (stack_whiten.c): the factor of Q^ and its adjoint,
 * work vectors, what the reverse mode reads from the last whiten and
 * whiten_t, and the constraint blocks N_S and AN (k x k, LU per block). */
typedef struct {
    gmm_band *L, *Lbar;
    gmm_factor *sf;         /* the sparse setup's factor of Q^ (stack_sparse.c
                             * owns it); NULL after the band's setup */
    double *scratch, *work, *solve;   /* n each (one allocation, scratch first) */
    double *last_z;         /* n: z of the last whiten */
    double *last_g;         /* n: g of the last whiten_t */
    double *last_u;         /* n: L^^-1 M' g of the last whiten_t */
    double *theta;          /* nparam: the setup's */
    double *NS, *AN;        /* k x k */
    double *beta, *alpha;   /* k each: beta, BYM2's alpha */
    int ready, z_kept, g_kept;
} stack_whitening;

/* The stacked latent's object (built in latent_stack.c). */
typedef struct {
    latent_asm as;          /* first: Q's assembly, normaliser and pins, the
                             * sparse rows (latent_impl.h), the Gaussian
                             * likelihood (latent_asm.h) */
    size_t ncomp, n, bw, nrows, nparam, ncon;
    stack_comp *comp;       /* ncomp */
    size_t *perm, *iperm;   /* n: perm[row] = stacked index */
    stack_constraints con;
    double *prior_theta;    /* nparam: of the last prior call */
    int prior_ok;
    double round_bound;     /* the last Gaussian evaluation's rounding bound (kernels) */
    size_t band_limit;      /* bytes a band of Q may take (stack_band_check) */
    /* the constrained likelihood's Q^ (Q with the pinned rows and columns
     * the identity's) and its adjoint */
    gmm_band *Qpinned, *Qpinned_bar;
    stack_whitening wh;
    /* SQUARE-ROOT FORM (stack_sqrt.c) for stacks with a damped kernel:
     * sqrt_form set; row_reads reads per row; read_entry (nrows x
     * row_reads) the entry of the latent's sparse coefficients
     * (latent_impl.h) that row r's e-th read (in component order) landed
     * in; the form's workspace */
    int sqrt_form;
    size_t row_reads;
    size_t *read_entry;
    struct stack_sq *sqrt_work;
    gmm_latent *latent;     /* the latent this object implements */
    double *mod_rows;       /* nrows x (largest d): rows of a demodulated kernel */
    double *damped_local;   /* 2 x (largest damped kernel's n): its local vectors */
    struct stack_sp *sp;    /* the sparse prior's state (stack_sparse.c), on first use */
} stack_impl;

/* The unpermuted stacked index of data row r's entry e of component q. */
static inline size_t stack_read_at(const stack_comp *q, size_t r, size_t e)
{
    return q->off + q->row_loc[r] + q->hidx[e];
}

/* Its coefficient (constant in theta; a demodulated kernel's aside). */
static inline double stack_read_coef(const stack_comp *q, size_t r, size_t e)
{
    return q->zrow ? q->zrow[r * q->nread + e] : q->hval[e];
}

/* The joint order into c->perm, c->iperm and c->bw: RCM over the
 * components' slots and the data rows' cliques (stack_order.c).
 * GMM_ENOMEM; the graph's errors. */
gmm_status stack_order(stack_impl *c);

/* ASSEMBLY (stack_assemble.c).  Q(theta) of the components (all, or with
 * rest set the components with a damped kernel left out, their latents'
 * rows and columns the identity's), and the reverse: thetabar += sum over
 * stored slots of Qbar dQ/dtheta over the same components. */
gmm_status stack_assemble(stack_impl *c, const double *theta, gmm_band *Q, int rest);
gmm_status stack_assemble_rev(stack_impl *c, const double *theta, const gmm_band *Qbar,
                              double *thetabar, int rest);
/* latent_asm's assemble and assemble_rev (ctx the stack_impl): all
 * components, or the rest of a square-root-form stack's. */
gmm_status stack_asm_assemble(void *ctx, const double *theta, gmm_band *Q);
gmm_status stack_asm_assemble_rest(void *ctx, const double *theta, gmm_band *Q);
gmm_status stack_asm_assemble_rev(void *ctx, const double *theta, const gmm_band *Qbar,
                                  double *thetabar);
gmm_status stack_asm_assemble_rev_rest(void *ctx, const double *theta, const gmm_band *Qbar,
                                       double *thetabar);
/* The vtable's prior and prior_rev (latent.h) of the assembled form. */
gmm_status stack_prior(void *p, const double *theta, gmm_band *Q, double *logdet);
gmm_status stack_prior_rev(void *p, const gmm_band *Qbar, double logdetbar, double *thetabar);

/* SPARSE PRIOR (stack_sparse.c): the vtable's prior_pattern, prior_sparse
 * and prior_rev_sparse (latent.h; p the stack_impl), and its state's free. */
gmm_status stack_prior_pattern(const void *p, gmm_sparse **Q);
gmm_status stack_prior_sparse(void *p, const double *theta, gmm_sparse *Q, double *logdet);
gmm_status stack_prior_rev_sparse(void *p, const gmm_sparse *Qbar, double logdetbar,
                                  double *thetabar);
void stack_sp_free(struct stack_sp *s);
/* Every component an iid, rw1, rw2 or besag term of one variance, without
 * groups: Q = sum_k S_k / variance_k on disjoint blocks (stack_sparse.c);
 * the latent's scale_blocks (latent_impl.h). */
int stack_scale_only(const stack_impl *c);
int stack_scale_blocks(const void *impl, size_t *par);

/* NORMALISER (stack_normaliser.c).  latent_asm's work: the bands of the
 * Gaussian likelihood on first use (GMM_ENOMEM). */
gmm_status stack_band_work(void *ctx);
/* With constraints: Q^ (Q with the pinned latents' rows and columns the
 * identity's) from Q into c->Qpinned, factorised, and log det Q^ + the
 * normaliser's constants into *ld; the reverse, Qbar += ldbar d(log det
 * Q^)/dQ with the pinned rows and columns dropped. */
gmm_status stack_pinned_logdet(stack_impl *c, const gmm_band *Q, double *ld);
gmm_status stack_pinned_logdet_rev(stack_impl *c, double ldbar, gmm_band *Qbar);
/* latent_asm's normaliser and normaliser_rev (latent_asm.h), and the
 * vtable's factorisation (latent.h) of the assembled form. */
gmm_status stack_normaliser(void *p, const double *theta, const double *y, double noise,
                            const gmm_band *Q, double *ld, int *given);
gmm_status stack_normaliser_rev(void *p, double ldbar, gmm_band *Qbar);
const char *stack_factorisation(const void *p, double *bound);

/* WHITENING (stack_whiten.c): the vtable's whitening (latent.h) of the
 * assembled form, and of the square-root form (stack_sq_*). */
gmm_status stack_whiten_setup(void *p, const double *theta);
gmm_status stack_whiten_setup_sparse(void *p, const double *theta);
/* (stack_sparse.c) Q^(theta) on Q's own pattern factored into *f, the sparse
 * prior's whitening factor (kept with its state). */
gmm_status stack_sp_whiten_factor(stack_impl *c, const double *theta, gmm_factor **f);
gmm_status stack_whiten(void *p, const double *v, double *x);
gmm_status stack_whiten_t(void *p, const double *g, double *u);
gmm_status stack_unwhiten(void *p, const double *x, double *v);
gmm_status stack_whiten_rev(void *p, const double *v, const double *xbar, double *thetabar);
gmm_status stack_sq_whiten_setup(void *p, const double *theta);
gmm_status stack_sq_whiten(void *p, const double *v, double *x);
gmm_status stack_sq_whiten_t(void *p, const double *g, double *u);
gmm_status stack_sq_unwhiten(void *p, const double *x, double *v);
gmm_status stack_sq_whiten_rev(void *p, const double *v, const double *xbar, double *thetabar);

/* SQUARE-ROOT FORM (stack_sqrt.c; the wls* and prior rows in
 * stack_sqrt_wls.c): the vtable's operations (latent.h's
 * contracts, impl the stack_impl) for a stack with a damped kernel, and
 * the workspace's free.  It calls the assembly above, never the object's
 * file (latent_stack.c), which holds the vtable. */
gmm_status stack_sq_prior(void *impl, const double *theta, gmm_band *Q, double *logdet);
gmm_status stack_sq_prior_rev(void *impl, const gmm_band *Qbar, double logdetbar,
                              double *thetabar);
const char *stack_sq_factorisation(const void *impl, double *bound);
gmm_status stack_sq_gaussian(void *impl, const double *theta, const double *y, double noise,
                             double *loglik, double *thetabar, double *noisebar);
gmm_status stack_sq_posterior(void *impl, double *mean, gmm_band *cov);
gmm_status stack_sq_posterior_solve(void *impl, double *v);
gmm_status stack_sq_wls_rows(void *impl, const double *theta, double obs_prec, int *rows);
gmm_status stack_sq_wls(void *impl, const double *theta, const double *y, const double *wt,
                        int record, double *loglik, double *mean);
gmm_status stack_sq_wls_quad(void *impl, const double *x, double *q);
gmm_status stack_sq_wls_var(void *impl, double *fvar);
gmm_status stack_sq_wls_adjoint(void *impl, const double *rw, double *u, double *thetabar);
gmm_status stack_sq_wls_rowcov(void *impl, double *zeta, double *sh);
gmm_status stack_sq_prior_rows(void *impl, const double *theta, gmm_prior_rows *G,
                               double *logdet);
gmm_status stack_sq_rows_rev_q(void *impl, const gmm_band *S, const double *m,
                               const gmm_band *D, double *thetabar);
void stack_sq_free(struct stack_sq *s);

/* (stack_normaliser.c) GMM_OK when a band of Q (n (bw + 1) doubles) fits
 * c->band_limit, else GMM_ENOMEM with the bytes: the band path's check
 * (latent_impl.h band_check; p the stack_impl). */
gmm_status stack_band_check(const void *p);

/* The stacked latent's object behind l, or NULL when l is not a stack
 * (latent_stack.c). */
stack_impl *stack_impl_of(const gmm_latent *l);

/* (stack_slots.c) The first index i in [0, m) with val[i] >= t (m when none); val sorted
 * ascending. */
size_t stack_lower_bound(const double *val, size_t m, double t);

/* t reduced onto [t0, t0 + period) (period > 0). */
double stack_wrap(double t0, double period, double t);

/* Integer index values as positions: pos[r] = value[r] - min (*vmin),
 * *npos = max - min + 1; a value not an integer is GMM_EINVAL naming its
 * row and `what` (stack_ts.c). */
gmm_status stack_positions(const char *name, const char *what, const double *value,
                           size_t nrows, size_t *pos, double *vmin, size_t *npos);
/* AR1 and SEASONAL components (stack_ts.c): slots, constraints, values
 * (n, row_loc, pos0, season); and their coefficients as stack_comp_coef. */
gmm_status stack_ts_build(stack_comp *c, const gmm_stack_term *t, size_t nrows);
gmm_status stack_ts_coef(const stack_comp *c, const double *theta, double *cg, double *dc);
/* A new row's reading of AR1 / SEASONAL value t: entries (local index,
 * weight) appended at li, lw (*ne), the variance of its eps added to
 * *evar; theta the component's.  GMM_EINVAL (not an integer, SEASONAL
 * outside its positions). */
gmm_status stack_ts_row(const stack_comp *q, const double *theta, double t, size_t *li,
                        double *lw, size_t *ne, double *evar);
/* The same for a grouped or replicated component, at.level / at.value the
 * main model's (a data level or value), at group and replicate values. */
gmm_status stack_kron_row(const stack_comp *q, const double *theta, const gmm_stack_at *at,
                          double group, double replicate, size_t *li, double *lw, size_t *ne,
                          double *evar);
/* AR1's coefficients of its three groups (I, the interior diagonal, the
 * off-diagonal) at marginal variance v and rho, with their derivatives
 * (dv, drho: 3 each) (stack_ts.c). */
void stack_ar1_coef(double v, double rho, double *cg, double *dv, double *drho);
/* GROUP, REPLICATE (stack_kron.c): the built component c turned into its
 * Kronecker product with the term's group structure, then its replicates;
 * a grouped component's coefficients from its main model's (cg, dc in and
 * out: times the group structure's). */
gmm_status stack_kron_build(stack_comp *c, const gmm_stack_term *t, size_t nrows);
gmm_status stack_kron_coef(const stack_comp *c, const double *theta, double *cg, double *dc);

/* c_g(theta) for the component's groups (STACK_NGROUP) and dc_g/dtheta_p
 * (dc[g * STACK_NPAR + p]); GMM_EDOM for phi outside (0, 1), a CORR's
 * parameters outside their domains. */
gmm_status stack_comp_coef(const stack_comp *c, const double *theta, double *cg, double *dc);

/* CORR (stack_corr.c): the component's structure from its term (levels,
 * rows, slots, names, starts; in place of stack_comp_build), and its
 * coefficients as stack_comp_coef's (which does not know CORR):
 * c_g the entries of Sigma^-1 (group a (a + 1) / 2 + b for a >= b). */
gmm_status stack_corr_build(stack_comp *c, const gmm_stack_term *t, size_t nrows);
gmm_status stack_corr_coef(const stack_comp *c, const double *theta, double *cg, double *dc);
/* Sigma (k x k, row-major) at the component's theta (in its domain). */
void stack_corr_sigma(const stack_comp *c, const double *theta, double *Sigma);

#endif
