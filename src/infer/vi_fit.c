/* vi_fit.c -- the preconditioned L-BFGS driver of gmm_vi_fit (vi.h).
 *
 * SCALING.  gmm_vi_fit runs L-BFGS on u, lambda = lambda0 + T u, T from the
 * run's starting q (precond_set): m = m0 + L0^-T a and each column of L
 * moved by R_j^-T w_j, R_j R_j' the column's block of the Hessian of the
 * Gaussian ELBO at L0 (Sigma0 on the column's rows).  In u that Hessian is
 * the identity at the Gaussian optimum, whatever the conditioning of Q_p; a
 * diagonal scaling (dm_j by 1 / L_jj, L_ij by L_ii) leaves smooth
 * state-space posteriors ill-conditioned, the ELBO creeping for thousands
 * of iterations.  A new run with a new T starts when some L_jj has moved
 * by more than a factor 1.5 (learning the hyperparameters moves q far from
 * the start of the run).
 *
 * STOPPING.  In u the Hessian of the Gaussian ELBO is the identity at the
 * run's start, so a unit step is about a posterior standard deviation of q
 * and |g|^2 / 2 is the Newton decrement: the rise of the ELBO a Newton
 * step would still give.  Converged means that, at the returned point,
 * the decrement is at most VI_GAIN (1e-8 nats; q alone, without
 * hyperparameters), or the gradient test |g|
 * <= epsilon max(1, |u|) holds, or |g| is within GNOISE_GAIN times the
 * norm of the gradient's measured rounding noise.  Tests that read the
 * ELBO itself (its relative rise over 3 iterations below tol, or a line
 * search that sees no decrease) stop where the ELBO's changes sink below
 * its rounding, long before q and theta stop moving along flat directions
 * (a graph's lengthscale): such a stop only ends the first phase.  A final
 * run, with T taken at that point, continues without the decrease test and
 * with its gradient test POLISH_TIGHTER below epsilon, for at most as many
 * iterations as came before it (FINAL_MIN_ITER at least), so that the
 * result does not depend on where a test first held (which varies with
 * the BLAS kernel's rounding); when it stops on f or on its budget,
 * infer_lbfgs_polish goes on from its end by the gradient alone, until the
 * gradient's own rounding ends it.  Not converged is reported with the
 * gradient norm that was left.
 *
 * RULES.  With nquad = 0 each row's Gauss-Hermite rule follows its variance
 * (vi_elbo.c, EXPECTATIONS).  The fit chooses the rules at the starting
 * point and again at each accepted iterate, and keeps them through a line
 * search, so that the objective the line search sees is smooth.
 */
#include "gmm/vi.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/constr.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"

#include <lbfgs.h> /* the return codes */
#include "vi_impl.h"

/* ---- L-BFGS ---------------------------------------------------------------------------- */

/* One run over u = (lambda, free hyperparameters on their optimisation
 * scale); minimises -ELBO.  Trial points where the ELBO is not defined are
 * answered as fit.c does (fit.h, DOMAIN FAILURES). */
typedef struct {
    gmm_vi *v;
    size_t nvar, nfree, nu;
    size_t *idx;          /* free hyperparameter k is theta[idx[k]] */
    const gmm_objective *obj; /* the problem's: names and scales */
    double *th, *thbar;   /* trial theta, its gradient */
    infer_scale sc;       /* the hyperparameters' optimisation scale */
    infer_lbfgs lb;       /* the run, its anchor (the last accepted iterate) */
    double *ulast;        /* the last evaluated point (adaptive rules) */
    double *lam;          /* lambda at the trial point (nvar) */
    double *lam0;         /* lambda at the run's start (nvar): lambda = lam0 + T u */
    double *tu;           /* nvar doubles of workspace */
    gmm_band *L0, *S0;    /* the start's L and the band b of its inverse */
    double *R;            /* per column of L: the lower Cholesky factor of
                           * its metric block, nb x nb each (nb = b + 1), or
                           * with full = 0 the square roots of the blocks'
                           * diagonals, nb each */
    double *wk;           /* nb doubles of workspace */
    int full;
    int rescale;          /* L's diagonal moved away from the start's */
    size_t evals;
    size_t iter0;         /* iterations of the earlier runs */
    int cancelled, have_last;
    gmm_status fail_status, fatal; /* fatal: GMM_ENOMEM in an evaluation */
    char fatal_msg[GMM_ERROR_MAX];
} run_ctx;

/* lambda = lam0 + T u (SCALING): m = m0 + L0^-T a; column j of L moves by
 * R_j^-T w_j, its diagonal slot holding log L(j, j) by that / L0(j, j). */
static void precond_apply(run_ctx *c, const double *u, double *lam)
{
    gmm_vi *v = c->v;
    size_t n = v->n, nb = v->b + 1;
    gmm_band ub, lb;
    memcpy(lam, u, n * sizeof *u);
    gmm_band_tri_solve_vec(c->L0, GMM_TRANS, lam);
    for (size_t j = 0; j < n; j++)
        lam[j] += c->lam0[j];
    memcpy(lam + n, c->lam0 + n, (c->nvar - n) * sizeof *lam); /* and the unused corner */
    gmm_band_view(&ub, (double *)u + n, n, v->b, 0, GMM_BAND_LOWER);
    gmm_band_view(&lb, lam + n, n, v->b, 0, GMM_BAND_LOWER);
    for (size_t j = 0; j < n; j++) {
        size_t k = (v->b < n - 1 - j ? v->b : n - 1 - j) + 1;
        const double *R = c->R + j * (c->full ? nb * nb : nb);
        double *x = c->wk;
        for (size_t i = 0; i < k; i++)
            x[i] = gmm_band_get(&ub, j + i, j);
        for (size_t i = k; i-- > 0;) { /* R' x = w */
            if (c->full) {
                for (size_t r = i + 1; r < k; r++)
                    x[i] -= R[i * nb + r] * x[r];
                x[i] /= R[i * nb + i];
            } else {
                x[i] /= R[i];
            }
        }
        x[0] /= gmm_band_get(c->L0, j, j);
        for (size_t i = 0; i < k; i++)
            *gmm_band_ptr(&lb, j + i, j) += x[i];
    }
}

/* g <- T' g in place (nvar entries; 0 at the unused corner). */
static void precond_grad(run_ctx *c, double *g)
{
    gmm_vi *v = c->v;
    size_t n = v->n, nb = v->b + 1;
    gmm_band gb;
    gmm_band_tri_solve_vec(c->L0, GMM_NOTRANS, g);
    gmm_band_view(&gb, g + n, n, v->b, 0, GMM_BAND_LOWER);
    for (size_t j = 0; j < n; j++) {
        size_t k = (v->b < n - 1 - j ? v->b : n - 1 - j) + 1;
        const double *R = c->R + j * (c->full ? nb * nb : nb);
        double *y = c->wk;
        for (size_t i = 0; i < k; i++)
            y[i] = gmm_band_get(&gb, j + i, j);
        y[0] /= gmm_band_get(c->L0, j, j);
        for (size_t i = 0; i < k; i++) { /* R y = g */
            if (c->full) {
                for (size_t r = 0; r < i; r++)
                    y[i] -= R[r * nb + i] * y[r];
                y[i] /= R[i * nb + i];
            } else {
                y[i] /= R[i];
            }
        }
        for (size_t i = 0; i < k; i++)
            *gmm_band_ptr(&gb, j + i, j) = y[i];
    }
}

/* theta's free entries from u (objective.h, SCALES); 0 (and fail_status
 * set) when one leaves its domain in floating point. */
static int map_theta(run_ctx *c, const double *u)
{
    if (infer_scale_theta(&c->sc, u + c->nvar, c->th))
        return 1;
    c->fail_status = gmm_error_status();
    return 0;
}

/* -ELBO and its gradient at u; 0 on a domain failure. */
static int eval_min(run_ctx *c, const double *u, double *f, double *g)
{
    gmm_vi *v = c->v;
    double elbo;
    c->evals++;
    c->have_last = 0;
    if (!map_theta(c, u))
        return 0;
    precond_apply(c, u, c->lam);
    gmm_status st = gmm_vi_elbo(v, c->th, c->lam, &elbo, g, c->nfree ? c->thbar : NULL);
    if (st) {
        c->fail_status = st;
        return 0;
    }
    precond_grad(c, g);
    for (size_t j = 0; j < c->nvar; j++)
        g[j] = -g[j];
    infer_scale_grad(&c->sc, c->th, c->thbar, -1.0, g + c->nvar);
    for (size_t j = 0; j < c->nu; j++)
        if (!isfinite(g[j])) {
            c->fail_status = gmm_error(GMM_EDOM, "vi: gradient not finite");
            return 0;
        }
    memcpy(c->ulast, u, c->nu * sizeof *u);
    c->have_last = 1;
    *f = -elbo;
    return 1;
}

/* Start a new run with a new T when an L(j, j) moved by more than a factor
 * 1.5 from the run's start (SCALING). */
#define RESCALE_LOG 0.4054651081081644

static int evaluate(void *ctx, const double *x, double *f, double *g, double step)
{
    run_ctx *c = ctx;
    /* the starting point chooses each row's rule; line searches keep them */
    c->v->freeze = step != 0.0;
    int ok = !c->fatal && eval_min(c, x, f, g);
    c->v->freeze = 1;
    if (!ok && !c->fatal && c->fail_status == GMM_ENOMEM) {
        c->fatal = GMM_ENOMEM; /* not a domain failure: end the run */
        snprintf(c->fatal_msg, sizeof c->fatal_msg, "%s", gmm_error_message());
    }
    return ok;
}

static int accepted(void *ctx, const double *x, double f, double gnorm)
{
    run_ctx *c = ctx;
    gmm_vi *v = c->v;
    if (c->fatal)
        return 1;
    /* each row's rule from its variance at the accepted iterate */
    if (!v->par.nquad && c->have_last && !memcmp(c->ulast, x, c->nu * sizeof *x)) {
        v->freeze = 0;
        for (size_t i = 0; i < v->nobs; i++)
            vi_rule_of(v, i, v->s2[i]);
        v->freeze = 1;
    }
    if (v->par.progress) {
        gmm_vi_progress p = {c->iter0 + c->lb.iter, c->evals, -f, gnorm};
        if (v->par.progress(v->par.user, &p)) {
            c->cancelled = 1;
            return 1;
        }
    }
    return 0;
}

/* After the decrease test: a new run when L's diagonal left the start's
 * scale. */
static int after(void *ctx, const double *x)
{
    run_ctx *c = ctx;
    gmm_vi *v = c->v;
    precond_apply(c, x, c->tu);
    for (size_t j = 0; j < v->n; j++) {
        size_t d = v->n + (size_t)(gmm_band_ptr(c->L0, j, j) - c->L0->data);
        if (fabs(c->tu[d] - c->lam0[d]) > RESCALE_LOG) {
            c->rescale = 1;
            return 1;
        }
    }
    return 0;
}

/* The preconditioner T of a run, from its starting point (SCALING): the
 * second-order expansion of the ELBO for a Gaussian likelihood at its
 * optimum is -|L0' dm|^2 / 2 - (|L0^-1 dL|_F^2 + sum_j (dL_jj / L0_jj)^2)
 * / 2, whose L part splits by columns: column j's metric is the block of
 * Sigma0 = (L0 L0')^-1 on its rows plus 1 / L0_jj^2 at its diagonal, M_j
 * = R_j R_j'.  In u the expansion is -|u|^2 / 2.  Blocks are kept when
 * they take no more memory than L-BFGS's own history (nb <= 2 memory),
 * else (and for a block whose Cholesky fails in rounding) their
 * diagonals.  O(n b^3). */
static gmm_status precond_set(gmm_vi *v, run_ctx *c)
{
    gmm_status st;
    size_t n = v->n, nb = v->b + 1;
    memcpy(c->lam0, v->lambda, c->nvar * sizeof *c->lam0);
    if ((st = vi_unpack(v, v->lambda)) || (st = gmm_band_copy(c->L0, v->L)) ||
        (st = gmm_band_chol_selinv(c->L0, c->S0)))
        return st;
    for (size_t j = 0; j < n; j++) {
        size_t k = (v->b < n - 1 - j ? v->b : n - 1 - j) + 1;
        double d = gmm_band_get(c->L0, j, j), dd = 1.0 / (d * d);
        if (!c->full) {
            double *R = c->R + j * nb;
            for (size_t i = 0; i < k; i++)
                R[i] = sqrt(gmm_band_get(c->S0, j + i, j + i) + (i ? 0.0 : dd));
            continue;
        }
        double *R = c->R + j * nb * nb; /* column-major, lower */
        int ok = 1;
        for (size_t a = 0; a < k; a++)
            for (size_t r = a; r < k; r++)
                R[a * nb + r] = gmm_band_get(c->S0, j + r, j + a) + (r || a ? 0.0 : dd);
        for (size_t a = 0; a < k && ok; a++) {
            double p = R[a * nb + a];
            for (size_t t = 0; t < a; t++)
                p -= R[t * nb + a] * R[t * nb + a];
            if (!(p > 0.0) || !isfinite(p)) {
                ok = 0;
                break;
            }
            R[a * nb + a] = p = sqrt(p);
            for (size_t r = a + 1; r < k; r++) {
                double x = R[a * nb + r];
                for (size_t t = 0; t < a; t++)
                    x -= R[t * nb + r] * R[t * nb + a];
                R[a * nb + r] = x / p;
            }
        }
        if (!ok)
            for (size_t a = 0; a < k; a++)
                for (size_t r = a; r < k; r++)
                    R[a * nb + r] = r == a ? sqrt(gmm_band_get(c->S0, j + a, j + a) +
                                                  (a ? 0.0 : dd))
                                           : 0.0;
    }
    return GMM_OK;
}

/* The norm of the gradient's rounding noise at the anchor (STOPPING):
 * ECnoise (infer_impl.h) of each of up to GNOISE_SAMPLE evenly spaced
 * components of g along the gradient's direction d, g_j(u0 + k h d) for k
 * = -4 .. 4, h = GNOISE_STEP max(1, |u0|_inf) (u's unit is about a
 * posterior sd: the smooth part is negligible in those differences), the
 * sum of their squares scaled to all components.  8 evaluations, rules
 * frozen.  GMM_ENOMEM; an evaluation that fails gives noise 0. */
#define GNOISE_STEP 1e-6
#define GNOISE_SAMPLE 1024
#define GNOISE_GAIN 4.0

static gmm_status grad_noise(run_ctx *c, double *noise)
{
    size_t n = c->nu, m = n < GNOISE_SAMPLE ? n : GNOISE_SAMPLE;
    const double *u0 = c->lb.u0, *g0 = c->lb.g0;
    double gn = infer_lbfgs_gnorm(&c->lb), scale = 1.0, f;
    *noise = 0.0;
    if (!(gn > 0.0))
        return GMM_OK;
    double *x = gmm_malloc(2 * n + 9 * m, sizeof *x);
    if (!x)
        return gmm_error(GMM_ENOMEM, "vi: out of memory (%zu variables)", n);
    double *g = x + n, *phi = g + n; /* phi[i * 9 + k + 4]: component i's at k */
    for (size_t k = 0; k < n; k++)
        scale = fmax(scale, fabs(u0[k]));
    double h = GNOISE_STEP * scale;
    int ok = 1;
    for (int j = -4; j <= 4 && ok; j++) {
        const double *gj = g0;
        if (j) {
            for (size_t k = 0; k < n; k++)
                x[k] = u0[k] - j * h * g0[k] / gn;
            ok = c->lb.eval(c->lb.ctx, x, &f, g, 1.0);
            gj = g;
        }
        for (size_t i = 0; i < m; i++)
            phi[i * 9 + (size_t)(j + 4)] = gj[i * n / m];
    }
    c->v->freeze = 0;
    double ss = 0.0;
    for (size_t i = 0; ok && i < m; i++) {
        double s = infer_ecnoise(phi + i * 9);
        ss += s * s;
    }
    if (ok)
        *noise = sqrt(ss * (double)n / (double)m);
    gmm_free(x);
    return GMM_OK;
}

/* STOPPING: in u the Hessian in q is about the identity, so without
 * hyperparameters |g|^2 / 2 is the Newton decrement, the rise of the ELBO a
 * Newton step would still give; at most VI_GAIN nats counts as converged.
 * The hyperparameters' curvature is not 1 (a flat lengthscale's is far
 * below), so with them only the gradient test and the noise test count. */
#define VI_GAIN 1e-8

/* The polish (STOPPING) may leave the ELBO POLISH_FTOL relative below the
 * run's end (its rounding) and take POLISH_MAX_ITER iterations. */
#define POLISH_TIGHTER 1e-3
#define POLISH_FTOL 1e-12
#define POLISH_MAX_ITER 200
/* The final run's line searches: near the optimum a failing one (the
 * ELBO's rounding) is answered by the polish, not by 40 evaluations. */
#define FINAL_LINESEARCH 10
/* The final run's iterations: at most those of the runs before it, or
 * FINAL_MIN_ITER when more. */
#define FINAL_MIN_ITER 100

gmm_status gmm_vi_fit(gmm_vi *v, gmm_vi_result *res)
{
    gmm_status st = GMM_OK;
    if (!v || !res)
        return gmm_error(GMM_EINVAL, "gmm_vi_fit: NULL argument");
    memset(res, 0, sizeof *res);
    if (!v->have_start && (st = gmm_vi_start_laplace(v, NULL)))
        return st;
    res->start = v->start;
    const gmm_objective *obj = gmm_problem_objective(v->prob);
    run_ctx c;
    memset(&c, 0, sizeof c);
    c.v = v;
    c.nvar = v->nvar;
    c.obj = obj;
    if (v->par.learn_hyper)
        for (size_t i = 0; i < v->nparam; i++)
            c.nfree += !obj->fixed[i];
    c.nu = c.nvar + c.nfree;
    if (c.nu > (size_t)0x7fffffff)
        return gmm_error(GMM_EINVAL, "vi: too many variables (%zu)", c.nu);
    c.idx = gmm_malloc(c.nfree ? c.nfree : 1, sizeof *c.idx);
    c.th = gmm_malloc(v->nparam ? v->nparam : 1, sizeof *c.th);
    c.thbar = gmm_malloc(v->nparam ? v->nparam : 1, sizeof *c.thbar);
    double *u = gmm_malloc(c.nu, sizeof *u);
    c.ulast = gmm_malloc(c.nu, sizeof *c.ulast);
    size_t nb = v->b + 1;
    c.full = nb <= 2 * v->par.memory;
    c.lam = gmm_malloc(c.nvar, sizeof *c.lam);
    c.lam0 = gmm_malloc(c.nvar, sizeof *c.lam0);
    c.tu = gmm_malloc(c.nvar, sizeof *c.tu);
    c.wk = gmm_malloc(nb, sizeof *c.wk);
    c.R = gmm_malloc(v->n * (c.full ? nb : 1), nb * sizeof *c.R);
    c.L0 = gmm_band_alloc(v->n, v->b, 0, GMM_BAND_LOWER);
    c.S0 = gmm_band_alloc(v->n, v->b, 0, GMM_BAND_SYMMETRIC);
    if ((st = infer_lbfgs_alloc(&c.lb, c.nu, 3)) != GMM_OK) {
        st = gmm_error(st, "vi: %s", gmm_error_message());
        goto done;
    }
    c.lb.memory = v->par.memory;
    c.lb.epsilon = v->par.epsilon;
    c.lb.max_linesearch = 40;
    c.lb.delta = v->par.tol;
    c.lb.eval = evaluate;
    c.lb.accepted = accepted;
    c.lb.after = after;
    c.lb.ctx = &c;
    if (!c.idx || !c.th || !c.thbar || !u || !c.ulast || !c.lam || !c.lam0 ||
        !c.tu || !c.wk || !c.R || !c.L0 || !c.S0) {
        st = gmm_error(GMM_ENOMEM, "vi: out of memory for the optimiser (%zu variables)", c.nu);
        goto done;
    }
    for (size_t i = 0, k = 0; v->par.learn_hyper && i < v->nparam; i++) {
        if (obj->fixed[i])
            continue;
        if (!gmm_scale_inside(obj->scale[i], v->theta[i])) {
            st = gmm_error(GMM_EINVAL, "vi: start value of '%s' must be %s, got %g",
                           obj->name[i], gmm_scale_domain(obj->scale[i]), v->theta[i]);
            goto done;
        }
        c.idx[k++] = i;
    }
    if ((st = infer_scale_init(&c.sc, obj, c.nfree, c.idx)) != GMM_OK)
        goto done;
    size_t iters = 0;
    int ret, final = 0;
    for (;;) { /* runs, each with the scale of its start */
        memcpy(c.th, v->theta, v->nparam * sizeof *c.th);
        if ((st = precond_set(v, &c)))
            goto done;
        memset(u, 0, c.nvar * sizeof *u);
        infer_scale_u(&c.sc, v->theta, u + c.nvar);
        c.lb.max_iterations = v->par.max_iter ? v->par.max_iter - iters : 0;
        if (final) { /* STOPPING: the final run's budget */
            size_t budget = iters > FINAL_MIN_ITER ? iters : FINAL_MIN_ITER;
            if (!c.lb.max_iterations || c.lb.max_iterations > budget)
                c.lb.max_iterations = budget;
        }
        c.iter0 = iters;
        c.rescale = 0;
        gmm_status lst = infer_lbfgs_run(&c.lb, u, "vi");
        ret = c.lb.ret;
        v->freeze = 0;
        if (c.fatal) {
            st = gmm_error(c.fatal, "vi: %s", c.fatal_msg);
            goto done;
        }
        if (c.lb.start_failed) {
            st = gmm_error(c.fail_status ? c.fail_status : GMM_EDOM, "vi: starting point: %s",
                           c.lb.fail_msg);
            goto done;
        }
        if ((st = lst) != GMM_OK)
            goto done;
        /* the last accepted iterate */
        precond_apply(&c, c.lb.u0, v->lambda);
        map_theta(&c, c.lb.u0);
        memcpy(v->theta, c.th, v->nparam * sizeof *c.th);
        if ((st = vi_canonical(v)))
            goto done;
        iters += c.lb.iter;
        if (v->par.max_iter && iters >= v->par.max_iter)
            break;
        if (!c.rescale && !c.cancelled && !final &&
            (c.lb.stopped_delta || infer_lbfgs_line_search_stop(ret))) {
            final = 1; /* STOPPING: on by the gradient, scaled here */
            c.lb.delta = 0.0;
            c.lb.epsilon = v->par.epsilon * POLISH_TIGHTER;
            c.lb.max_linesearch = FINAL_LINESEARCH;
            if (infer_lbfgs_gnorm(&c.lb) <= c.lb.epsilon * fmax(1.0, infer_lbfgs_unorm(&c.lb)))
                break;
        } else if (!c.rescale) {
            break;
        }
        res->restarts++;
    }
    /* STOPPING: a final run that stopped on f goes on by the gradient. */
    if (final && !c.cancelled && !c.rescale &&
        (c.lb.stopped_delta || ret == LBFGSERR_MAXIMUMITERATION || infer_lbfgs_line_search_stop(ret))) {
        size_t pit = 0;
        double gtol = v->par.epsilon * POLISH_TIGHTER * fmax(1.0, infer_lbfgs_unorm(&c.lb));
        double f0 = c.lb.f0;
        size_t pmax = POLISH_MAX_ITER; /* within --max-iter */
        if (v->par.max_iter)
            pmax = iters >= v->par.max_iter ? 0
                   : v->par.max_iter - iters < pmax ? v->par.max_iter - iters : pmax;
        if ((st = infer_lbfgs_polish(&c.lb, gtol, POLISH_FTOL * fmax(1.0, fabs(f0)), pmax,
                                     &pit)))
            goto done;
        v->freeze = 0;
        if (c.fatal) {
            st = gmm_error(c.fatal, "vi: %s", c.fatal_msg);
            goto done;
        }
        iters += pit;
        precond_apply(&c, c.lb.u0, v->lambda);
        map_theta(&c, c.lb.u0);
        memcpy(v->theta, c.th, v->nparam * sizeof *c.th);
        if ((st = vi_canonical(v)))
            goto done;
    }
    res->evaluations = c.evals;
    res->elbo = -c.lb.f0;
    res->grad_norm = infer_lbfgs_gnorm(&c.lb);
    res->grad_limit = v->par.epsilon * fmax(1.0, infer_lbfgs_unorm(&c.lb));
    res->iterations = iters;
    if (c.cancelled) {
        res->message = "cancelled";
        st = gmm_error(GMM_ECANCEL, "vi: cancelled by the progress callback");
    } else if (c.rescale) {
        res->message = "stopped: maximum number of iterations reached";
    } else if (final) {
        res->converged = res->grad_norm <= res->grad_limit;
        res->message = "converged: gradient norm below epsilon";
        if (!res->converged && !c.nfree && 0.5 * res->grad_norm * res->grad_norm <= VI_GAIN) {
            res->converged = 1;
            res->message = "converged: a Newton step would raise the ELBO by less than 1e-8";
        } else if (!res->converged) {
            double noise;
            if ((st = grad_noise(&c, &noise)))
                goto done;
            res->grad_noise = noise;
            res->converged = res->grad_norm <= GNOISE_GAIN * noise;
            res->message = res->converged ? "converged at the gradient's resolution: its norm "
                                            "within 4 times that of its rounding noise"
                           : ret == LBFGSERR_MAXIMUMITERATION
                               ? "stopped: the final run's iteration budget was spent"
                               : "stopped at the ELBO's resolution: gradient norm above epsilon "
                                 "and above its rounding noise where neither the ELBO nor its "
                                 "gradient improves";
        }
    } else {
        res->converged = infer_lbfgs_converged(ret);
        res->message = infer_lbfgs_message(ret);
    }
    v->have_start = 1;
    v->start = "given";
done:
    infer_scale_free(&c.sc);
    gmm_free(c.idx);
    gmm_free(c.th);
    gmm_free(c.thbar);
    gmm_free(u);
    infer_lbfgs_free(&c.lb);
    gmm_free(c.ulast);
    gmm_free(c.lam);
    gmm_free(c.lam0);
    gmm_free(c.tu);
    gmm_free(c.wk);
    gmm_free(c.R);
    gmm_band_free(c.L0);
    gmm_band_free(c.S0);
    return st;
}
