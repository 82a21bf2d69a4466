/* latent.c -- the family-independent part of latent.h: accessors, checks,
 * prediction at data rows, dispatch to the family's methods.
 *
 * TERMS.
 *   n        latent dimension (graph: one per node in RCM order; state-space:
 *            the K d stacked states; stack: the components' latents, stack.h)
 *   kl       lower bandwidth of Q
 *   nrows    data rows; row r reads width latents from offset[r] with
 *            coefficients h_r (graph: width 1, h = 1; state-space: width d,
 *            h_r = H, or h(t_r) for demodulated kernels, varying with theta)
 *   theta    nparam named parameters, each > 0 (or >= 0 where zero_ok;
 *            in (0, 1) or (-1, 1) where its domain says so)
 *
 * gmm_latent_prior leaves state in the object that gmm_latent_prior_rev
 * reads, hence the pair with no other call on the object in between.
 *
 * INTRINSIC PRIORS (random walks, Besag: stack.h) have a rank-deficient Q
 * and gmm_latent_nconstr > 0 linear constraints A x = 0 on which the prior
 * is proper; the exact Gaussian likelihood, the Laplace approximation,
 * the whitening (x = W v lies on the subspace) and VI (q conditioned on
 * them, vi_elbo.c, CONSTRAINTS) condition on them.
 *
 * SQUARE-ROOT ROWS (gmm_latent_prior_rows).  Variational inference takes
 * the rows of G, Q = G'G, instead of the assembled Q to keep its digits
 * when inputs are close relative to a lengthscale (Q's entries then dwarf
 * the information they carry; the rows never form Q).  State-space models:
 * the transition rows C0 x_0, C_k (x_{k+1} - A_k x_k) (gmm_ssm_prior_rows:
 * G is the inverse of the whitening map, exact at any spacing, no GMM_EDOM
 * for close inputs).  Graphs have no natural square root: their callers
 * factorise gmm_latent_prior's Q instead.  The moments' reverse
 * (gmm_latent_prior_rows_rev_moments) exists because the moments are of
 * order 1 where G's entries grow like (l/dt)^(nu + 1/2): a gradient chained
 * through them keeps its digits at close inputs, one chained through Gbar
 * does not.  The reverse from q's moments (gmm_latent_prior_rows_rev_q)
 * goes further for a stack in the square-root form: where Q's entries
 * dwarf q's information, E_q[x'Qx] on a block whose precision scales with
 * one parameter is taken from tr(Q S) = n + tr(D S) there, never from Q's
 * entries.
 *
 * WHITENING.  Graphs: W = L_Q^-T, L_Q L_Q' = Q (the setup factorises Q,
 * one banded solve per whiten); state-space: the innovations form x_0 =
 * chol(Pinf) v_0, x_{k+1} = A_k x_k + chol(Q_k) v_{k+1}, exact at any
 * spacing (gmm_ssm_whiten; the setup factorises the d x d blocks); stacks:
 * stack_whiten.c.  gmm_latent_whiten_rev with v or xbar NULL reuses the
 * last whiten's or whiten_t's work rather than repeating it: graphs the
 * triangular solves for x and for W' xbar, the latter's sums in another
 * order than the reverse's own solve, so equal to rounding; state-space
 * the forward recursion and the adjoint's, to the bit.  Its cost: graphs
 * the Cholesky's reverse mode, state-space the kernel's reverse mode per
 * interval group. */
#include "latent_impl.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"

static gmm_latent *latent_alloc(const gmm_latent_ops *ops, size_t nrows, size_t width,
                                size_t nnz, int sparse, size_t nparam)
{
    gmm_latent *l = gmm_calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->ops = ops;
    l->nrows = nrows;
    l->width = width;
    l->nnz = nnz;
    l->nparam = nparam;
    if (sparse) {
        l->rowptr = gmm_calloc(nrows + 1, sizeof *l->rowptr);
        l->pos = gmm_calloc(nnz ? nnz : 1, sizeof *l->pos);
        if (!l->rowptr || !l->pos) {
            gmm_latent_free(l);
            return NULL;
        }
    }
    l->offset = gmm_calloc(nrows ? nrows : 1, sizeof *l->offset);
    l->coef = gmm_calloc(nnz ? nnz : 1, sizeof *l->coef);
    l->name = gmm_calloc(nparam ? nparam : 1, sizeof *l->name);
    l->start = gmm_calloc(nparam ? nparam : 1, sizeof *l->start);
    l->zero_ok = gmm_calloc(nparam ? nparam : 1, sizeof *l->zero_ok);
    l->domain = gmm_calloc(nparam ? nparam : 1, sizeof *l->domain);
    if (!l->offset || !l->coef || !l->name || !l->start || !l->zero_ok || !l->domain) {
        gmm_latent_free(l);
        return NULL;
    }
    return l;
}

gmm_latent *latent_new(const gmm_latent_ops *ops, size_t nrows, size_t width, size_t nparam)
{
    return latent_alloc(ops, nrows, width, nrows * width, 0, nparam);
}

gmm_latent *latent_new_sparse(const gmm_latent_ops *ops, size_t nrows, size_t width,
                              size_t nnz, size_t nparam)
{
    return latent_alloc(ops, nrows, width, nnz, 1, nparam);
}

void gmm_latent_free(gmm_latent *l)
{
    if (!l)
        return;
    if (l->ops && l->ops->free)
        l->ops->free(l->impl);
    gmm_free(l->offset);
    gmm_free(l->rowptr);
    gmm_free(l->pos);
    gmm_free(l->coef);
    gmm_free((void *)l->name);
    gmm_free(l->start);
    gmm_free(l->zero_ok);
    gmm_free(l->domain);
    gmm_free(l->node_row);
    gmm_free(l);
}

const char *gmm_latent_family(const gmm_latent *l) { return l->ops->family; }
gmm_ssm *gmm_latent_ssm(const gmm_latent *l)
{
    return l->ops->predict_at ? (gmm_ssm *)l->impl : NULL; /* only state-space has inputs */
}
size_t gmm_latent_dim(const gmm_latent *l) { return l->n; }
size_t gmm_latent_bandwidth(const gmm_latent *l) { return l->kl; }
size_t gmm_latent_cov_bandwidth(const gmm_latent *l) { return l->cov_kl; }
size_t gmm_latent_nrows(const gmm_latent *l) { return l->nrows; }
size_t gmm_latent_nconstr(const gmm_latent *l) { return l->nconstr; }
const double *gmm_latent_constraints(const gmm_latent *l) { return l->constr; }
const size_t *gmm_latent_constraint_pins(const gmm_latent *l) { return l->pin; }
size_t gmm_latent_nparam(const gmm_latent *l) { return l->nparam; }
const char *gmm_latent_param_name(const gmm_latent *l, size_t i)
{
    return i < l->nparam ? l->name[i] : NULL;
}
const double *gmm_latent_param_start(const gmm_latent *l) { return l->start; }
int gmm_latent_param_zero_ok(const gmm_latent *l, size_t i) { return l->zero_ok[i]; }
gmm_param_domain gmm_latent_param_domain(const gmm_latent *l, size_t i) { return l->domain[i]; }
size_t gmm_latent_obs_width(const gmm_latent *l) { return l->width; }
const size_t *gmm_latent_obs_offset(const gmm_latent *l) { return l->offset; }
int gmm_latent_obs_varies(const gmm_latent *l) { return l->varies; }
gmm_obsmap gmm_latent_obs_map(const gmm_latent *l)
{
    return (gmm_obsmap){.nrows = l->nrows, .width = l->width, .offset = l->offset,
                        .rowptr = l->rowptr, .pos = l->pos, .coef = l->coef};
}
int gmm_latent_has_inputs(const gmm_latent *l) { return l->ops->predict_at != NULL; }

size_t gmm_latent_node_index(const gmm_latent *l, size_t v)
{
    return l->node_row && v < l->n ? l->node_row[v] : GMM_NO_INDEX;
}

gmm_status gmm_latent_theta_check(const gmm_latent *l, const double *theta)
{
    for (size_t i = 0; i < l->nparam; i++) {
        double t = theta[i];
        if (l->domain[i] == GMM_PARAM_SIGNED) {
            if (!(t > -1.0 && t < 1.0))
                return gmm_error_at(GMM_EDOM, i, "%s = %g must be in (-1, 1)", l->name[i], t);
            continue;
        }
        if (!isfinite(t) || t < 0.0 || (t == 0.0 && !l->zero_ok[i]))
            return gmm_error_at(GMM_EDOM, i, "%s = %g must be %s and finite", l->name[i], t,
                                l->zero_ok[i] ? "non-negative" : "positive");
        if (l->domain[i] == GMM_PARAM_UNIT && !(t < 1.0))
            return gmm_error_at(GMM_EDOM, i, "%s = %g must be in (0, 1)", l->name[i], t);
    }
    return GMM_OK;
}

gmm_status gmm_latent_obs_coef(gmm_latent *l, const double *theta, double *coef)
{
    if (!coef || !theta)
        return gmm_error(GMM_EINVAL, "gmm_latent_obs_coef: NULL argument");
    if (l->rowptr) {
        size_t w = l->width;
        gmm_status st;
        if (l->varies && (st = l->ops->obs_coef(l->impl, theta, l->coef)))
            return st;
        gmm_obsmap m = gmm_latent_obs_map(l);
        for (size_t r = 0; r < l->nrows; r++)
            gmm_obsmap_row_window(&m, r, coef + r * w);
        return GMM_OK;
    }
    return gmm_latent_obs_values(l, theta, coef);
}

gmm_status gmm_latent_obs_values(gmm_latent *l, const double *theta, double *val)
{
    if (!val || !theta)
        return gmm_error(GMM_EINVAL, "gmm_latent_obs_values: NULL argument");
    if (l->varies) {
        gmm_status st = l->ops->obs_coef(l->impl, theta, l->coef);
        if (st)
            return st;
    }
    memcpy(val, l->coef, l->nnz * sizeof *val);
    return GMM_OK;
}

gmm_status gmm_latent_obs_coef_rev(gmm_latent *l, const double *theta, const double *coefbar,
                                   double *thetabar)
{
    if (!l->varies)
        return GMM_OK;
    return l->ops->obs_coef_rev(l->impl, theta, coefbar, thetabar);
}

gmm_status gmm_latent_prior(gmm_latent *l, const double *theta, gmm_band *Q, double *logdet)
{
    if (!l || !theta || !Q)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior: NULL argument");
    if (Q->n != l->n || Q->kl != l->kl || Q->kind != GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "gmm_latent_prior: Q must be SYMMETRIC %zu x %zu with "
                                   "bandwidth %zu",
                         l->n, l->n, l->kl);
    gmm_status st = gmm_latent_theta_check(l, theta);
    double ld = NAN;
    if (st == GMM_OK)
        st = l->ops->prior(l->impl, theta, Q, &ld);
    l->logdet_known = st == GMM_OK && !isnan(ld);
    if (logdet)
        *logdet = ld;
    return st;
}

gmm_status gmm_latent_prior_rev(gmm_latent *l, const gmm_band *Qbar, double logdetbar,
                                double *thetabar)
{
    if (!l || !Qbar || !thetabar)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rev: NULL argument");
    if (logdetbar != 0.0 && !l->logdet_known)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rev: the %s family gave no log|Q|",
                         l->ops->family);
    return l->ops->prior_rev(l->impl, Qbar, logdetbar, thetabar);
}

gmm_status gmm_latent_band_check(const gmm_latent *l)
{
    if (!l)
        return gmm_error(GMM_EINVAL, "gmm_latent_band_check: NULL argument");
    return l->ops->band_check ? l->ops->band_check(l->impl) : GMM_OK;
}

static gmm_status no_sparse(const gmm_latent *l)
{
    return gmm_error(GMM_EINVAL, "the %s family has no sparse prior (its precision is "
                                 "assembled in band storage only)",
                     l->ops->family);
}

gmm_status gmm_latent_prior_pattern(const gmm_latent *l, gmm_sparse **Q)
{
    if (!l || !Q)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_pattern: NULL argument");
    *Q = NULL;
    return l->ops->prior_pattern ? l->ops->prior_pattern(l->impl, Q) : no_sparse(l);
}

gmm_status gmm_latent_prior_sparse(gmm_latent *l, const double *theta, gmm_sparse *Q,
                                   double *logdet)
{
    if (!l || !theta || !Q)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_sparse: NULL argument");
    l->logdet_known = 0;
    if (!l->ops->prior_sparse)
        return no_sparse(l);
    if (Q->n != l->n)
        return gmm_error(GMM_EDIM, "gmm_latent_prior_sparse: Q must be %zu x %zu, not %zu x %zu",
                         l->n, l->n, Q->n, Q->n);
    gmm_status st = gmm_latent_theta_check(l, theta);
    double ld = NAN;
    if (st == GMM_OK)
        st = l->ops->prior_sparse(l->impl, theta, Q, &ld);
    l->logdet_known = st == GMM_OK && !isnan(ld);
    if (logdet)
        *logdet = ld;
    return st;
}

gmm_status gmm_latent_prior_rev_sparse(gmm_latent *l, const gmm_sparse *Qbar, double logdetbar,
                                       double *thetabar)
{
    if (!l || !Qbar || !thetabar)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rev_sparse: NULL argument");
    if (!l->ops->prior_rev_sparse)
        return no_sparse(l);
    if (Qbar->n != l->n)
        return gmm_error(GMM_EDIM, "gmm_latent_prior_rev_sparse: Qbar must be %zu x %zu, not "
                                   "%zu x %zu",
                         l->n, l->n, Qbar->n, Qbar->n);
    if (logdetbar != 0.0 && !l->logdet_known)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rev_sparse: the %s family gave no "
                                     "log|Q|",
                         l->ops->family);
    return l->ops->prior_rev_sparse(l->impl, Qbar, logdetbar, thetabar);
}

gmm_status gmm_latent_gaussian(gmm_latent *l, const double *theta, const double *y, double noise,
                               double *loglik, double *thetabar, double *noisebar)
{
    if (!l || !theta || !y || !loglik)
        return gmm_error(GMM_EINVAL, "gmm_latent_gaussian: NULL argument");
    gmm_status st = gmm_latent_theta_check(l, theta);
    if (st)
        return st;
    return l->ops->gaussian(l->impl, theta, y, noise, loglik, thetabar, noisebar);
}

gmm_status gmm_latent_gaussian_posterior_solve(gmm_latent *l, double *v)
{
    if (!l || !v)
        return gmm_error(GMM_EINVAL, "gmm_latent_gaussian_posterior_solve: NULL argument");
    if (!l->ops->gaussian_posterior_solve)
        return gmm_error(GMM_EINVAL, "a %s latent keeps no factor of its Gaussian posterior",
                         l->ops->family);
    return l->ops->gaussian_posterior_solve(l->impl, v);
}

gmm_status gmm_latent_forms_moments(size_t n, const double *mean, const gmm_band *cov,
                                    gmm_cov_solve_fn solve, void *ctx, size_t nq,
                                    const size_t *ptr, const size_t *idx, const double *w,
                                    double *work, double *fmean, double *fvar)
{
    gmm_status st;
    if (!mean || !cov || !solve || !ptr || (ptr[nq] && (!idx || !w)) || !work || !fmean ||
        !fvar)
        return gmm_error(GMM_EINVAL, "gmm_latent_forms_moments: NULL argument");
    if (cov->n != n || cov->kind != GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "gmm_latent_forms_moments: cov must be SYMMETRIC %zu x %zu",
                         n, n);
    memset(work, 0, n * sizeof *work);
    for (size_t q = 0; q < nq; q++) {
        size_t lo = SIZE_MAX, hi = 0;
        double m = 0.0, v = 0.0;
        for (size_t e = ptr[q]; e < ptr[q + 1]; e++) {
            if (idx[e] >= n)
                return gmm_error_at(GMM_EINVAL, q, "form %zu reads latent %zu of %zu", q,
                                    idx[e], n);
            m += w[e] * mean[idx[e]];
            lo = idx[e] < lo ? idx[e] : lo;
            hi = idx[e] > hi ? idx[e] : hi;
        }
        if (ptr[q] == ptr[q + 1] || hi - lo <= cov->kl) {
            for (size_t a = ptr[q]; a < ptr[q + 1]; a++)
                for (size_t b = ptr[q]; b < ptr[q + 1]; b++)
                    v += w[a] * w[b] * gmm_band_get(cov, idx[a], idx[b]);
        } else {
            /* a pair outside the band: a'(Sigma a), one solve */
            for (size_t e = ptr[q]; e < ptr[q + 1]; e++)
                work[idx[e]] += w[e];
            if ((st = solve(ctx, work)))
                return st;
            for (size_t e = ptr[q]; e < ptr[q + 1]; e++)
                v += w[e] * work[idx[e]];
            memset(work, 0, n * sizeof *work);
        }
        fmean[q] = m;
        fvar[q] = v;
    }
    return GMM_OK;
}

gmm_status gmm_latent_gaussian_posterior(gmm_latent *l, double *mean, gmm_band *cov)
{
    return l->ops->gaussian_posterior(l->impl, mean, cov);
}

const char *gmm_latent_factorisation(const gmm_latent *l, double *bound)
{
    if (bound)
        *bound = 0.0;
    return l->ops->factorisation ? l->ops->factorisation(l->impl, bound) : "cholesky";
}

gmm_status gmm_latent_wls_rows(gmm_latent *l, const double *theta, double obs_prec, int *rows)
{
    if (!l || !theta || !rows)
        return gmm_error(GMM_EINVAL, "gmm_latent_wls_rows: NULL argument");
    *rows = 0;
    if (!l->ops->wls_rows)
        return GMM_OK;
    gmm_status st = gmm_latent_theta_check(l, theta);
    return st ? st : l->ops->wls_rows(l->impl, theta, obs_prec, rows);
}

static gmm_status no_wls(const gmm_latent *l)
{
    return gmm_error(GMM_EINVAL, "a %s latent has no square-root smoother", l->ops->family);
}

gmm_status gmm_latent_wls(gmm_latent *l, const double *theta, const double *y, const double *wt,
                          int record, double *loglik, double *mean)
{
    if (!l || !y || !wt || !loglik)
        return gmm_error(GMM_EINVAL, "gmm_latent_wls: NULL argument");
    if (!l->ops->wls)
        return no_wls(l);
    gmm_status st = theta ? gmm_latent_theta_check(l, theta) : GMM_OK;
    return st ? st : l->ops->wls(l->impl, theta, y, wt, record, loglik, mean);
}

gmm_status gmm_latent_wls_quad(gmm_latent *l, const double *x, double *q)
{
    return l->ops->wls_quad ? l->ops->wls_quad(l->impl, x, q) : no_wls(l);
}

gmm_status gmm_latent_wls_var(gmm_latent *l, double *fvar)
{
    return l->ops->wls_var ? l->ops->wls_var(l->impl, fvar) : no_wls(l);
}

gmm_status gmm_latent_wls_adjoint(gmm_latent *l, const double *rw, double *u, double *thetabar)
{
    return l->ops->wls_adjoint ? l->ops->wls_adjoint(l->impl, rw, u, thetabar) : no_wls(l);
}

int gmm_latent_has_wls(const gmm_latent *l) { return l->ops->wls != NULL; }

int gmm_latent_has_rows_rev_q(const gmm_latent *l) { return l->ops->prior_rows_rev_q != NULL; }

double gmm_latent_prior_rows_pins(const gmm_latent *l) { return l->rows_tau; }

gmm_status gmm_latent_prior_rows_rev_q(gmm_latent *l, const gmm_band *S, const double *m,
                                       const gmm_band *D, double *thetabar)
{
    if (!l || !S || !m || !D || !thetabar)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rows_rev_q: NULL argument");
    if (!l->ops->prior_rows_rev_q)
        return gmm_error(GMM_EINVAL, "the %s family takes the rows' moments instead "
                                     "(gmm_latent_prior_rows_rev_moments)",
                         l->ops->family);
    return l->ops->prior_rows_rev_q(l->impl, S, m, D, thetabar);
}

int gmm_latent_assembled(const gmm_latent *l) { return !l->sqrt_only; }

gmm_status gmm_latent_wls_rowcov(gmm_latent *l, double *zeta, double *sh)
{
    return l->ops->wls_rowcov ? l->ops->wls_rowcov(l->impl, zeta, sh) : no_wls(l);
}

gmm_status gmm_latent_predict_rows(gmm_latent *l, const double *theta, const double *mean,
                                   const gmm_band *cov, double *fmean, double *fvar)
{
    gmm_status st;
    if (!l || !theta || !mean || !cov || !fmean || !fvar)
        return gmm_error(GMM_EINVAL, "gmm_latent_predict_rows: NULL argument");
    if (cov->n != l->n || cov->kl + 1 < l->width || cov->kind != GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "gmm_latent_predict_rows: cov must be SYMMETRIC %zu x %zu "
                                   "with bandwidth >= %zu",
                         l->n, l->n, l->width - 1);
    if (l->varies) {
        /* the coefficients at theta need the family's state at theta */
        if ((st = l->ops->obs_coef(l->impl, theta, l->coef)))
            return st;
    }
    gmm_obsmap map = gmm_latent_obs_map(l);
    for (size_t r = 0; r < l->nrows; r++) {
        size_t lo = gmm_obsmap_row_lo(&map, r), hi = gmm_obsmap_row_hi(&map, r);
        const double *h = l->coef + lo;
        size_t o = l->offset[r];
        double m = 0.0, v = 0.0;
        for (size_t a = 0; a < hi - lo; a++) {
            if (h[a] == 0.0)
                continue;
            size_t ia = o + gmm_obsmap_row_pos(&map, lo + a, lo);
            m += h[a] * mean[ia];
            for (size_t b = 0; b < hi - lo; b++) {
                size_t ib = o + gmm_obsmap_row_pos(&map, lo + b, lo);
                v += h[a] * h[b] * gmm_band_get(cov, ia, ib);
            }
        }
        fmean[r] = m;
        fvar[r] = v;
    }
    return GMM_OK;
}

gmm_status gmm_latent_predict_at(gmm_latent *l, const double *theta, const double *mean,
                                 const gmm_band *cov, const double *xq, size_t nq, double *fmean,
                                 double *fvar)
{
    if (!l->ops->predict_at)
        return gmm_error(GMM_EINVAL, "a %s model predicts at its nodes, not at new inputs",
                         l->ops->family);
    return l->ops->predict_at(l->impl, theta, mean, cov, xq, nq, fmean, fvar);
}

static gmm_status no_whiten(const gmm_latent *l)
{
    return gmm_error(GMM_EINVAL, "whitening is not available for the %s family",
                     l->ops->family);
}

gmm_status gmm_latent_whiten_setup(gmm_latent *l, const double *theta)
{
    if (!l || !theta)
        return gmm_error(GMM_EINVAL, "gmm_latent_whiten_setup: NULL argument");
    if (!l->ops->whiten_setup)
        return no_whiten(l);
    gmm_status st = gmm_latent_theta_check(l, theta);
    return st ? st : l->ops->whiten_setup(l->impl, theta);
}

gmm_status gmm_latent_whiten_setup_sparse(gmm_latent *l, const double *theta)
{
    if (!l || !theta)
        return gmm_error(GMM_EINVAL, "gmm_latent_whiten_setup_sparse: NULL argument");
    if (!l->ops->whiten_setup_sparse)
        return gmm_error(GMM_EINVAL, "the %s latent has no whitening from a sparse "
                                     "factorisation of its prior",
                         l->ops->family);
    gmm_status st = gmm_latent_theta_check(l, theta);
    return st ? st : l->ops->whiten_setup_sparse(l->impl, theta);
}

int gmm_latent_scale_blocks(const gmm_latent *l, size_t *par)
{
    return l && l->ops->scale_blocks && l->ops->scale_blocks(l->impl, par);
}

gmm_status gmm_latent_whiten(gmm_latent *l, const double *v, double *x)
{
    return l->ops->whiten ? l->ops->whiten(l->impl, v, x) : no_whiten(l);
}

gmm_status gmm_latent_unwhiten(gmm_latent *l, const double *x, double *v)
{
    return l->ops->unwhiten ? l->ops->unwhiten(l->impl, x, v) : no_whiten(l);
}

gmm_status gmm_latent_whiten_t(gmm_latent *l, const double *g, double *u)
{
    return l->ops->whiten_t ? l->ops->whiten_t(l->impl, g, u) : no_whiten(l);
}

gmm_status gmm_latent_whiten_rev(gmm_latent *l, const double *v, const double *xbar,
                                 double *thetabar)
{
    return l->ops->whiten_rev ? l->ops->whiten_rev(l->impl, v, xbar, thetabar) : no_whiten(l);
}

size_t gmm_latent_prior_nrows(const gmm_latent *l) { return l->prior_nrows; }
size_t gmm_latent_prior_segment(const gmm_latent *l) { return l->prior_seg; }

static gmm_status no_rows(const gmm_latent *l)
{
    return gmm_error(GMM_EINVAL, "the %s family has no natural square root of its prior "
                                 "precision (factorise Q from gmm_latent_prior instead)",
                     l->ops->family);
}

gmm_status gmm_latent_prior_rows(gmm_latent *l, const double *theta, gmm_prior_rows *G,
                                 double *logdet)
{
    if (!l || !theta || !G)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rows: NULL argument");
    if (!l->ops->prior_rows)
        return no_rows(l);
    gmm_status st = gmm_latent_theta_check(l, theta);
    if (st == GMM_OK)
        st = l->ops->prior_rows(l->impl, theta, G, logdet);
    l->rows_ok = st == GMM_OK;
    return st;
}

gmm_status gmm_latent_prior_rows_rev(gmm_latent *l, const double *Gbar, double logdetbar,
                                     double *thetabar)
{
    if (!l || !Gbar || !thetabar)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rows_rev: NULL argument");
    if (!l->ops->prior_rows_rev)
        return no_rows(l);
    if (!l->rows_ok)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rows_rev: the last "
                                     "gmm_latent_prior_rows did not succeed (or none ran)");
    return l->ops->prior_rows_rev(l->impl, Gbar, logdetbar, thetabar);
}

gmm_status gmm_latent_prior_rows_rev_moments(gmm_latent *l, const double *Svv,
                                             const double *Svx, double *thetabar)
{
    if (!l || !Svv || !Svx || !thetabar)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rows_rev_moments: NULL argument");
    if (!l->ops->prior_rows_rev_moments)
        return no_rows(l);
    if (!l->rows_ok)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rows_rev_moments: the last "
                                     "gmm_latent_prior_rows did not succeed (or none ran)");
    return l->ops->prior_rows_rev_moments(l->impl, Svv, Svx, thetabar);
}
