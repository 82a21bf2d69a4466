/* ssm_wls.c -- weighted Gaussian smoothing in the square-root form, the
 * Newton step of the Laplace approximation (ssm.h, WEIGHTED SMOOTHING).
 *
 * Row r with weight w_r > 0 enters the fold as the row sqrt(w_r) h_r' with
 * datum sqrt(w_r) y_r and unit noise: the heteroscedastic problem is the
 * homoscedastic one of marglik.h with per-row coefficients, so the fold,
 * its tape and its row moments serve unchanged.
 *
 * ADJOINT.  The Laplace gradient's implicit term is zeta' d(H'g - Q x)/dtheta
 * with zeta = P^-1 r (laplace.c): its prior part -zeta' dQ x is, in the
 * square root's rows v = C (x_{k+1} - A x_k), the derivative of -sum_k
 * v_zeta . v_x, i.e. of -1/2 (|v_{x+zeta}|^2 - |v_x|^2 - |v_zeta|^2).  ROWS
 * GRADIENT (ssm_prior.c) maps second moments E[v v'] and E[v x_k'] to the
 * gradient linearly, so this term adds v_zeta v_x' + v_x v_zeta' to the
 * first sums and v_zeta x_k' + v_x zeta_k' to the second before the chain.
 * v_x and v_zeta come from the fold's inverse map (marglik.h, ROW MEANS),
 * never as C times a difference of nearly equal states.
 *
 * ROWS THAT VARY.  A demodulated kernel's row h(t_r) depends on theta (the
 * period): the fold takes each row's own h at theta, and the Laplace
 * gradient in h (laplace.c) needs zeta and Sigma h_r over the row's state
 * (gmm_ssm_wls_rowcov).  Those are first-order in the posterior: Sigma's
 * band from the fold's factor is accurate to eps |Sigma| / sqrt(the
 * damping's innovation variance), far below what the row moments (second
 * order in the rows' large entries) would lose through it. */
#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/marglik.h"
#include "gmm/ssm.h"

#include "ssm_impl.h"

static gmm_status wls_alloc(gmm_ssm *m)
{
    if (m->lbuf)
        return GMM_OK;
    size_t n = m->n, N = m->N, d = m->d;
    m->lbuf = gmm_malloc(2 * n * d + 2 * n + 6 * N + 2 * d, sizeof *m->lbuf);
    m->lrow = gmm_malloc(n, sizeof *m->lrow);
    if (!m->lbuf || !m->lrow) {
        gmm_free(m->lbuf);
        gmm_free(m->lrow);
        m->lbuf = NULL;
        m->lrow = NULL;
        return gmm_error(GMM_ENOMEM, "out of memory for the weighted smoother");
    }
    m->lH = m->lbuf;
    m->lw = m->lH + n * d;
    m->lvar = m->lw + n;
    m->lmu = m->lvar + n;
    m->lz = m->lmu + N;
    m->lb = m->lz + N;
    m->lx = m->lb + N;
    m->lgx = m->lx + N;
    m->lhr = m->lgx + 2 * N + 2 * d;
    return GMM_OK;
}

/* Row r's observation coefficients (band order): H, or h(t_r) at the last
 * gmm_ssm_wls's theta for a demodulated kernel. */
static const double *row_h(const gmm_ssm *m, size_t r)
{
    return m->modulated ? m->lhr + r * m->d : m->Hp;
}

gmm_status gmm_ssm_wls_rows(gmm_ssm *m, const double *theta, double obs_prec, int *rows)
{
    gmm_status st;
    double logdet;
    if (!m || !theta || !rows)
        return gmm_error(GMM_EINVAL, "gmm_ssm_wls_rows: NULL argument");
    *rows = 0;
    m->prior_ok = 0;
    m->lblocks = 0;
    if ((st = ssm_blocks(m, theta, &logdet)))
        return st;
    m->bound = ssm_chol_rounding_bound(m, obs_prec);
    if (m->par.factor == GMM_SSM_FACTOR_AUTO)
        *rows = ssm_rows_rule(m, theta, GMM_SSM_CHOL_GRAD_TOL);
    else
        *rows = m->par.factor == GMM_SSM_FACTOR_ROWS;
    m->rows = *rows;
    return GMM_OK;
}

gmm_status gmm_ssm_wls(gmm_ssm *m, const double *theta, const double *y, const double *wt,
                       int record, double *loglik, double *mean)
{
    gmm_status st;
    if (!m || !y || !wt || !loglik)
        return gmm_error(GMM_EINVAL, "gmm_ssm_wls: NULL argument");
    if (!theta && !m->lblocks)
        return gmm_error(GMM_EINVAL, "gmm_ssm_wls: no theta and no gmm_ssm_wls before");
    if ((st = wls_alloc(m)))
        return st;
    /* demodulated kernels: each row's h(t_r) at theta (ROWS THAT VARY) */
    if (theta && m->modulated && (st = gmm_ssm_obs_rows(m, theta, m->lhr)))
        return st;
    m->lready = 0;
    m->lblocks = theta ? 0 : m->lblocks;
    m->ydata = 0; /* the weighted rows replace gmm_ssm_set_y's */
    m->prior_ok = 0;
    size_t d = m->d, o = 0;
    double prec = 0.0;
    for (size_t i = 0; i < m->n; i++) { /* in state order: offsets nondecreasing */
        size_t row = m->order[i];
        if (isnan(y[row]))
            continue;
        if (!(wt[row] > 0.0) || !isfinite(wt[row]) || !isfinite(y[row]))
            return gmm_error_at(GMM_EDOM, row, "weighted smoothing: row %zu has weight %g, "
                                               "datum %g",
                                row, wt[row], y[row]);
        double sw = sqrt(wt[row]);
        const double *h = row_h(m, row);
        m->obs_off[o] = m->row_state[row] * d;
        m->obs_y[o] = sw * y[row];
        for (size_t p = 0; p < d; p++)
            m->lH[o * d + p] = sw * h[p];
        m->lw[o] = wt[row];
        m->lrow[o++] = row;
        prec += wt[row];
    }
    m->nobs = o;
    m->obs.nobs = o;
    m->obs.coef = m->lH;
    m->obs.coef_stride = d;
    m->noise = 1.0;
    /* the whitening first: it moves the kernel's workspace, which the
     * gradient's chain reads as the blocks leave it */
    if (theta) {
        if ((st = gmm_ssm_whiten_setup(m, theta)) || (st = ssm_check_spacing(m, theta, 0)) ||
            (st = ssm_blocks(m, theta, &m->lld)))
            return st;
        m->bound = ssm_chol_rounding_bound(m, prec);
        m->lblocks = 1;
    }
    m->rows = 1;
    if ((st = ssm_fold(m, m->lld, record, loglik)))
        return st;
    /* a recorded smoothing's mean is kept for the adjoint */
    if (record) {
        if ((st = gmm_marglik_posterior(m->mw, m->lmu, NULL)))
            return st;
        if (mean)
            memcpy(mean, m->lmu, m->N * sizeof *mean);
    } else if (mean && (st = gmm_marglik_posterior(m->mw, mean, NULL))) {
        return st;
    }
    m->lready = record;
    return GMM_OK;
}

gmm_status gmm_ssm_wls_quad(gmm_ssm *m, const double *x, double *q)
{
    gmm_status st;
    if (!m || !x || !q)
        return gmm_error(GMM_EINVAL, "gmm_ssm_wls_quad: NULL argument");
    if (!m->lbuf)
        return gmm_error(GMM_EINVAL, "gmm_ssm_wls_quad: no gmm_ssm_wls before");
    if ((st = gmm_ssm_unwhiten(m, x, m->lx)))
        return st;
    double s = 0.0;
    for (size_t j = 0; j < m->N; j++)
        s += m->lx[j] * m->lx[j];
    *q = s;
    return GMM_OK;
}

gmm_status gmm_ssm_wls_var(gmm_ssm *m, double *fvar)
{
    gmm_status st;
    if (!m || !fvar)
        return gmm_error(GMM_EINVAL, "gmm_ssm_wls_var: NULL argument");
    if (!m->lready)
        return gmm_error(GMM_EINVAL, "gmm_ssm_wls_var: no recorded gmm_ssm_wls before");
    gmm_marglik_rows_obs_var(m->mw, m->lvar);
    if ((st = ssm_rows_moments(m, NULL)))
        return st;
    for (size_t r = 0; r < m->n; r++)
        fvar[r] = NAN;
    for (size_t o = 0; o < m->nobs; o++) /* Var(sqrt(w) h'x) = w Var(h'x) */
        fvar[m->lrow[o]] = m->lvar[o] / m->lw[o];
    return GMM_OK;
}

/* acc (d x d, band order) += a b' + c e' on the diagonal blocks (BLOCKS in
 * ssm.c: the chain reads no other entry); a and c with stride 2 (the row
 * means), b and e contiguous. */
static void outer2(const gmm_ssm *m, const double *a, const double *b, const double *c,
                   const double *e, double *acc)
{
    size_t d = m->d, nb = m->nb;
    const size_t *boff = m->boff;
    for (size_t k = 0; k < nb; k++) {
        size_t p0 = boff[k], p1 = boff[k + 1];
        for (size_t p = p0; p < p1; p++) {
            double ap = a[2 * p], cp = c[2 * p], *row = acc + p * d;
            for (size_t q = p0; q < p1; q++)
                row[q] += ap * b[q] + cp * e[q];
        }
    }
}

gmm_status gmm_ssm_wls_adjoint(gmm_ssm *m, const double *rw, double *u, double *thetabar)
{
    gmm_status st;
    if (!m || !rw || !u || !thetabar)
        return gmm_error(GMM_EINVAL, "gmm_ssm_wls_adjoint: NULL argument");
    if (!m->lready)
        return gmm_error(GMM_EINVAL, "gmm_ssm_wls_adjoint: no recorded gmm_ssm_wls before");
    size_t d = m->d, N = m->N;
    double *b = m->lb, *z = m->lz, *mu = m->lmu, *gx = m->lgx;
    memset(b, 0, N * sizeof *b);
    for (size_t o = 0; o < m->nobs; o++) {
        const double *h = row_h(m, m->lrow[o]);
        for (size_t p = 0; p < d; p++)
            b[m->obs_off[o] + p] += rw[m->lrow[o]] * h[p];
    }
    if ((st = gmm_marglik_rows_solve(m->mw, b, z, gx)))
        return st;
    for (size_t r = 0; r < m->n; r++)
        u[r] = NAN;
    for (size_t o = 0; o < m->nobs; o++) {
        const double *h = row_h(m, m->lrow[o]);
        double s = 0.0;
        for (size_t p = 0; p < d; p++)
            s += h[p] * z[m->obs_off[o] + p];
        u[m->lrow[o]] = s;
    }
    /* gx per prior row: (G_a mu, G_a zeta); rows d (k + 1) + p belong to
     * the interval from state k, the first d to C0 x_0 */
    double *vv = gx + 2 * N; /* a state's G mu, G zeta made contiguous (2 d) */
    for (size_t k = 0; k < m->K; k++) {
        const double *vx = gx + 2 * k * d, *vz = vx + 1;
        for (size_t p = 0; p < d; p++) {
            vv[p] = vx[2 * p];
            vv[d + p] = vz[2 * p];
        }
        if (k == 0) {
            outer2(m, vz, vv, vx, vv + d, m->T + 3 * d * d);
            continue;
        }
        size_t g = m->ig[k - 1];
        outer2(m, vz, vv, vx, vv + d, blk(m, g, B_S1));
        outer2(m, vz, mu + (k - 1) * d, vx, z + (k - 1) * d, blk(m, g, B_S2));
    }
    return ssm_rows_chain(m, thetabar);
}

gmm_status gmm_ssm_wls_rowcov(gmm_ssm *m, double *zeta, double *sh)
{
    gmm_status st;
    if (!m || !zeta || !sh)
        return gmm_error(GMM_EINVAL, "gmm_ssm_wls_rowcov: NULL argument");
    if (!m->lready || !m->cov)
        return gmm_error(GMM_EINVAL, "gmm_ssm_wls_rowcov: no recorded gmm_ssm_wls of a "
                                     "demodulated kernel before");
    size_t d = m->d;
    /* Sigma's band from the fold's factor: first-order in the posterior,
     * so it keeps its digits where the rows' own moments need the lanes */
    if ((st = gmm_marglik_posterior(m->mw, NULL, m->cov)))
        return st;
    memcpy(zeta, m->lz, m->N * sizeof *zeta);
    memset(sh, 0, m->n * d * sizeof *sh);
    for (size_t o = 0; o < m->nobs; o++) {
        size_t r = m->lrow[o], b = m->obs_off[o];
        const double *h = row_h(m, r);
        for (size_t i = 0; i < d; i++) {
            double v = 0.0;
            for (size_t j = 0; j < d; j++)
                v += gmm_band_get(m->cov, b + i, b + j) * h[j];
            sh[r * d + i] = v;
        }
    }
    return GMM_OK;
}
