/* numfmt.c -- a double as printf's "%.17g" writes it (io.h), without
 * printf's multi-precision arithmetic where 128-bit integers suffice.
 *
 * x = m 2^e (m < 2^53).  The 17 digits are D = round(x 10^(16 - k)) with
 * k = floor(log10 |x|), 10^16 <= D < 10^17, rounded to nearest and ties to
 * even on the exact binary value, as glibc rounds.  With p = 16 - k:
 *
 *   p >= 0:  x 10^p = m 5^p 2^(e + p), and m 5^p < 2^53 5^32 < 2^128 for
 *            p <= 32 (|x| >= 1e-16): an integer shifted right, the
 *            remainder compared with half of 2^-(e + p);
 *   p < 0:   x 10^p = (m 2^e) / 10^-p, and m 2^e < 2^128 for e <= 74
 *            (|x| < 2^127): an integer division, the remainder compared
 *            with half of 10^-p.
 *
 * k is first estimated from the binary exponent (floor(log10 2^E) or one
 * more) and corrected until the truncated D has 17 digits; a D rounded up
 * to 10^17 becomes 10^16 with k + 1.  Everything else (zero's sign, the
 * subnormals and |x| < 1e-16, |x| >= 2^127, inf, nan, and compilers without
 * a 128-bit integer) goes to snprintf itself.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmm/io.h"

#ifdef __SIZEOF_INT128__
__extension__ typedef unsigned __int128 u128;

static const uint64_t pow10_64[20] = {
    1u, 10u, 100u, 1000u, 10000u, 100000u, 1000000u, 10000000u, 100000000u, 1000000000u,
    10000000000u, 100000000000u, 1000000000000u, 10000000000000u, 100000000000000u,
    1000000000000000u, 10000000000000000u, 100000000000000000u, 1000000000000000000u,
    10000000000000000000u};

/* 5^p for p <= 27 (5^27 < 2^63). */
static uint64_t pow5_64(int p)
{
    uint64_t r = 1;
    for (int i = 0; i < p; i++)
        r *= 5;
    return r;
}

/* 10^r as a 128-bit integer, r <= 38. */
static u128 pow10_128(int r)
{
    return r < 20 ? (u128)pow10_64[r] : (u128)pow10_64[19] * pow10_64[r - 19];
}

/* floor(m 2^e 10^p) into *q and whether the rest is below, at or above one
 * half (-1, 0, 1) into *half; 0 when the range above does not hold. */
static int scaled(uint64_t m, int e, int p, uint64_t *q, int *half)
{
    if (p >= 0) {
        if (p > 32)
            return 0;
        u128 n = (u128)m * pow5_64(p < 27 ? p : 27);
        if (p > 27)
            n *= pow5_64(p - 27);
        int s = -(e + p);
        if (s <= 0) {
            /* x 10^p >= 2^63: k is not within one of the estimate */
            if (-s > 63 || (n >> 63) || ((n << -s) >> 63))
                return 0;
            *q = (uint64_t)(n << -s);
            *half = -1;
            return 1;
        }
        if (s >= 128)
            return 0;
        u128 fl = n >> s, rest = n - (fl << s), h = (u128)1 << (s - 1);
        if (fl >> 63)
            return 0;
        *q = (uint64_t)fl;
        *half = rest < h ? -1 : rest > h;
        return 1;
    }
    if (e < 0 || e > 74 || -p > 38)
        return 0;
    u128 n = (u128)m << e, d = pow10_128(-p), fl = n / d, rest = n - fl * d;
    if (fl >> 63)
        return 0;
    *q = (uint64_t)fl;
    u128 twice = rest << 1; /* rest < d < 2^127 */
    *half = twice < d ? -1 : twice > d;
    return 1;
}

/* The 17 significant digits of |x| (finite, normal) into dig and k into
 * *k; 0 when x is outside the range above. */
static int digits17(double x, char dig[17], int *k)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int be = (int)((bits >> 52) & 0x7ff);
    if (be == 0 || be == 0x7ff)
        return 0;
    uint64_t m = (bits & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52);
    int e = be - 1075, e2 = be - 1023;
    /* floor(log10 |x|) is this or one more */
    int kk = (int)floor(e2 * 0.30102999566398120);
    uint64_t q;
    int half;
    for (int tries = 0;; tries++) {
        if (tries > 2 || !scaled(m, e, 16 - kk, &q, &half))
            return 0;
        if (q < pow10_64[16])
            kk--;
        else if (q >= pow10_64[17])
            kk++;
        else
            break;
    }
    if (half > 0 || (half == 0 && (q & 1)))
        q++;
    if (q == pow10_64[17]) {
        q = pow10_64[16];
        kk++;
    }
    for (int i = 16; i >= 0; i--) {
        dig[i] = (char)('0' + q % 10);
        q /= 10;
    }
    *k = kk;
    return 1;
}

size_t gmm_fmt_g17(double x, char *buf)
{
    char dig[17];
    int k;
    if (x == 0.0 || !digits17(x, dig, &k))
        return (size_t)snprintf(buf, GMM_FMT_G17_SIZE, "%.17g", x);
    char *p = buf;
    if (signbit(x))
        *p++ = '-';
    int nd = 17;
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    if (k < -4 || k >= 17) {
        /* d.ddde+XX */
        *p++ = dig[0];
        if (nd > 1) {
            *p++ = '.';
            memcpy(p, dig + 1, (size_t)nd - 1);
            p += nd - 1;
        }
        *p++ = 'e';
        *p++ = k < 0 ? '-' : '+';
        int a = k < 0 ? -k : k;
        if (a >= 100)
            *p++ = (char)('0' + a / 100);
        *p++ = (char)('0' + a / 10 % 10);
        *p++ = (char)('0' + a % 10);
    } else if (k >= 0) {
        /* k + 1 integer digits, then what is left of the nd */
        memcpy(p, dig, (size_t)k + 1);
        p += k + 1;
        if (nd > k + 1) {
            *p++ = '.';
            memcpy(p, dig + k + 1, (size_t)(nd - k - 1));
            p += nd - k - 1;
        }
    } else {
        /* 0.000ddd */
        *p++ = '0';
        *p++ = '.';
        for (int i = 0; i < -k - 1; i++)
            *p++ = '0';
        memcpy(p, dig, (size_t)nd);
        p += nd;
    }
    *p = '\0';
    return (size_t)(p - buf);
}
#else
size_t gmm_fmt_g17(double x, char *buf)
{
    return (size_t)snprintf(buf, GMM_FMT_G17_SIZE, "%.17g", x);
}
#endif
