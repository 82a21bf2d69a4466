/* vi_elbo.c -- the ELBO of q and its gradient (vi.h).
 *
 * MODEL (the paper's section 3.3 and its appendix's VI algorithm, in banded
 * form).  x ~ p = N(0, Q_p^-1) (latent.h, Q_p banded, bandwidth kl),
 * f_r = b0 + h_r' x[o_r .. o_r + width), y_r ~ p(y_r | f_r) (likelihood.h),
 * and q(x) = N(m, (L L')^-1), L a lower band of bandwidth b:
 *
 *   ELBO = sum_r E_q log p(y_r | f_r) - KL(q || p),
 *   KL   = 1/2 [tr(Sigma Q_p) + m'Q_p m - n - log|Q_p| + log|L L'|],
 *
 * Sigma = (L L')^-1.  (The paper's eq. 4 is mis-bracketed; this is the KL
 * of two Gaussians.)  E_q log p(y_r | f_r) depends on q only through
 * mu_r = b0 + h_r' m_o and s2_r = h_r' Sigma_oo h_r, and tr(Sigma Q_p) on
 * Sigma inside Q_p's band: both come from the Takahashi inverse subset of
 * L on a band of width max(b, width - 1, kl) (gmm_band_chol_selinv).
 *
 * PRIOR TERMS.  Graphs use the assembled Q_p (gmm_latent_prior; log|Q_p|
 * from a banded Cholesky of it).  State-space models use the prior's
 * square root, Q_p = G'G (gmm_latent_prior_rows): m'Q_p m = |G m|^2,
 * log|Q_p| from the rows, tr(Sigma Q_p) = n + tr(Sigma D) with D = G'G -
 * L L' in double-double (WHY D), and the hyperparameter gradient from the
 * moments of the whitened rows G x under q (WHITENED MOMENTS).  So there
 * is no spacing limit (the assembled Q_p is refused below the Cholesky's
 * limits, ssm.h) and the ELBO and its gradient keep their digits at close
 * inputs (ACCURACY).
 *
 * FORWARD.  With Sigma = (L L')^-1 on the band l' = max(b, width - 1, kl)
 * (gmm_band_chol_selinv), for each observed row r: mu_r = X_r beta + h_r' m_o,
 * s2_r = h_r' Sigma_oo h_r, E_r = E_{N(mu_r, s2_r)} log p(y_r | f) with
 * a_r = dE_r/dmu_r, c_r = dE_r/ds2_r (gmm_lik_expect).  The KL is
 *
 *   KL = 1/2 [tr(Sigma D) + m'Q m - log|Q| + log|L L'|],   D = Q - L L',
 *
 * using tr(Sigma Q) = n + tr(Sigma D) (Sigma L L' = I); D lives on the band
 * max(kl, b).  log|L L'| = 2 sum_j lambda_jj (the stored log-diagonal);
 * log|Q| from the family, or from a banded Cholesky of Q (graphs).
 * Assembled (graphs): D = Q - L L' in double, m'Q m by gmm_band_gemv.
 * Rows (state-space, Q = G'G): D = sum_i g_i g_i' - L L' accumulated in
 * double-double (fma products, TwoSum), rounded once; m'Q m = sum_i r_i^2,
 * r_i = g_i'm in double-double.
 *
 * WHY D.  Near the posterior, L L' ~ Q + H'WH, so D ~ -H'WH has entries of
 * the data's size while Q's grow like (lengthscale / spacing)^(2 nu + 1)
 * (state-space): tr(Sigma Q) is a sum of such entries cancelling to O(n),
 * so any error in Q's entries or in the sum costs eps (l/dt)^(2 nu + 1).
 * The double-double D has no such error beyond the rows' own (G's entries
 * ~ (l/dt)^(nu + 1/2), the square root's digits), and tr(Sigma D) no
 * cancellation.  The gradient in L gains likewise (below: -D/2 in
 * Sigmabar instead of -Q/2, and no -1/L_jj from the entropy to cancel).
 *
 * REVERSE.  ELBO = sum_r E_r - KL.  In Sigma (full-matrix gradient; band.h's
 * symmetric convention doubles the off-diagonals when stored), with D held
 * fixed -- its own dependence on L, -tr(Sigma (dL L' + L dL'))/2 =
 * -sum_j dL_jj / L_jj, cancels the entropy's +sum_j dL_jj / L_jj
 * exactly (L^-1 is lower triangular):
 *
 *   Sigmabar = sum_r c_r h_r h_r'  -  D / 2
 *   mbar     = sum_r a_r h_r       -  Q m            (= - sum_i r_i g_i)
 *   Lbar     = selinv_rev(L, Sigma, Sigmabar)        (gmm_band_chol_selinv_rev)
 *   lambdabar_jj = L_jj Lbar_jj                      (log-diagonal)
 *
 * In the hyperparameters: Qbar = -(Sigma + m m') / 2 on Q's band and
 * log|Q|bar = 1/2, through gmm_latent_prior_rev (and, when the family gives
 * no log|Q|, the Cholesky's reverse mode first); with rows, the prior's
 * terms are E_q[log p(x | theta)] and their gradient comes from the
 * moments of the whitened rows v = G x under q (WHITENED MOMENTS) through
 * gmm_latent_prior_rows_rev_moments; b0bar = sum_r a_r; phibar =
 * sum_r dE_r/dphi; hbar_r = a_r m_o + 2 c_r Sigma_oo h_r through
 * gmm_latent_obs_coef_rev.  Forward saves L, Sigma, D, a_r, c_r (and Q, or
 * the rows' moments computed while the rows are read).
 *
 * WHITENED MOMENTS.  Per segment t of G (the d transition rows v_t = C
 * (x_t - A x_{t-1}), or C0 x_0) the prior's chain (ssm_prior.c, ROWS
 * GRADIENT) needs E_q[v v'] = r r' + Cov(v) and E_q[v x_{t-1}'] = r m' +
 * Cov(v, x_{t-1}), r = G_t m, all of order 1.  Cov(v) = G_t Sigma G_t' from
 * Sigma's band would cancel entries ~ |G|^2 |Sigma| ~ (l/dt)^(2 nu + 1)
 * down to 1 and keep eps (l/dt)^(2 nu + 1) of error (as would a chain
 * through the rows' entries, gmm_latent_prior_rows_rev).  Instead, with J
 * the segment's columns
 * and F the b latents after them, L'(x - m) = e ~ N(0, I) gives x_J - m_J
 * = -L_JJ^-T L_FJ' (x_F - m_F) + L_JJ^-T e_J with e_J independent of x_F,
 * so with Z = G_J L_JJ^-T (a forward solve per row) and U = -Z L_FJ',
 *
 *   Cov(v)          = U Sigma_FF U' + Z Z',
 *   Cov(v, x_J)     = (Z - U Sigma_FF L_FJ) L_JJ^-1,
 *
 * sums of products of order-1 factors (U is small where q follows the
 * prior's dynamics, Z of order 1).  O(d (kl + b)^2) per segment, b = q's
 * bandwidth.  r = G m and the rows' share -G'r of mbar are summed in
 * double-double: G'r cancels terms ~ |G| |r| down to the data's size.
 *
 * CONSTRAINTS.  A latent with constraints A x = 0 (gmm_latent_nconstr,
 * intrinsic components of a stack) has its prior on that subspace; q is
 * then N(m, (L L')^-1) conditioned on A x = 0 (kriging under q's own
 * precision, constr.h without pins), and the ELBO is that of the two
 * Gaussians on the subspace, a bound of the constrained marginal
 * likelihood (marglik.h), equal to it at the Gaussian posterior:
 *
 *   KL = 1/2 [tr(Sigma_c Q_p) + m_c'Q_p m_c - (n - k) - log|Q_p|_c
 *             + log|L L'| + log|A Sigma A'|],
 *
 * log|Q_p|_c the prior's generalised determinant (latent.h); O(n (b + l')
 * k) more per evaluation.  m and L are then defined up to directions that
 * do not move the conditioned q; the state keeps m as q's mean m_c.
 * q's moments are m_c = krig(m) and
 * Sigma_c = Sigma - V V' on the band (constr.h, gmm_constr_krig and
 * gmm_constr_band, no pins: L L' is positive definite), and the above holds
 * with them in place of m and Sigma: tr(Sigma_c L L') = n - k, so tr(Sigma_c
 * Q) - (n - k) = tr(Sigma_c D).  The entropy adds log|A Sigma A'| / 2 to the
 * KL (log det(V'PV) = log|P| + log|A Sigma A'| - log|AA'|, the same
 * convention as the prior's log|Q|_c).  REVERSE: d/dP of -log det(V'PV)/2
 * is -Sigma_c/2 and of tr(Sigma_c P)/2 with Sigma_c fixed +Sigma_c/2, so, as
 * without constraints, the entropy and D's dependence on L cancel, leaving
 * Sigmabar_c = sum_r c_r h_r h_r' - D/2 and m_cbar = sum_r a_r h_r - Q m_c;
 * gmm_band_chol_selinv_rev takes the first through Sigma's band,
 * gmm_constr_rev the rest (through V, G and the kriged mean; constr.c,
 * GRADIENT) and m_cbar back to mbar.  The start's P = Q_p + H'WH may be
 * singular off the subspace (two intrinsic terms read through their sum;
 * the prior start always is): it then gets constr.h's pins.
 *
 * ORDER OF LATENT CALLS.  obs_coef, then prior (or prior_rows); the
 * reverse: prior_rev right after (latent.h pairs them), then obs_coef_rev.
 *
 * EXPECTATIONS of the families without a closed form (bernoulli,
 * negbinomial) use Gauss-Hermite rules (gmm_lik_expect), whose error grows
 * with s2 (likelihood.h's table).  nquad = 0 chooses per row from s2: 20
 * points up to s2 = 0.4, 40 up to 1, 100 beyond (from that table: about
 * 1e-11 relative or better up to s2 = 4, 1e-7 at s2 = 9).  The derivative
 * in s2 is the rule's E[d2 log p] / 2, equal to the derivative of the
 * rule's value up to the rule's own error.  The fit holds each row's rule
 * through a line search (vi_fit.c, RULES).  A fixed rule's accuracy
 * depends on the variances s2_r, so no nquad is accurate for every data
 * set: gmm_vi_quad_error compares the rule with one of twice the points,
 * which is the more accurate for these smooth integrands.
 *
 * ACCURACY.  test_vi_close_inputs checks the ELBO against a binary128 dense
 * evaluation at input spacings down to 1e-6 lengthscales; docs/accuracy.md
 * has the figures.
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
#include "vi_impl.h"

/* ---- one evaluation ----------------------------------------------------------- */

/* The likelihood's parameters and the coefficients at theta. */
gmm_status vi_set_hyper(gmm_vi *v, const double *theta)
{
    gmm_status st;
    v->lik = *gmm_problem_lik(v->prob);
    for (size_t k = 0; k < v->np; k++) {
        double t = theta[v->nl + k];
        if (!isfinite(t) || !(t > 0.0))
            return gmm_error_at(GMM_EDOM, v->nl + k, "%s = %g must be positive and finite",
                                gmm_problem_objective(v->prob)->name[v->nl + k], t);
        v->lik.par[k] = t;
    }
    for (size_t k = v->c0; k < v->nparam; k++)
        if (!isfinite(theta[k]))
            return gmm_error_at(GMM_EDOM, k, "%s = %g is not finite",
                                gmm_problem_objective(v->prob)->name[k], theta[k]);
    if (v->ncoef) {
        gmm_problem_offsets(v->prob, theta, v->offs);
        for (size_t i = 0; i < v->nobs; i++)
            v->oshift[i] = v->offs[v->orow[i]];
    }
    if ((st = gmm_latent_theta_check(v->lat, theta)))
        return st;
    if (v->varies) {
        if ((st = gmm_latent_obs_values(v->lat, theta, v->coef_all)))
            return st;
        gather_coef(v);
    }
    return GMM_OK;
}

/* The automatic rule's points at variance s2 (EXPECTATIONS, above). */
static size_t auto_rule(double s2) { return s2 <= 0.4 ? 20 : s2 <= 1.0 ? 40 : 100; }

/* E log p(y_i | f) of observed row i under N(mu, s2), with its prior
 * weight when the rows have weights (gmm_lik_expect_weighted). */
static gmm_status vi_expect(gmm_vi *v, size_t i, double mu, double s2, size_t nquad,
                            double out[3], double *dpar)
{
    if (v->ow)
        return gmm_lik_expect_weighted(&v->lik, v->oy[i], v->oe[i], v->ow[i], mu, s2, nquad, out,
                                       dpar);
    return gmm_lik_expect(&v->lik, v->oy[i], v->oe[i], mu, s2, nquad, out, dpar);
}

/* Gauss-Hermite points for row i at variance s2 (EXPECTATIONS, above). */
size_t vi_rule_of(gmm_vi *v, size_t i, double s2)
{
    if (v->par.nquad)
        return v->par.nquad;
    if (!v->freeze || !v->rule[i])
        v->rule[i] = (unsigned char)(auto_rule(s2) / 4);
    return 4 * (size_t)v->rule[i];
}

/* The expectations: sum_r E_r into *sum; mu, s2, a, c per row and the
 * summed parameter derivatives.  With gl, Sigmabar += c_r h h' and lambar's
 * m part += a_r h. */
static gmm_status expectations(gmm_vi *v, const gmm_band *S, const double *m, double *sum,
                               double *mbar, int gl)
{
    double out[3], dp[GMM_LIK_MAXPARAM], acc = 0.0;
    memset(v->dpar, 0, GMM_LIK_MAXPARAM * sizeof *v->dpar);
    for (size_t i = 0; i < v->nobs; i++) {
        size_t k0 = v->orowptr[i], k1 = v->orowptr[i + 1];
        const double *h = v->ocoef;
        double mu = v->oshift[i], s2 = 0.0;
        for (size_t a = k0; a < k1; a++) {
            if (h[a] == 0.0)
                continue;
            size_t ia = entry_at(v, i, a);
            mu += h[a] * m[ia];
            double t = 0.0;
            for (size_t c = k0; c < k1; c++)
                t += gmm_band_get(S, ia, entry_at(v, i, c)) * h[c];
            s2 += h[a] * t;
        }
        if (s2 < 0.0) /* rounding of a variance that is ~0 against Sigma's entries */
            s2 = 0.0;
        gmm_status st = vi_expect(v, i, mu, s2, vi_rule_of(v, i, s2), out, v->np ? dp : NULL);
        if (st)
            return st;
        v->mu[i] = mu;
        v->s2[i] = s2;
        v->ea[i] = out[1];
        v->ec[i] = out[2];
        acc += out[0];
        for (size_t k = 0; k < v->np; k++)
            v->dpar[k] += dp[k];
        if (!gl)
            continue;
        for (size_t a = k0; a < k1; a++) { /* entries in increasing latent */
            if (h[a] == 0.0)
                continue;
            size_t ia = entry_at(v, i, a);
            mbar[ia] += out[1] * h[a];
            *gmm_band_ptr(v->Sbar, ia, ia) += out[2] * h[a] * h[a];
            for (size_t c = k0; c < a; c++)
                *gmm_band_ptr(v->Sbar, ia, entry_at(v, i, c)) += 2.0 * out[2] * h[a] * h[c];
        }
    }
    *sum = acc;
    return GMM_OK;
}

/* (hi, lo) += a c exactly up to the low part's rounding: the product split
 * by fma (TwoProduct), the sum by Knuth's TwoSum. */
static inline void dd_add_prod(double *hi, double *lo, double a, double c)
{
    double p = a * c, pe = fma(a, c, -p);
    double t = *hi + p, z = t - *hi;
    *lo += ((*hi - (t - z)) + (p - z)) + pe;
    *hi = t;
}

/* One segment's moments of the whitened rows under q (WHITENED MOMENTS):
 * the segment's rows (rw, width w[a] from first[a], ldr = kl + 1), their
 * values r at m (double-double, rh + rl), into Svv (seg x seg) and Svx
 * (seg x seg, E[v x_{prev}'], prev the latents from pcol; NULL: none). */
static void seg_moments(gmm_vi *v, const double *rows, const size_t *first, const size_t *w,
                        const double *rh, const double *m, size_t pcol, double *Svv,
                        double *Svx)
{
    size_t s = v->seg, n = v->n, b = v->b, ldr = v->kl + 1;
    size_t j0 = first[0], j1 = 0;
    for (size_t a = 0; a < s; a++)
        if (first[a] + w[a] - 1 > j1)
            j1 = first[a] + w[a] - 1;
    size_t nJ = j1 - j0 + 1, nF = j1 + 1 + b <= n - 1 ? b : n - 1 - j1;
    double *LJ = v->rw + s * ldr + 2 * s, *LF = LJ + nJ * nJ, *Z = LF + b * nJ;
    double *U = Z + s * nJ, *SU = U + s * b, *wv = SU + b, *SF = wv + nJ;
    for (size_t c = 0; c < nJ; c++) { /* L_JJ, L_FJ (row-major) from L's columns */
        const double *lc = gmm_band_col(v->L, j0 + c);
        for (size_t a = 0; a < nJ; a++)
            LJ[a * nJ + c] = c <= a && a - c <= b ? lc[j0 + a] : 0.0;
        for (size_t f = 0; f < nF; f++)
            LF[f * nJ + c] = j1 + 1 + f - (j0 + c) <= b ? lc[j1 + 1 + f] : 0.0;
    }
    for (size_t f = 0; f < nF; f++) { /* Sigma_FF */
        const double *sc = gmm_band_col(v->S, j1 + 1 + f);
        for (size_t e = f; e < nF; e++)
            SF[f * nF + e] = SF[e * nF + f] = sc[j1 + 1 + e];
    }
    for (size_t a = 0; a < s; a++) {
        double *z = Z + a * nJ, *u = U + a * b;
        for (size_t c = 0; c < nJ; c++) { /* L_JJ z = g_a on J */
            double t = first[a] <= j0 + c && j0 + c < first[a] + w[a]
                           ? rows[a * ldr + (j0 + c - first[a])]
                           : 0.0;
            for (size_t e = 0; e < c; e++)
                t -= LJ[c * nJ + e] * z[e];
            z[c] = t / LJ[c * nJ + c];
        }
        for (size_t f = 0; f < nF; f++) { /* u = -L_FJ z */
            double t = 0.0;
            for (size_t c = 0; c < nJ; c++)
                t -= LF[f * nJ + c] * z[c];
            u[f] = t;
        }
    }
    for (size_t a = 0; a < s; a++) {
        const double *za = Z + a * nJ, *ua = U + a * b;
        for (size_t f = 0; f < nF; f++) { /* SU = Sigma_FF u_a */
            double t = 0.0;
            for (size_t e = 0; e < nF; e++)
                t += SF[f * nF + e] * ua[e];
            SU[f] = t;
        }
        for (size_t c = 0; c <= a; c++) {
            const double *zc = Z + c * nJ, *uc = U + c * b;
            double t = 0.0;
            for (size_t e = 0; e < nJ; e++)
                t += za[e] * zc[e];
            for (size_t f = 0; f < nF; f++)
                t += uc[f] * SU[f];
            Svv[a * s + c] = Svv[c * s + a] = t + rh[a] * rh[c];
        }
        if (!Svx)
            continue;
        /* Cov(v_a, x_J) = (z_a - L_FJ' Sigma_FF u_a)' L_JJ^-1 */
        for (size_t c = 0; c < nJ; c++) {
            double t = za[c];
            for (size_t f = 0; f < nF; f++)
                t -= LF[f * nJ + c] * SU[f];
            wv[c] = t;
        }
        for (size_t c = nJ; c-- > 0;) {
            double t = wv[c];
            for (size_t f = c + 1; f < nJ; f++)
                t -= LJ[f * nJ + c] * wv[f];
            wv[c] = t / LJ[c * nJ + c];
        }
        for (size_t q = 0; q < s; q++) {
            size_t col = pcol + q;
            Svx[a * s + q] = rh[a] * m[col] + (col >= j0 && col <= j1 ? wv[col - j0] : 0.0);
        }
    }
}

/* The prior's terms from its rows: D = G'G in double-double (D, Dlo), m'Q m
 * and the rows' share of mbar from r_i = g_i'm in double-double (gl), the
 * whitened moments per segment into Smo (gt). */
static void rows_terms(gmm_vi *v, const gmm_prior_rows *G, const double *m, double *mqm,
                       double *mbar, int gl, int gt)
{
    size_t s = v->seg, ldr = v->kl + 1, nseg = G->nrows / s, ss = s * s;
    double *rows = v->rw, *rh = rows + s * ldr, *rl = rh + s, q = 0.0;
    size_t *first = v->rfirst, *w = first + s;
    gmm_band_set_zero(v->D);
    gmm_band_set_zero(v->Dlo);
    if (gl) {
        memset(v->tmp, 0, v->n * sizeof *v->tmp);
        memset(v->mlo, 0, v->n * sizeof *v->mlo);
    }
    for (size_t t = 0; t < nseg; t++) {
        for (size_t a = 0; a < s; a++) {
            size_t i = t * s + a, f;
            double *g = rows + a * ldr;
            size_t wi = w[a] = G->row(G->ctx, i, &f, g);
            first[a] = f;
            double th = 0.0, tl = 0.0;
            for (size_t c = 0; c < wi; c++) {
                dd_add_prod(&th, &tl, g[c], m[f + c]);
                double *dh = gmm_band_col(v->D, f + c), *dl = gmm_band_col(v->Dlo, f + c);
                for (size_t e = c; e < wi; e++) /* (f + e, f + c), e >= c */
                    dd_add_prod(dh + f + e, dl + f + e, g[e], g[c]);
            }
            /* (th, tl) renormalised: r_i to double-double */
            rh[a] = th + tl;
            rl[a] = tl - (rh[a] - th);
            q += rh[a] * rh[a] + 2.0 * rh[a] * rl[a];
            if (gl)
                for (size_t c = 0; c < wi; c++) { /* -G'r, its cancellation in double-double */
                    dd_add_prod(v->tmp + f + c, v->mlo + f + c, g[c], -rh[a]);
                    v->mlo[f + c] -= g[c] * rl[a];
                }
        }
        if (gt && !v->qrev)
            seg_moments(v, rows, first, w, rh, m, t ? (t - 1) * s : 0, v->Smo + t * ss,
                        t ? v->Smo + (nseg + t) * ss : NULL);
    }
    if (gl)
        for (size_t j = 0; j < v->n; j++)
            mbar[j] += v->tmp[j] + v->mlo[j];
    *mqm = q;
}

/* D -= L L' on D's band: in double-double into (D, Dlo) and rounded into D
 * (rows), or in double (assembled, D = Q on entry).  O(n b^2). */
static void sub_llt(gmm_vi *v)
{
    size_t n = v->n, b = v->b;
    for (size_t k = 0; k < n; k++) {
        const double *l = gmm_band_col(v->L, k);
        size_t imax = k + b < n ? k + b : n - 1;
        for (size_t j = k; j <= imax; j++) {
            double *dh = gmm_band_col(v->D, j), lj = -l[j];
            if (v->rows) {
                double *dl = gmm_band_col(v->Dlo, j);
                for (size_t i = j; i <= imax; i++) /* (i, j), i >= j */
                    dd_add_prod(dh + i, dl + i, l[i], lj);
            } else {
                for (size_t i = j; i <= imax; i++)
                    dh[i] += l[i] * lj;
            }
        }
    }
    if (!v->rows)
        return;
    for (size_t j = 0; j < n; j++) {
        double *dh = gmm_band_col(v->D, j);
        const double *dl = gmm_band_col(v->Dlo, j);
        size_t imax = j + v->dk < n ? j + v->dk : n - 1;
        for (size_t i = j; i <= imax; i++)
            dh[i] += dl[i];
    }
}

gmm_status gmm_vi_elbo(gmm_vi *v, const double *theta, const double *lambda, double *elbo,
                       double *lambar, double *thetabar)
{
    gmm_status st;
    if (!v || !theta || !lambda || !elbo)
        return gmm_error(GMM_EINVAL, "gmm_vi_elbo: NULL argument");
    size_t n = v->n;
    int gl = lambar != NULL, gt = thetabar != NULL;
    const double *m = lambda;
    double ldp = NAN, tr, mqm, sumE;
    double *mbar = lambar;
    gmm_prior_rows G;
    if ((st = vi_set_hyper(v, theta)) || (st = vi_unpack(v, lambda)))
        return st;
    /* the prior at theta */
    v->logdet_here = 0;
    if (v->rows) {
        if ((st = gmm_latent_prior_rows(v->lat, theta, &G, &ldp)))
            return st;
    } else {
        if ((st = gmm_latent_prior(v->lat, theta, v->Q, &ldp)))
            return st;
        if (isnan(ldp)) {
            if ((st = gmm_factor_decomp(v->fQ, v->Q)))
                return st;
            ldp = gmm_factor_logdet(v->fQ);
            v->logdet_here = 1;
        }
    }
    if ((st = gmm_band_chol_selinv(v->L, v->S)))
        return st;
    /* q's moments on the subspace (CONSTRAINTS): mq, Sq and mqbar */
    const gmm_band *Sq = v->S;
    const double *mq = m;
    double *mqbar = mbar, ldg = 0.0;
    if (v->con) {
        if ((st = vi_constrained_band(v)))
            return st;
        memcpy(v->mc, m, n * sizeof *m);
        gmm_constr_krig(v->con, v->mc);
        ldg = gmm_constr_logdet(v->con);
        Sq = v->Sc;
        mq = v->mc;
        mqbar = v->mcbar;
    }
    if (gl) {
        memset(mqbar, 0, n * sizeof *mqbar);
        gmm_band_set_zero(v->Sbar);
    }
    if ((st = expectations(v, Sq, mq, &sumE, mqbar, gl)))
        return st;
    if (v->rows) {
        rows_terms(v, &G, mq, &mqm, mqbar, gl, gt);
        /* rows that hold the pins (Q + tau E_S E_S', constraints: latent.h,
         * gmm_latent_prior_rows_pins) give D, m'Qm and -Qm without them */
        double tau = v->con ? gmm_latent_prior_rows_pins(v->lat) : 0.0;
        const size_t *pin = gmm_latent_constraint_pins(v->lat);
        for (size_t i = 0; tau > 0.0 && i < gmm_latent_nconstr(v->lat); i++) {
            size_t s = pin[i];
            *gmm_band_ptr(v->D, s, s) -= tau;
            mqm -= tau * mq[s] * mq[s];
            if (gl)
                mqbar[s] += tau * mq[s];
        }
    } else {
        if ((st = gmm_band_copy_band(v->D, v->Q)) ||
            (st = gmm_band_gemv(GMM_NOTRANS, 1.0, v->Q, mq, 0.0, v->tmp)))
            return st;
        mqm = 0.0;
        for (size_t j = 0; j < n; j++)
            mqm += mq[j] * v->tmp[j];
        if (gl)
            for (size_t j = 0; j < n; j++)
                mqbar[j] -= v->tmp[j];
        if (gt) {
            gmm_band_set_zero(v->Qbar);
            if ((st = gmm_band_dot_rev(Sq, v->Q, -0.5, NULL, v->Qbar)))
                return st;
        }
    }
    /* tr(Sigma_c Q) - (n - k) = tr(Sigma_c D), D = Q - L L' (ACCURACY,
     * CONSTRAINTS) */
    sub_llt(v);
    tr = gmm_band_dot(Sq, v->D);
    if (gl && (st = gmm_band_dot_rev(Sq, v->D, -0.5, v->Sbar, NULL)))
        return st;
    double kl = 0.5 * (tr + mqm - ldp + v->ldq + ldg), val = sumE - kl;
    if (!isfinite(val))
        return gmm_error(GMM_EDOM, "vi: ELBO not finite (expectations %g, KL %g)", sumE, kl);
    if (gl) {
        gmm_band_set_zero(v->Lbar);
        if (v->con) {
            memset(mbar, 0, n * sizeof *mbar);
            if ((st = gmm_constr_rev(v->con, v->L, m, v->mc, v->mcbar, v->Sbar, v->Lbar, mbar)))
                return st;
        }
        if ((st = gmm_band_chol_selinv_rev(v->L, v->S, v->Sbar, v->Lbar)))
            return st;
        memcpy(lambar + n, v->Lbar->data, gmm_band_size(n, v->b, 0) * sizeof *lambar);
        gmm_band lb;
        if ((st = gmm_band_view(&lb, lambar + n, n, v->b, 0, GMM_BAND_LOWER)))
            return st;
        for (size_t j = 0; j < n; j++) {
            double *d = gmm_band_ptr(&lb, j, j);
            *d *= *gmm_band_ptr(v->L, j, j);
        }
    }
    if (gt) {
        memset(thetabar, 0, v->nparam * sizeof *thetabar);
        if (v->rows && v->qrev) {
            if ((st = gmm_latent_prior_rows_rev_q(v->lat, Sq, mq, v->D, thetabar)))
                return st;
        } else if (v->rows) {
            size_t nseg = v->nrowsG / v->seg;
            if ((st = gmm_latent_prior_rows_rev_moments(
                     v->lat, v->Smo, v->Smo + nseg * v->seg * v->seg, thetabar)))
                return st;
        } else {
            if ((st = gmm_band_outer(-0.5, 1, mq, n, mq, n, v->Qbar)))
                return st;
            if (v->logdet_here) {
                const gmm_band *KQ = gmm_factor_band_chol(v->fQ);
                gmm_band_set_zero(v->Kbar);
                if ((st = gmm_band_chol_logdet_rev(KQ, 0.5, v->Kbar)) ||
                    (st = gmm_band_chol_decomp_rev_work(KQ, v->Kbar, v->Qbar, v->cwork)))
                    return st;
            }
            if ((st = gmm_latent_prior_rev(v->lat, v->Qbar, v->logdet_here ? 0.0 : 0.5,
                                           thetabar)))
                return st;
        }
        for (size_t k = 0; k < v->np; k++)
            thetabar[v->nl + k] = v->dpar[k];
        if (v->ncoef) {
            memset(v->offs, 0, v->nrows * sizeof *v->offs);
            for (size_t i = 0; i < v->nobs; i++)
                v->offs[v->orow[i]] = v->ea[i];
            gmm_problem_offsets_rev(v->prob, v->offs, thetabar);
        }
        if (v->varies) {
            memset(v->coefbar_all, 0, gmm_obsmap_nnz(&v->map) * sizeof *v->coefbar_all);
            for (size_t i = 0; i < v->nobs; i++) {
                size_t k0 = v->orowptr[i], k1 = v->orowptr[i + 1];
                const double *h = v->ocoef;
                double *hb = v->coefbar_all + gmm_obsmap_row_lo(&v->map, v->orow[i]) - k0;
                for (size_t a = k0; a < k1; a++) {
                    size_t ia = entry_at(v, i, a);
                    double s = 0.0;
                    for (size_t c = k0; c < k1; c++)
                        s += gmm_band_get(Sq, ia, entry_at(v, i, c)) * h[c];
                    hb[a] = v->ea[i] * mq[ia] + 2.0 * v->ec[i] * s;
                }
            }
            if ((st = gmm_latent_obs_coef_rev(v->lat, theta, v->coefbar_all, thetabar)))
                return st;
        }
    }
    *elbo = val;
    return GMM_OK;
}

gmm_status gmm_vi_quad_error(gmm_vi *v, size_t nquad, double *err)
{
    gmm_status st;
    double elbo, out[3], ref[3];
    if (!v || !err)
        return gmm_error(GMM_EINVAL, "gmm_vi_quad_error: NULL argument");
    if (nquad > GMM_LIK_QUAD_MAX)
        return gmm_error(GMM_EINVAL, "vi: nquad must be 0 (automatic) or 1..%d, got %zu",
                         GMM_LIK_QUAD_MAX, nquad);
    if (!v->have_start)
        return gmm_error(GMM_EINVAL, "gmm_vi_quad_error: no state set");
    *err = 0.0;
    v->freeze = 0;
    if ((st = gmm_vi_elbo(v, v->theta, v->lambda, &elbo, NULL, NULL)))
        return st;
    for (size_t i = 0; i < v->nobs; i++) {
        size_t k = nquad ? nquad : auto_rule(v->s2[i]);
        size_t kr = k == GMM_LIK_QUAD_MAX ? k / 2 : 2 * k < GMM_LIK_QUAD_MAX ? 2 * k
                                                                            : GMM_LIK_QUAD_MAX;
        if ((st = vi_expect(v, i, v->mu[i], v->s2[i], k, out, NULL)) ||
            (st = vi_expect(v, i, v->mu[i], v->s2[i], kr, ref, NULL)))
            return st;
        *err += fabs(out[0] - ref[0]);
    }
    return GMM_OK;
}

gmm_status gmm_vi_quad_check(gmm_vi *v, size_t nquad, double *err, double *limit)
{
    double elbo;
    gmm_status s;
    if (!err || !limit)
        return gmm_error(GMM_EINVAL, "gmm_vi_quad_check: NULL argument");
    if ((s = gmm_vi_quad_error(v, nquad, err)) != GMM_OK ||
        (s = gmm_vi_elbo(v, gmm_vi_theta(v), gmm_vi_lambda(v), &elbo, NULL, NULL)) != GMM_OK)
        return s;
    *limit = GMM_VI_QUAD_RTOL * fmax(1.0, fabs(elbo));
    return GMM_OK;
}
