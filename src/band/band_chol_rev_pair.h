/* band_chol_rev_pair.h -- one step of the unblocked reverse sweep
 * (band_chol_rev.c), included twice there: as chol_rev_pair with plain loops
 * (any bandwidth, any position) and as chol_rev_pair_unrolled with every loop
 * unrolled (CHOL_UNROLL), for the fixed-bandwidth copies away from the ends
 * of the band.  One text, so the two cannot drift apart; both perform the
 * same operations in the same order, so their results are identical.
 *
 * Before inclusion: CHOL_REV_PAIR and CHOL_REV_FINISH name the step and its
 * column finish, CHOL_UNROLL precedes each loop.  No include guard. */

/* Finish column j: Cbar /= D and H(j,j) = (Dbar - Cbar.C / D) / D, where the
 * column's rows run j .. e.  Returns H(j,j).  With `skew` row j+1 is taken
 * alone and the pairs start at row j+2 (see ROW PAIRS in chol_rev_pair). */
BAND_INLINE double CHOL_REV_FINISH(const double *lj, double *wj, size_t j, size_t e, int skew)
{
    double inv = 1.0 / lj[j];
    pair t2 = {0.0, 0.0}, inv2 = {inv, inv};
    size_t i = j + 1;
    double t0 = 0.0;
    if (skew && i <= e) {
        t0 = wj[i] * lj[i];
        wj[i] *= inv;
        i++;
    }
    CHOL_UNROLL
    for (; i + 1 <= e; i += 2) {
        pair w = pair_load(wj + i);
        t2 += w * pair_load(lj + i);
        pair_store(wj + i, w * inv2);
    }
    double t = t0 + (t2[0] + t2[1]);
    if (i <= e) {
        t += wj[i] * lj[i];
        wj[i] *= inv;
    }
    double h = (wj[j] - t * inv) * inv;
    wj[j] = h;
    return h;
}

/* Columns p and q = p + 1 (last rows ep, eq) and the columns k = k0 .. p-1
 * to their left that both reach (k0 = q - bw, or 0), column k's last row
 * being k + bw, cut at n - 1 unless `inner` says it never reaches it.
 *
 * ROW PAIRS.  Every two-row load and store of W starts at a row of the
 * parity of p (the same for all steps of a sweep), and rows p, q of column
 * k are written back as one pair: a pair load that overlapped two separate
 * earlier stores (or half of an earlier pair) could not be forwarded from
 * the store queue and would wait for the stores to retire -- on the chain
 * from one step to the next, where it cost about half of the sweep's time
 * at l = 7. */
BAND_INLINE void CHOL_REV_PAIR(const double *L, double *W, size_t n, size_t bw, size_t s,
                               size_t p, size_t ep, size_t eq, size_t k0, int inner)
{
    size_t q = p + 1;
    const double *lp = L + p * s, *lq = L + q * s;
    double *restrict wp = W + p * s;
    double *restrict wq = W + q * s;

    double h1 = CHOL_REV_FINISH(lq, wq, q, eq, 0);
    { /* column q's step reaches column p (k = p) */
        double r = lp[q];
        pair d2 = {0.0, 0.0}, r2 = {r, r};
        size_t i = q + 1;
        CHOL_UNROLL
        for (; i + 1 <= ep; i += 2) {
            pair a = pair_load(wq + i);
            d2 += a * pair_load(lp + i);
            pair_store(wp + i, pair_load(wp + i) - a * r2);
        }
        double dot = d2[0] + d2[1];
        if (i <= ep) {
            dot += wq[i] * lp[i];
            wp[i] -= wq[i] * r;
        }
        wp[q] -= dot + h1 * r;
    }
    double h0 = CHOL_REV_FINISH(lp, wp, p, ep, 1);

    CHOL_UNROLL
    for (size_t k = k0; k < p; k++) {
        const double *restrict lk = L + k * s;
        double *restrict wk = W + k * s;
        size_t ek = inner || k + bw < n ? k + bw : n - 1;
        double r0 = lk[p], r1 = lk[q];
        double d0 = wp[q] * lk[q], d1 = 0.0; /* row q: from column p only */
        pair wpq = pair_load(wk + p);
        wpq[1] -= wp[q] * r0;
        pair s0 = {0.0, 0.0}, s1 = {0.0, 0.0}, v0 = {r0, r0}, v1 = {r1, r1};
        size_t i = q + 1;
        CHOL_UNROLL
        for (; i + 1 <= ek; i += 2) {
            pair a = pair_load(wp + i), b = pair_load(wq + i), c = pair_load(lk + i);
            s0 += a * c;
            s1 += b * c;
            pair_store(wk + i, pair_load(wk + i) - (a * v0 + b * v1));
        }
        if (i <= ek) {
            d0 += wp[i] * lk[i];
            d1 += wq[i] * lk[i];
            wk[i] -= wp[i] * r0 + wq[i] * r1;
        }
        pair upd = {(d0 + (s0[0] + s0[1])) + h0 * r0, (d1 + (s1[0] + s1[1])) + h1 * r1};
        pair_store(wk + p, wpq - upd);
    }
    if (p >= bw) /* k = p - bw: reached by column p, at row p only */
        W[(p - bw) * s + p] -= h0 * L[(p - bw) * s + p];
}
