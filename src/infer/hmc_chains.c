/* hmc_chains.c -- K chains of whitened HMC on T threads, each chain's rows
 * in its own temporary file (binary doubles), read back in chain order
 * (hmc_chains.h).  The temporaries make the output independent of T: the
 * chains finish in any order, the rows come back in chain order. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gmm/alloc.h"
#include "gmm/hmc_chains.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/objective.h"
#include "gmm/rng.h"

struct gmm_hmc_chains {
    size_t nchain, ncol, kept;
    int cut;
    FILE **tmp;
    gmm_hmc_chain_info *info;
    double **metric;
};

typedef struct {
    const gmm_hmc_run_params *rp;
    gmm_hmc_chains *r;
    gmm_status *status;
    char (*msg)[GMM_ERROR_MAX];
    pthread_mutex_t lock;
    size_t next;
    int cancel;
} run_ctx;

typedef struct {
    run_ctx *rc;
    gmm_problem *p;
} worker;

void gmm_hmc_run_params_init(gmm_hmc_run_params *rp)
{
    memset(rp, 0, sizeof *rp);
    gmm_hmc_params_init(&rp->hmc);
    rp->nchain = 4;
    rp->chain0 = 1;
    rp->mh_draws = 32;
}

/* The data's location and scale for the coefficients' priors: a Gaussian
 * likelihood's observed mean and sd, else the family's default intercept
 * (its link of the data's mean rate) and 1. */
static void data_scale(gmm_problem *p, double *loc, double *scale)
{
    const gmm_lik *lik = gmm_problem_lik(p);
    const double *y = gmm_problem_y(p), *e = gmm_problem_exposure(p);
    size_t n = gmm_latent_nrows(gmm_problem_latent(p)), m = 0;
    double s1 = 0.0, s2 = 0.0;
    for (size_t r = 0; r < n; r++)
        if (!isnan(y[r])) {
            s1 += y[r];
            m++;
        }
    double mean = m ? s1 / (double)m : 0.0;
    for (size_t r = 0; r < n; r++)
        if (!isnan(y[r]))
            s2 += (y[r] - mean) * (y[r] - mean);
    if (lik->type->conjugate) {
        *loc = mean;
        *scale = m > 1 && s2 > 0.0 ? sqrt(s2 / (double)(m - 1)) : 1.0;
        return;
    }
    *scale = 1.0;
    if (gmm_lik_default_intercept(lik, y, e, n, loc) != GMM_OK || !isfinite(*loc))
        *loc = 0.0;
}

void gmm_hmc_default_priors(gmm_problem *p, int *sampled, gmm_prior *prior)
{
    const gmm_objective *o = gmm_problem_objective(p);
    size_t nc = gmm_problem_ncoef(p), c0 = o->nparam - nc;
    double *mean = gmm_calloc(nc ? 2 * nc : 1, sizeof *mean), *sd = mean ? mean + nc : NULL;
    double loc, sy;
    long icpt = -1;
    if (mean && gmm_problem_coef_moments(p, mean, sd, &icpt) != GMM_OK)
        icpt = -1;
    /* without the moments (no memory) the priors are on the coefficients as they are */
    data_scale(p, &loc, &sy);
    for (size_t k = 0; k < o->nparam; k++) {
        gmm_scale sc = o->scale[k];
        double v = o->value[k];
        sampled[k] = !o->fixed[k];
        if (k >= c0) {
            /* PRIORS_DEFAULT (hmc_chains.h): on the centred, scaled design */
            size_t j = k - c0;
            double s = mean && (long)j != icpt && sd[j] > 0.0 ? sd[j] : 1.0;
            prior[k] = (long)j == icpt ? (gmm_prior){GMM_PRIOR_NORMAL, loc, 2.5 * sy}
                                       : (gmm_prior){GMM_PRIOR_NORMAL, 0.0, 2.5 * sy / s};
        } else { /* centred at the value on its scale (0 where it has none) */
            prior[k] = (gmm_prior){gmm_prior_kind_of(sc),
                                   gmm_scale_inside(sc, v) ? gmm_scale_to_u(sc, v) : 0.0, 1.0};
        }
    }
    gmm_free(mean);
}

gmm_status gmm_hmc_check_priors(gmm_problem *p, const double *theta, const int *sampled,
                                const gmm_prior *prior, size_t *bad)
{
    const gmm_objective *o = gmm_problem_objective(p);
    for (size_t k = 0; k < o->nparam; k++)
        if (sampled[k] && prior[k].kind != GMM_PRIOR_NORMAL &&
            !gmm_scale_inside(o->scale[k], theta[k])) {
            *bad = k;
            return gmm_error(GMM_EINVAL, "%s = %g cannot be sampled on the %s scale", o->name[k],
                             theta[k], gmm_scale_name(o->scale[k]));
        }
    return GMM_OK;
}

static gmm_status whitened_logp(void *ctx, const double *v, double *lp, double *grad)
{
    return gmm_problem_whitened_logp(ctx, v, lp, grad);
}

static gmm_status joint_logp(void *ctx, const double *q, double *lp, double *grad)
{
    return gmm_problem_joint_logp(ctx, q, lp, grad);
}

/* Every chain's progress, one call at a time: a cancel stops them all. */
static int progress(void *user, const gmm_hmc_progress *p)
{
    run_ctx *rc = user;
    pthread_mutex_lock(&rc->lock);
    if (!rc->cancel && rc->rp->progress && rc->rp->progress(rc->rp->user, p))
        rc->cancel = 1;
    int stop = rc->cancel;
    pthread_mutex_unlock(&rc->lock);
    return stop;
}

static double seconds_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + 1e-9 * (double)(b->tv_nsec - a->tv_nsec);
}

/* f at the data rows (a latent with inputs; covariates: a node has no
 * linear predictor of its own then; a stack, which has no nodes) or at the
 * nodes. */
static int row_sites(gmm_problem *p)
{
    const gmm_latent *l = gmm_problem_latent(p);
    return gmm_latent_has_inputs(l) || gmm_latent_node_index(l, 0) == GMM_NO_INDEX ||
           !gmm_problem_offset_constant(p, gmm_problem_objective(p)->value, NULL);
}

static size_t nsites(gmm_problem *p)
{
    const gmm_latent *l = gmm_problem_latent(p);
    return row_sites(p) ? gmm_latent_nrows(l) : gmm_latent_dim(l);
}

/* One chain, its rows to r->tmp[c]. */
static gmm_status run_chain(run_ctx *rc, gmm_problem *p, size_t c)
{
    const gmm_hmc_run_params *rp = rc->rp;
    gmm_hmc_chain_info *ci = &rc->r->info[c];
    gmm_status st;
    int inputs = row_sites(p);
    size_t n = gmm_latent_dim(gmm_problem_latent(p)), nf = nsites(p);
    size_t np = gmm_problem_objective(p)->nparam, dim = n, ncol = rc->r->ncol;
    uint64_t id = ci->id;
    double *v = gmm_malloc(n + np, sizeof *v), *f = gmm_malloc(nf ? nf : 1, sizeof *f);
    double *xs = gmm_malloc(n ? n : 1, sizeof *xs), *th = gmm_malloc(np ? np : 1, sizeof *th);
    double *row = gmm_malloc(ncol, sizeof *row);
    size_t nrow = gmm_latent_nrows(gmm_problem_latent(p));
    double *frows = rp->log_lik && !inputs ? gmm_malloc(nrow ? nrow : 1, sizeof *frows) : f;
    const double *y = gmm_problem_y(p), *e = gmm_problem_exposure(p);
    const double *wt = gmm_problem_weights(p);
    gmm_lik lik;
    gmm_hmc *h = NULL;
    gmm_hmc_marginal *m = NULL;
    int werr = 0, marg = rp->sampled && rp->marginal != GMM_MARGINAL_NONE;
    int mh = marg && rp->marginal == GMM_MARGINAL_LAPLACE_MH, have_cur = 0;
    size_t nmh = mh ? (rp->mh_draws ? rp->mh_draws : 1) : 1;
    double *xm = marg ? gmm_malloc(nmh * (n ? n : 1), sizeof *xm) : NULL, lw = 0.0, lw_cur = 0.0;
    double *lws = mh ? gmm_malloc(nmh, sizeof *lws) : NULL;
    /* the correction's current pair: its row and u */
    double *row_cur = mh ? gmm_malloc(ncol, sizeof *row_cur) : NULL;
    double *u_cur = mh ? gmm_malloc(np ? np : 1, sizeof *u_cur) : NULL;
    if (!v || !f || !xs || !th || !row || !frows || (marg && !xm) ||
        (mh && (!row_cur || !u_cur || !lws))) {
        st = gmm_error(GMM_ENOMEM, "out of memory for chain %llu", (unsigned long long)id);
        goto done;
    }
    gmm_hmc_params par = rp->hmc;
    par.chain = id;
    par.progress = progress;
    par.user = rc;
    /* the Laplace map leaves every coordinate's variance near one */
    par.metric_pooling = !rp->sampled && rp->metric == GMM_METRIC_LAPLACE;
    memcpy(th, rp->theta, np * sizeof *th);
    gmm_problem_set_metric(p, rp->metric);
    if (marg) {
        if ((st = gmm_hmc_marginal_alloc(p, rp->theta, rp->sampled, rp->prior, &m)) ||
            (st = gmm_hmc_marginal_start(m, v)))
            goto done;
        dim = gmm_hmc_marginal_dim(m);
    } else if (rp->sampled) {
        if ((st = gmm_problem_joint_setup(p, rp->theta, rp->sampled, rp->prior)) ||
            (st = gmm_problem_joint_start(p, v)))
            goto done;
        dim = gmm_problem_joint_dim(p);
    } else if ((st = gmm_problem_whiten_setup(p, rp->theta)) ||
               (st = rp->x0 ? gmm_problem_unwhiten(p, rp->x0, v)
                            : gmm_problem_whitened_start(p, rp->theta, v))) {
        goto done;
    }
    /* the jitter, N(0, 0.5^2) in the whitened coordinates (whose posterior
     * sd is at most 1), from the chain's own stream so the starts differ
     * between chains; sampled hyperparameters start at theta */
    gmm_rng g;
    gmm_rng_seed(&g, par.seed ^ 0x5DEECE66DULL, id);
    for (size_t i = 0; !marg && i < n; i++)
        v[i] += 0.5 * gmm_rng_normal(&g);
    if (!(h = gmm_hmc_alloc(dim, &par))) {
        st = gmm_error_status();
        goto done;
    }
    gmm_hmc_target t = {marg ? gmm_hmc_marginal_logp : rp->sampled ? joint_logp : whitened_logp,
                        marg ? (void *)m : (void *)p};
    if ((st = gmm_hmc_init(h, v, &t)))
        goto done;
    FILE *out = rc->r->tmp[c];
    struct timespec t0, t1;
    int phase = 0; /* timing warm-up (0) or draws (1) */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t k = 0; k < par.warmup + par.draws; k++) {
        gmm_hmc_draw d;
        if (k == par.warmup) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            ci->seconds[0] = seconds_between(&t0, &t1);
            t0 = t1;
            phase = 1;
        }
        st = gmm_hmc_iterate(h, &d);
        if (st != GMM_OK && st != GMM_ECANCEL)
            break;
        ci->leapfrog[!d.warmup] += d.n_leapfrog;
        if (!d.warmup) {
            gmm_status s2 = GMM_OK;
            const double *q = d.q;
            if (marg) {
                /* x given theta, carried to the whitened v the rows are made from;
                 * the correction picks one of its draws by weight */
                gmm_hmc_marginal_theta(m, d.q, th);
                for (size_t i = 0; i < nmh * n; i++)
                    xm[i] = gmm_rng_normal(&g);
                if ((s2 = gmm_hmc_marginal_draw(m, d.q, nmh, xm, xm, lws))) {
                    st = s2;
                    break;
                }
                const double *xsel = xm;
                if (mh) {
                    double top = -INFINITY, sum = 0.0;
                    for (size_t k2 = 0; k2 < nmh; k2++)
                        top = fmax(top, lws[k2]);
                    for (size_t k2 = 0; isfinite(top) && k2 < nmh; k2++)
                        sum += exp(lws[k2] - top);
                    /* a weight that is not finite: never accepted (unless first) */
                    lw = isfinite(top) ? top + log(sum / (double)nmh) : -INFINITY;
                    double pick = gmm_rng_uniform(&g) * sum, acc = 0.0;
                    for (size_t k2 = 0; isfinite(top) && k2 < nmh; k2++) {
                        acc += exp(lws[k2] - top);
                        xsel = xm + k2 * n;
                        if (pick < acc)
                            break;
                    }
                }
                if ((s2 = gmm_problem_whiten_setup(p, th)) ||
                    (s2 = gmm_latent_unwhiten(gmm_problem_latent_eval(p), xsel, v))) {
                    st = s2;
                    break;
                }
                q = v;
            } else if (rp->sampled && ((s2 = gmm_problem_joint_theta(p, d.q, th)) ||
                                       (s2 = gmm_problem_whiten_setup(p, th)))) {
                st = s2;
                break;
            }
            if ((s2 = inputs ? gmm_problem_whitened_linpred(p, q, f, NULL)
                             : gmm_problem_whitened_linpred(
                                   p, q, rp->log_lik ? frows : NULL, f)) ||
                (rp->states && (s2 = gmm_problem_whitened_latent(p, q, xs))) ||
                (rp->log_lik && (s2 = gmm_problem_lik_at(p, th, &lik)))) {
                st = s2;
                break;
            }
            size_t j = 0;
            const double col[GMM_HMC_NSAMPLER] = {d.lp, d.accept_stat, d.stepsize,
                                                  (double)d.treedepth, (double)d.n_leapfrog,
                                                  (double)d.divergent, d.energy};
            for (size_t i = 0; i < GMM_HMC_NSAMPLER; i++)
                row[j++] = col[i];
            for (size_t i = 0; rp->sampled && i < np; i++)
                if (rp->sampled[i])
                    row[j++] = th[i];
            for (size_t i = 0; i < nf; i++)
                if (!rp->keep || rp->keep[i])
                    row[j++] = f[i] + rp->offset;
            for (size_t i = 0; rp->states && i < n; i++)
                row[j++] = xs[i];
            for (size_t r = 0; rp->log_lik && r < nrow; r++) {
                if (isnan(y[r]))
                    continue;
                double ev[4];
                gmm_lik_eval_weighted(&lik, y[r], e ? e[r] : 1.0, wt ? wt[r] : 1.0, NULL,
                                      frows[r], ev, NULL);
                row[j++] = ev[0];
            }
            const double *wrow = row;
            if (mh) {
                if (!have_cur || log(gmm_rng_uniform(&g)) < lw - lw_cur) {
                    memcpy(row_cur, row, ncol * sizeof *row);
                    memcpy(u_cur, d.q, dim * sizeof *u_cur);
                    lw_cur = lw;
                    have_cur = 1;
                } else {
                    /* the pair stays; this transition's sampler diagnostics */
                    memcpy(row_cur + 1, row + 1, (GMM_HMC_NSAMPLER - 1) * sizeof *row);
                    ci->rejected++;
                    if (st == GMM_OK && (s2 = gmm_hmc_set_point(h, u_cur))) {
                        st = s2;
                        break;
                    }
                }
                wrow = row_cur;
            }
            if (fwrite(wrow, sizeof *row, ncol, out) != ncol) {
                werr = errno ? errno : EIO;
                break;
            }
            ci->divergences += (size_t)d.divergent;
            ci->ndone++;
        }
        if (st == GMM_ECANCEL)
            break;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ci->seconds[phase] = seconds_between(&t0, &t1);
    ci->stepsize = gmm_hmc_stepsize(h);
    if ((rc->r->metric[c] = gmm_malloc(dim, sizeof *rc->r->metric[c])) != NULL) {
        memcpy(rc->r->metric[c], gmm_hmc_inv_metric(h), dim * sizeof *rc->r->metric[c]);
        ci->inv_metric = rc->r->metric[c];
        ci->metric_dim = dim;
    } else if (st == GMM_OK) {
        st = gmm_error(GMM_ENOMEM, "out of memory for chain %llu", (unsigned long long)id);
    }
    if (werr || ferror(out))
        st = gmm_error(GMM_EIO, "temporary file of chain %llu: write error: %s",
                       (unsigned long long)id, strerror(werr ? werr : errno));
done:
    gmm_hmc_free(h);
    gmm_hmc_marginal_free(m);
    gmm_free(xm);
    gmm_free(row_cur);
    gmm_free(u_cur);
    gmm_free(lws);
    gmm_free(v);
    gmm_free(f);
    gmm_free(xs);
    gmm_free(th);
    gmm_free(row);
    if (frows != f)
        gmm_free(frows);
    return st;
}

static void *work(void *arg)
{
    worker *w = arg;
    run_ctx *rc = w->rc;
    for (;;) {
        pthread_mutex_lock(&rc->lock);
        size_t c = rc->next++;
        int stop = rc->cancel;
        pthread_mutex_unlock(&rc->lock);
        if (c >= rc->rp->nchain || stop)
            break;
        rc->status[c] = run_chain(rc, w->p, c);
        if (rc->status[c] != GMM_OK)
            snprintf(rc->msg[c], sizeof rc->msg[c], "%s", gmm_error_message());
    }
    return NULL;
}

void gmm_hmc_chains_free(gmm_hmc_chains *r)
{
    if (!r)
        return;
    for (size_t c = 0; c < r->nchain; c++) {
        if (r->tmp && r->tmp[c])
            fclose(r->tmp[c]);
        if (r->metric)
            gmm_free(r->metric[c]);
    }
    gmm_free(r->tmp);
    gmm_free(r->metric);
    gmm_free(r->info);
    gmm_free(r);
}

static gmm_status read_row(FILE *t, double *row, size_t ncol)
{
    if (fread(row, sizeof *row, ncol, t) != ncol)
        return gmm_error(GMM_EIO, "temporary file of the chains: read error: %s",
                         ferror(t) ? strerror(errno) : "short file");
    return GMM_OK;
}

/* After a cancel: every chain with draws cut to the shortest one's count,
 * its divergences and leapfrog steps of draws recounted over those kept. */
static gmm_status cut_chains(gmm_hmc_chains *r)
{
    size_t kept = SIZE_MAX;
    for (size_t c = 0; c < r->nchain; c++)
        if (r->info[c].ndone && r->info[c].ndone < kept)
            kept = r->info[c].ndone;
    r->cut = 1;
    r->kept = kept == SIZE_MAX ? 0 : kept;
    double *row = gmm_malloc(r->ncol, sizeof *row);
    if (!row)
        return gmm_error(GMM_ENOMEM, "out of memory");
    gmm_status s = GMM_OK;
    for (size_t c = 0; c < r->nchain && s == GMM_OK; c++) {
        gmm_hmc_chain_info *ci = &r->info[c];
        ci->divergences = ci->leapfrog[1] = 0;
        if (!ci->ndone)
            continue;
        if (fflush(r->tmp[c]) || fseek(r->tmp[c], 0, SEEK_SET)) {
            s = gmm_error(GMM_EIO, "temporary file of the chains: %s", strerror(errno));
            break;
        }
        for (size_t k = 0; k < r->kept && (s = read_row(r->tmp[c], row, r->ncol)) == GMM_OK;
             k++) {
            ci->leapfrog[1] += (size_t)row[4];
            ci->divergences += row[5] != 0.0;
        }
    }
    gmm_free(row);
    return s;
}

gmm_status gmm_hmc_run_chains(gmm_problem *const *probs, size_t nthread,
                              const gmm_hmc_run_params *rp, gmm_hmc_chains **out)
{
    *out = NULL;
    gmm_status s = gmm_hmc_params_check(&rp->hmc);
    if (s != GMM_OK)
        return s;
    if (rp->nchain == 0 || nthread == 0 || !probs || !rp->theta ||
        (rp->sampled && !rp->prior))
        return gmm_error(GMM_EINVAL, "hmc chains: no chain, thread, theta or prior");
    if (rp->sampled && rp->metric != GMM_METRIC_PRIOR)
        return gmm_error(GMM_EINVAL, "hmc chains: the Laplace metric holds the hyperparameters "
                                     "fixed");
    size_t nsamp = 0;
    for (size_t k = 0; rp->sampled && k < gmm_problem_objective(probs[0])->nparam; k++)
        nsamp += rp->sampled[k] != 0;
    if (gmm_latent_dim(gmm_problem_latent(probs[0])) == 0 && nsamp == 0)
        return gmm_error(GMM_EINVAL, "the model has no latent field (no latent term) and "
                                     "no sampled hyperparameter: nothing to sample");
    size_t bad;
    if (rp->sampled && (s = gmm_hmc_check_priors(probs[0], rp->theta, rp->sampled, rp->prior, &bad)))
        return s;
    if (nthread > rp->nchain)
        nthread = rp->nchain;
    gmm_problem *p = probs[0];
    size_t np = gmm_problem_objective(p)->nparam, nf = nsites(p), ns = 0, nk = 0;
    for (size_t k = 0; rp->sampled && k < np; k++)
        ns += rp->sampled[k] != 0;
    for (size_t i = 0; i < nf; i++)
        nk += !rp->keep || rp->keep[i];
    gmm_hmc_chains *r = gmm_calloc(1, sizeof *r);
    run_ctx rc;
    memset(&rc, 0, sizeof rc);
    pthread_t *th = gmm_calloc(nthread, sizeof *th);
    worker *wk = gmm_calloc(nthread, sizeof *wk);
    if (r) {
        r->nchain = rp->nchain;
        r->ncol = GMM_HMC_NSAMPLER + ns + nk +
                  (rp->states ? gmm_latent_dim(gmm_problem_latent(p)) : 0) +
                  (rp->log_lik ? gmm_problem_nobs(p) : 0);
        r->kept = rp->hmc.draws;
        r->tmp = gmm_calloc(rp->nchain, sizeof *r->tmp);
        r->info = gmm_calloc(rp->nchain, sizeof *r->info);
        r->metric = gmm_calloc(rp->nchain, sizeof *r->metric);
    }
    rc.rp = rp;
    rc.r = r;
    rc.status = gmm_calloc(rp->nchain, sizeof *rc.status);
    rc.msg = gmm_calloc(rp->nchain, sizeof *rc.msg);
    if (!r || !r->tmp || !r->info || !r->metric || !rc.status || !rc.msg || !th || !wk) {
        s = gmm_error(GMM_ENOMEM, "out of memory for %zu chains", rp->nchain);
        goto done;
    }
    for (size_t c = 0; c < rp->nchain; c++) {
        r->info[c].id = rp->chain0 + c;
        if (!(r->tmp[c] = tmpfile())) {
            s = gmm_error(GMM_EIO, "cannot create a temporary file: %s", strerror(errno));
            goto done;
        }
    }
    pthread_mutex_init(&rc.lock, NULL);
    size_t started = 1;
    for (size_t t = 0; t < nthread; t++) {
        wk[t] = (worker){&rc, probs[t]};
        /* a thread that cannot start leaves its chains to the others */
        if (t > 0 && !pthread_create(&th[t], NULL, work, &wk[t]))
            started = t + 1;
        else if (t > 0)
            break;
    }
    work(&wk[0]);
    for (size_t t = 1; t < started; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_destroy(&rc.lock);
    for (size_t c = 0; c < rp->nchain; c++)
        if (rc.status[c] != GMM_OK && rc.status[c] != GMM_ECANCEL) {
            s = gmm_error(rc.status[c], "chain %llu: %s", (unsigned long long)r->info[c].id,
                          rc.msg[c]);
            goto done;
        }
    if (rc.cancel && (s = cut_chains(r)) == GMM_OK)
        s = GMM_ECANCEL;
done:
    gmm_free(th);
    gmm_free(wk);
    gmm_free(rc.status);
    gmm_free(rc.msg);
    if (s != GMM_OK && s != GMM_ECANCEL) {
        gmm_hmc_chains_free(r);
        return s;
    }
    *out = r;
    return s;
}

size_t gmm_hmc_chains_count(const gmm_hmc_chains *r) { return r->nchain; }
size_t gmm_hmc_chains_ncol(const gmm_hmc_chains *r) { return r->ncol; }
size_t gmm_hmc_chains_kept(const gmm_hmc_chains *r) { return r->kept; }
int gmm_hmc_chains_cut(const gmm_hmc_chains *r) { return r->cut; }

const gmm_hmc_chain_info *gmm_hmc_chains_info(const gmm_hmc_chains *r, size_t c)
{
    return c < r->nchain ? &r->info[c] : NULL;
}

int gmm_hmc_chains_has_draws(const gmm_hmc_chains *r, size_t c)
{
    return c < r->nchain && r->info[c].ndone > 0 && r->kept > 0;
}

gmm_status gmm_hmc_chains_replay(const gmm_hmc_chains *r, size_t c, const gmm_hmc_sink *sk)
{
    if (!gmm_hmc_chains_has_draws(r, c))
        return GMM_OK;
    const gmm_hmc_chain_info *ci = &r->info[c];
    FILE *t = r->tmp[c];
    if (fflush(t) || fseek(t, 0, SEEK_SET))
        return gmm_error(GMM_EIO, "temporary file of the chains: %s", strerror(errno));
    double *row = gmm_malloc(r->ncol, sizeof *row);
    if (!row)
        return gmm_error(GMM_ENOMEM, "out of memory");
    gmm_status s = sk->begin ? sk->begin(sk->user, ci) : GMM_OK;
    for (size_t k = 0; k < r->kept && s == GMM_OK; k++)
        if ((s = read_row(t, row, r->ncol)) == GMM_OK)
            s = sk->row(sk->user, ci, k + 1, row, r->ncol);
    if (s == GMM_OK && sk->end)
        s = sk->end(sk->user, ci);
    gmm_free(row);
    return s;
}

gmm_status gmm_hmc_chains_write(const gmm_hmc_chains *r, const gmm_hmc_sink *s)
{
    gmm_status st = GMM_OK;
    for (size_t c = 0; c < r->nchain && st == GMM_OK; c++)
        st = gmm_hmc_chains_replay(r, c, s);
    return st;
}

typedef struct {
    gmm_hmc_chain_diag *d;
    unsigned max_depth;
    double *energy;
} diag_ctx;

static gmm_status diag_row(void *user, const gmm_hmc_chain_info *c, size_t it, const double *row,
                           size_t ncol)
{
    (void)c;
    (void)ncol;
    diag_ctx *x = user;
    /* row: lp__, accept_stat__, stepsize__, treedepth__, n_leapfrog__,
     * divergent__, energy__ */
    x->d->depth_hits += row[3] >= (double)x->max_depth;
    x->d->divergences += row[5] != 0.0;
    x->energy[it - 1] = row[6];
    x->d->draws = it;
    return GMM_OK;
}

gmm_status gmm_hmc_chains_diagnose(const gmm_hmc_chains *r, size_t c, unsigned max_depth,
                                   gmm_hmc_chain_diag *d)
{
    memset(d, 0, sizeof *d);
    d->ebfmi = NAN;
    if (!gmm_hmc_chains_has_draws(r, c))
        return GMM_OK;
    diag_ctx x = {d, max_depth, gmm_malloc(r->kept, sizeof *x.energy)};
    if (!x.energy)
        return gmm_error(GMM_ENOMEM, "out of memory for %zu draws", r->kept);
    gmm_hmc_sink sk = {NULL, diag_row, NULL, &x};
    gmm_status s = gmm_hmc_chains_replay(r, c, &sk);
    if (s == GMM_OK && d->draws > 1) {
        double mean = 0.0, num = 0.0, den = 0.0;
        for (size_t k = 0; k < d->draws; k++)
            mean += x.energy[k];
        mean /= (double)d->draws;
        for (size_t k = 0; k < d->draws; k++) {
            double e = x.energy[k] - mean;
            den += e * e;
            if (k > 0) {
                double de = x.energy[k] - x.energy[k - 1];
                num += de * de;
            }
        }
        if (den > 0.0)
            d->ebfmi = num / den;
    }
    gmm_free(x.energy);
    return s;
}
