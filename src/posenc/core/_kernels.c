/* posenc.core._kernels: the compiled path of posenc.core, ahead of time (built by setup.py at install).

   The same algorithms as the NumPy path of posenc/core/, operation for operation:

   - direct:          core.arithmetic.direct (exact turns, quarter-turn reduction, double-double sin/cos
                      polynomials) for every (position, frequency) pair, float64 out: bit-identical to NumPy's;
                      direct_pairs: the same for a list of (position, frequency) pairs.
   - encode_float32:  direct, then each value rounded once to float32 and certified with core's band
                      |v| 2**-50 + absolute_error; a row holding a value whose band straddles a rounding
                      midpoint is counted in unsure[row], and core settles that row on the NumPy path.
   - combine:         angle addition z(start + aB + b) = z(start + aB) z(b) of core.addition.angle_addition,
                      each value rounded once to float32, bfloat16 or float16 (from the float64 value: no
                      double rounding) and certified with the per-column bands; unsure rows as above, and
                      the unsure values themselves listed (up to the room given), so that core settles just
                      those values. Its builds (`builds()`): portable C ("plain"), and where the CPU has
                      AVX2 and FMA, fused multiply-adds with float32 rows vectorised by hand ("fma").
   - rotate_half:     posenc.torch.apply_rotary's eager road (not a table): x1 c1 - x2 s1 and x2 c2 + x1 s2 of
                      each row of x, each product and the sum rounded to float32, then once to x's type
                      (float32, bfloat16, float16) as torch's .to() rounds; strided buffers, cos and sin
                      broadcast to x; NaNs as torch's own loops give them (rules posenc.torch reads from
                      torch): the bits of the torch code it replaces.

   So every value written is THE correctly rounded one (certified), whatever rounding error the
   compiler's code has within the bands; and `direct` is bit-identical to NumPy because it performs the
   same IEEE operations in the same order (built with -ffp-contract=off: no fused multiply-add; no
   -ffast-math). Buffers come through the buffer protocol (no NumPy headers); each call works on a row
   range [lo, hi) (rotate_half: on part k of n) with the GIL released, so core runs row ranges on its thread
   pool in parallel. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
/* one build, vector code where the CPU has AVX2 (chosen at load time); the same IEEE operations */
#define POSENC_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define POSENC_CLONES
#endif

#if defined(__GNUC__) && defined(__x86_64__)
/* angle addition may use fused multiply-adds where the CPU has them (the exact path never does) */
#define POSENC_FMA 1
#define ALWAYS_INLINE inline __attribute__((always_inline))
#include <immintrin.h>
#else
#define POSENC_FMA 0
#define ALWAYS_INLINE inline
#endif

#define SPLITTER 134217729.0 /* 2**27 + 1 */
#define TWO_PI_HI 6.283185307179586
#define TWO_PI_LO 2.4492935982947064e-16

static inline void two_sum(double a, double b, double *s, double *e) {
    double t = a + b;
    double bb = t - a;
    *s = t;
    *e = (a - (t - bb)) + (b - bb);
}

static inline void two_prod(double a, double b, double *p, double *e) {
    double q = a * b;
    double ta = a * SPLITTER;
    double ah = ta - (ta - a);
    double al = a - ah;
    double tb = b * SPLITTER;
    double bh = tb - (tb - b);
    double bl = b - bh;
    *p = q;
    *e = ((ah * bh - q) + ah * bl + al * bh) + al * bl;
}

/* The Taylor coefficients of core.arithmetic.SIN and COS, highest power first: sin x = x + x z P(z) with
   P = SIN_TAYLOR, cos x = 1 - z/2 + z² Q(z) with Q = COS_TAYLOR (z = x²). */
static const double SIN_TAYLOR[8] = {
    1.0 / 355687428096000.0, -1.0 / 1307674368000.0, 1.0 / 6227020800.0, -1.0 / 39916800.0,
    1.0 / 362880.0,          -1.0 / 5040.0,          1.0 / 120.0,        -1.0 / 6.0,
};
static const double COS_TAYLOR[8] = {
    -1.0 / 6402373705728000.0, 1.0 / 20922789888000.0, -1.0 / 87178291200.0, 1.0 / 479001600.0,
    -1.0 / 3628800.0,          1.0 / 40320.0,          -1.0 / 720.0,         1.0 / 24.0,
};

/* c[0] z^7 + c[1] z^6 + ... + c[7] by Horner's rule: each multiply and each add rounded, in the order of
   core.arithmetic.horner (multiply, then add the next coefficient). */
static inline double horner8(double z, const double c[8]) {
    return ((((((c[0] * z + c[1]) * z + c[2]) * z + c[3]) * z + c[4]) * z + c[5]) * z + c[6]) * z + c[7];
}

/* core.arithmetic.turns, .sincos_turns and .sincos_small for one element, operation for operation. */
static inline void sincos_exact(double p, double l0, double l1, double l2, double l3, double l4, double *sin_,
                                double *cos_) {
    double scaled = p * SPLITTER;
    double ph = scaled - (scaled - p);
    double pl = p - ph;
    double a = ph * l0;
    a -= rint(a);
    double b = ph * l1;
    b -= rint(b);
    double c = pl * l0;
    c -= rint(c);
    double s, e1, e2, u, e3, hi, e4, lo;
    two_sum(a, b, &s, &e1);
    s -= rint(s);
    two_sum(s, c, &s, &e2);
    s -= rint(s);
    two_sum(ph * l2, pl * l1, &u, &e3);
    double rest = (((ph * l3 + pl * l2) + (ph * l4 + pl * l3)) + pl * l4) + ((e1 + e2) + e3);
    two_sum(s, u, &hi, &e4);
    hi -= rint(hi);
    two_sum(hi, e4 + rest, &hi, &lo);

    double quarter = rint(4.0 * hi);
    double r, rl, x, xl;
    two_sum(hi - 0.25 * quarter, lo, &r, &rl);
    two_prod(r, TWO_PI_HI, &x, &xl);
    xl += r * TWO_PI_LO + rl * TWO_PI_HI;
    two_sum(x, xl, &x, &xl);

    double z = x * x;
    double ps = horner8(z, SIN_TAYLOR) * z;
    double sine = x + (xl * (1.0 - 0.5 * z) + x * ps);

    double zh, zl;
    two_prod(x, x, &zh, &zl);
    double half = 0.5 * zh;
    double w = 1.0 - half;
    double pc = (zh * horner8(zh, COS_TAYLOR)) * zh;
    double cosine = w + ((((1.0 - w) - half) - 0.5 * zl) + (pc - x * xl));

    /* the angle is q π/2 + x, q = quarter mod 4 (quarter is an integer in -2 .. 2); integer selects keep
       the loop branch-free (vector code), and negation by -1.0 is exact, as np.negative */
    int q = (int)quarter & 3;
    double s_ = (q & 1) ? cosine : sine;
    double c_ = (q & 1) ? sine : cosine;
    *sin_ = s_ * ((q & 2) ? -1.0 : 1.0);
    *cos_ = c_ * ((q == 1 || q == 2) ? -1.0 : 1.0);
}

POSENC_CLONES
static void direct_rows(const double *restrict positions, const double *restrict limbs, Py_ssize_t n,
                        Py_ssize_t lo, Py_ssize_t hi, double *restrict sin_out, double *restrict cos_out) {
    const double *restrict l0 = limbs, *restrict l1 = limbs + n, *restrict l2 = limbs + 2 * n,
                           *restrict l3 = limbs + 3 * n, *restrict l4 = limbs + 4 * n;
    for (Py_ssize_t j = lo; j < hi; j++) {
        const double p = positions[j];
        double *restrict so = sin_out + j * n, *restrict co = cos_out + j * n;
        for (Py_ssize_t i = 0; i < n; i++) {
            double s, c;
            sincos_exact(p, l0[i], l1[i], l2[i], l3[i], l4[i], &s, &c);
            so[i] = s;
            co[i] = c;
        }
    }
}

/* Where the values of frequency i go in a row (core.Spec.column_plan). */
typedef struct {
    Py_ssize_t n, d_model, sin_offset, cos_offset, stride, sin_count, cos_count;
} Columns;

/* Zero a row's columns from 2n on (odd widths: the zero column); size: the bytes of a value. */
static inline void zero_tail(void *row, const Columns *k, Py_ssize_t size) {
    if (k->d_model > 2 * k->n) memset((char *)row + 2 * k->n * size, 0, (k->d_model - 2 * k->n) * size);
}

#define CHUNK 256

/* Round v to float32 with the exact path's band |v| 2**-50 + absolute_error: the rounding of v + band,
   equal to that of v - band when certain. (A value rounding to zero is always unsure: its band straddles
   zero; core settles its row, sign included.) */
#define ROUND_DIRECT(v, high, unsure_)                                   \
    do {                                                                 \
        double band_ = fabs(v) * 0x1p-50 + absolute_error;               \
        high = (float)((v) + band_);                                     \
        unsure_ = high != (float)((v)-band_);                            \
    } while (0)

/* Round the sine and the cosine of each of the chunk's first `end` frequencies (both have a column) into
   sin_at and cos_at, expressions of i, counting the unsure ones. A macro, not a function: each use stays
   its own loop, whose stores the compiler sees with their constant stride (and vectorises). */
#define ROUND_PAIRS(sin_at, cos_at)                     \
    do {                                                \
        for (Py_ssize_t i = 0; i < end; i++) {          \
            float sh, ch;                               \
            int su, cu;                                 \
            ROUND_DIRECT(sin_buf[i], sh, su);           \
            ROUND_DIRECT(cos_buf[i], ch, cu);           \
            count += su | cu;                           \
            sin_at = sh;                                \
            cos_at = ch;                                \
        }                                               \
    } while (0)

POSENC_CLONES
static Py_ssize_t encode_rows(const double *restrict positions, const double *restrict limbs,
                              double absolute_error, const Columns *k, Py_ssize_t lo, Py_ssize_t hi,
                              float *restrict out, int64_t *restrict unsure) {
    const Py_ssize_t n = k->n;
    const double *restrict l0 = limbs, *restrict l1 = limbs + n, *restrict l2 = limbs + 2 * n,
                           *restrict l3 = limbs + 3 * n, *restrict l4 = limbs + 4 * n;
    const Py_ssize_t both = k->sin_count < k->cos_count ? k->sin_count : k->cos_count;
    double sin_buf[CHUNK], cos_buf[CHUNK];
    Py_ssize_t total = 0;
    for (Py_ssize_t j = lo; j < hi; j++) {
        const double p = positions[j];
        float *row = out + j * k->d_model;
        float *restrict sin_row = row + k->sin_offset, *restrict cos_row = row + k->cos_offset;
        int64_t count = 0;
        zero_tail(row, k, 4);
        if (p == 0.0) { /* exact: sin ±0 = ±0 (IEEE), cos 0 = 1 */
            for (Py_ssize_t i = 0; i < k->sin_count; i++) sin_row[k->stride * i] = (float)p;
            for (Py_ssize_t i = 0; i < k->cos_count; i++) cos_row[k->stride * i] = 1.0f;
            unsure[j] = 0;
            continue;
        }
        for (Py_ssize_t first = 0; first < n; first += CHUNK) {
            const Py_ssize_t m = n - first < CHUNK ? n - first : CHUNK;
            for (Py_ssize_t i = 0; i < m; i++) {
                double s, c;
                sincos_exact(p, l0[first + i], l1[first + i], l2[first + i], l3[first + i], l4[first + i], &s,
                             &c);
                sin_buf[i] = s;
                cos_buf[i] = c;
            }
            const Py_ssize_t end = both - first < m ? (both - first > 0 ? both - first : 0) : m;
            if (k->stride == 2) { /* interleaved: sine i in column 2i, its cosine next to it */
                float *restrict pair = sin_row + 2 * first;
                ROUND_PAIRS(pair[2 * i], pair[2 * i + 1]);
            } else {
                ROUND_PAIRS(sin_row[first + i], cos_row[first + i]);
            }
            for (Py_ssize_t i = end; i < m; i++) { /* odd widths: one value whose partner has no column */
                float h;
                int u;
                if (first + i < k->sin_count) {
                    ROUND_DIRECT(sin_buf[i], h, u);
                    count += u;
                    sin_row[k->stride * (first + i)] = h;
                }
                if (first + i < k->cos_count) {
                    ROUND_DIRECT(cos_buf[i], h, u);
                    count += u;
                    cos_row[k->stride * (first + i)] = h;
                }
            }
        }
        unsure[j] = count;
        total += count;
    }
    return total;
}

/* s = sA cB + cA sB and c = cA cB - sA sB, fused (one rounding fewer: inside the bands too, which bound
   the unfused error) or not */
#define SIN_SUM(i) (fused ? fma(sa[i], cb[i], ca[i] * sb[i]) : sa[i] * cb[i] + ca[i] * sb[i])
#define COS_SUM(i) (fused ? fma(ca[i], cb[i], -(sa[i] * sb[i])) : ca[i] * cb[i] - sa[i] * sb[i])

/* The output formats of combine: float32, bfloat16 and float16 (the 16-bit ones as their bits). */
#define FORMAT_FLOAT32 0
#define FORMAT_BFLOAT16 1
#define FORMAT_FLOAT16 2

/* v rounded to a 16-bit format, to nearest with ties to even, as the format's bits, straight from v's
   float64 bits (no double rounding): where |v| is at least the format's smallest normal number, v's
   significand is rounded to the format's (bfloat16: 8 bits, so 45 of float64's 52 fraction bits are
   dropped; float16: 11 bits, 42 dropped) on the bits, whose order is the values' order (a carry into the
   exponent is right), and the exponent rebiased (1023 - 127, resp. 1023 - 15); below it, the subnormal
   count |v| / 2**-133 (resp. 2**-24) is rounded by adding 2**52 (a count of 2**kept is the smallest normal
   number's bits). Bit 16 is set where the result overflows the format (core settles those). */
static ALWAYS_INLINE uint32_t round16(double v, const int format) {
    const int bfloat16 = format == FORMAT_BFLOAT16, drop = bfloat16 ? 45 : 42, kept = 52 - drop;
    const uint64_t rebias = (uint64_t)(bfloat16 ? 1023 - 127 : 1023 - 15) << kept;
    const uint64_t smallest_normal = (uint64_t)(bfloat16 ? 1023 - 126 : 1023 - 14) << 52; /* its bits */
    uint64_t bits, count;
    memcpy(&bits, &v, 8);
    const uint64_t magnitude = bits & 0x7FFFFFFFFFFFFFFFull;
    const uint64_t normal = ((magnitude + ((1ull << (drop - 1)) - 1) + ((magnitude >> drop) & 1)) >> drop) - rebias;
    const double subnormal = fabs(v) * (bfloat16 ? 0x1p133 : 0x1p24) + 0x1p52;
    memcpy(&count, &subnormal, 8);
    /* a select by mask (the compiler keeps the loop vector code) and a signed comparison (AVX2 compares
       signed 64-bit lanes only; both sides are below 2**63) */
    const uint64_t tiny = -(uint64_t)((int64_t)magnitude < (int64_t)smallest_normal);
    const int64_t field = (int64_t)((count & 0xFFFF & tiny) | (normal & ~tiny));
    const uint32_t overflow = field >= (int64_t)(bfloat16 ? 255 : 31) << kept;
    return (uint32_t)(((uint64_t)field & 0x7FFF) | (bits >> 63) << 15) | overflow << 16;
}

/* Round v with its band to the output format: the value (float32: its float; 16-bit: its bits) is stored
   at dst[index], and the result says whether the rounding is unsure (v - band rounds otherwise, or the
   16-bit result overflows). A value whose band straddles zero is unsure (the two ends differ in sign);
   float32 also flags every value rounding to zero, and core settles it, sign included. */
static ALWAYS_INLINE int round_out(double v, double band, void *restrict dst, Py_ssize_t index, const int format) {
    if (format == FORMAT_FLOAT32) {
        const float high = (float)(v + band);
        ((float *)dst)[index] = high;
        return high != (float)(v - band);
    }
    const uint32_t high = round16(v + band, format), low = round16(v - band, format);
    ((uint16_t *)dst)[index] = (uint16_t)high;
    return (high != low) | (int)(high >> 16);
}

/* The unsure values of row r, found again one by one (rare: a row holds a few at most), and their count:
   where[found ..] receives r * 2n + 2i + which (which = 0 for the sine of frequency i, 1 for its cosine)
   while there is room (capacity). */
static ALWAYS_INLINE Py_ssize_t record_unsure(const double *sa, const double *ca, const double *sb,
                                              const double *cb, const double *sin_band, const double *cos_band,
                                              const Columns *k, Py_ssize_t r, int64_t *where, Py_ssize_t capacity,
                                              Py_ssize_t found, const int fused, const int format) {
    Py_ssize_t count = 0;
    union { float float32; uint16_t bits16; } scratch; /* where the value found again goes: unused */
    for (Py_ssize_t i = 0; i < k->n; i++) {
        double s = SIN_SUM(i), c = COS_SUM(i);
        for (int which = 0; which < 2; which++) {
            double v = which ? c : s, band = which ? cos_band[i] : sin_band[i];
            if (i < (which ? k->cos_count : k->sin_count) && round_out(v, band, &scratch, 0, format)) {
                if (found + count < capacity) where[found + count] = (int64_t)r * 2 * k->n + 2 * i + which;
                count++;
            }
        }
    }
    return count;
}

/* The builds of combine (the `build` argument; `builds()` lists those this CPU runs). */
#define BUILD_PLAIN 0
#define BUILD_FMA 1

/* Rows written at once by float32_rows_avx2: rows of one block share sA, cA and the bands, loaded once for
   all of them (one row at a time was 1.2x slower, measured on the (8192, 4096) table). */
#define GROUP_ROWS 4

#if POSENC_FMA
/* The fused build's float32 angle addition of `rows` rows of one block (row t's sB, cB at sb + t n, cb + t n;
   its sines at sin_row + t row_step, its cosines at cos_row + t row_step), frequencies 0 .. count - 1 (a
   multiple of 4), in AVX2, four frequencies a step: S = fma(sA, cB, cA sB) and C = fma(cA, cB, -(sA sB)) as
   combine_row computes them, the four sines and four cosines rounded to float32 together from v + band
   (high) and from v - band (low); lanes where these differ make the row unsure (flags[t]). Interleaved rows
   (stride 2) take high permuted to s0 c0 s1 c1 ...; [sin|cos] rows take its halves. */
__attribute__((target("avx2,fma"))) static ALWAYS_INLINE void float32_rows_avx2(
    const double *restrict sa, const double *restrict ca, const double *restrict sb, const double *restrict cb,
    const double *restrict sin_band, const double *restrict cos_band, Py_ssize_t n, Py_ssize_t count,
    float *restrict sin_row, float *restrict cos_row, Py_ssize_t row_step, Py_ssize_t stride, int *restrict flags,
    const int rows) {
    const __m256i pairs = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 unsure[GROUP_ROWS];
    for (int t = 0; t < rows; t++) unsure[t] = _mm256_setzero_ps();
    for (Py_ssize_t i = 0; i < count; i += 4) {
        const __m256d s_a = _mm256_loadu_pd(sa + i), c_a = _mm256_loadu_pd(ca + i);
        const __m256d sin_w = _mm256_loadu_pd(sin_band + i), cos_w = _mm256_loadu_pd(cos_band + i);
        for (int t = 0; t < rows; t++) {
            const __m256d s_b = _mm256_loadu_pd(sb + t * n + i), c_b = _mm256_loadu_pd(cb + t * n + i);
            const __m256d s = _mm256_fmadd_pd(s_a, c_b, _mm256_mul_pd(c_a, s_b));
            const __m256d c = _mm256_fmsub_pd(c_a, c_b, _mm256_mul_pd(s_a, s_b));
            const __m128 sin_high = _mm256_cvtpd_ps(_mm256_add_pd(s, sin_w));
            const __m128 cos_high = _mm256_cvtpd_ps(_mm256_add_pd(c, cos_w));
            const __m256 high = _mm256_set_m128(cos_high, sin_high);
            const __m256 low = _mm256_set_m128(_mm256_cvtpd_ps(_mm256_sub_pd(c, cos_w)),
                                               _mm256_cvtpd_ps(_mm256_sub_pd(s, sin_w)));
            unsure[t] = _mm256_or_ps(unsure[t], _mm256_cmp_ps(high, low, _CMP_NEQ_UQ));
            if (stride == 2) {
                _mm256_storeu_ps(sin_row + t * row_step + 2 * i, _mm256_permutevar8x32_ps(high, pairs));
            } else {
                _mm_storeu_ps(sin_row + t * row_step + i, sin_high);
                _mm_storeu_ps(cos_row + t * row_step + i, cos_high);
            }
        }
    }
    for (int t = 0; t < rows; t++) flags[t] = _mm256_movemask_ps(unsure[t]) != 0;
}

/* float32_rows_avx2 with its inner loop unrolled for `rows` (GROUP_ROWS, 2 or 1). */
#define FLOAT32_ROWS(rows_) \
    float32_rows_avx2(sa, ca, sb, cb, sin_band, cos_band, n, count, sin_row, cos_row, row_step, stride, flags, rows_)
__attribute__((target("avx2,fma"))) static void float32_rows(
    const double *sa, const double *ca, const double *sb, const double *cb, const double *sin_band,
    const double *cos_band, Py_ssize_t n, Py_ssize_t count, float *sin_row, float *cos_row, Py_ssize_t row_step,
    Py_ssize_t stride, int *flags, int rows) {
    if (rows == GROUP_ROWS)
        FLOAT32_ROWS(GROUP_ROWS);
    else if (rows == 2)
        FLOAT32_ROWS(2);
    else
        FLOAT32_ROWS(1);
}
#endif

#define COMBINE_PARAMETERS                                                                                  \
    const double *restrict sin_a, const double *restrict cos_a, const double *restrict sin_b,               \
        const double *restrict cos_b, const double *restrict sin_band, const double *restrict cos_band,     \
        Py_ssize_t block, const Columns *k, Py_ssize_t lo, Py_ssize_t hi, void *restrict out,               \
        int64_t *restrict unsure, int64_t *restrict where, Py_ssize_t capacity
#define COMBINE_ARGUMENTS \
    sin_a, cos_a, sin_b, cos_b, sin_band, cos_band, block, k, lo, hi, out, unsure, where, capacity

/* Row r's values of the frequencies from `first` on (those below are written), each rounded to the format
   with its band, in its columns: the count of unsure ones. */
static ALWAYS_INLINE int64_t combine_row(const double *sa, const double *ca, const double *sb, const double *cb,
                                         const double *sin_band, const double *cos_band, const Columns *k,
                                         char *row, Py_ssize_t first, const int fused, const int format) {
    const Py_ssize_t n = k->n, size = format == FORMAT_FLOAT32 ? 4 : 2;
    const Py_ssize_t both = k->sin_count < k->cos_count ? k->sin_count : k->cos_count;
    void *restrict sin_row = row + k->sin_offset * size, *restrict cos_row = row + k->cos_offset * size;
    int64_t count = 0;
    zero_tail(row, k, size);
    if (k->stride == 2) { /* interleaved: sine i in column 2i, its cosine next to it */
        for (Py_ssize_t i = first; i < both; i++) {
            double s = SIN_SUM(i), c = COS_SUM(i);
            count += round_out(s, sin_band[i], sin_row, 2 * i, format) |
                     round_out(c, cos_band[i], sin_row, 2 * i + 1, format);
        }
    } else {
        for (Py_ssize_t i = first; i < both; i++) {
            double s = SIN_SUM(i), c = COS_SUM(i);
            count += round_out(s, sin_band[i], sin_row, i, format) | round_out(c, cos_band[i], cos_row, i, format);
        }
    }
    for (Py_ssize_t i = both > first ? both : first; i < n; i++) {
        double s = SIN_SUM(i), c = COS_SUM(i);
        if (i < k->sin_count) count += round_out(s, sin_band[i], sin_row, k->stride * i, format);
        if (i < k->cos_count) count += round_out(c, cos_band[i], cos_row, k->stride * i, format);
    }
    return count;
}

/* Rows lo .. hi - 1. In the fused float32 build, up to GROUP_ROWS rows of a block at a time
   take their first frequencies (a multiple of 4) from float32_rows, the rest from combine_row. A row with an
   unsure value has its unsure values listed by record_unsure, and their count kept in unsure[r]. */
static ALWAYS_INLINE Py_ssize_t combine_rows(COMBINE_PARAMETERS, const int fused, const int format) {
    const Py_ssize_t n = k->n, size = format == FORMAT_FLOAT32 ? 4 : 2, row_step = k->d_model * size;
    const Py_ssize_t both = k->sin_count < k->cos_count ? k->sin_count : k->cos_count;
    const Py_ssize_t vectorised = POSENC_FMA && fused && format == FORMAT_FLOAT32 ? both / 4 * 4 : 0;
    Py_ssize_t total = 0;
    for (Py_ssize_t r = lo; r < hi;) {
        Py_ssize_t a = r / block, b = r - a * block;
        const double *sa = sin_a + a * n, *ca = cos_a + a * n, *sb = sin_b + b * n, *cb = cos_b + b * n;
        char *row = (char *)out + r * row_step;
        Py_ssize_t rows = 1;
        int flags[GROUP_ROWS] = {0};
#if POSENC_FMA
        if (vectorised) {
            const Py_ssize_t left = hi - r < block - b ? hi - r : block - b; /* rows of this block */
            rows = left >= GROUP_ROWS ? GROUP_ROWS : left >= 2 ? 2 : 1;
            float *sin_row = (float *)row + k->sin_offset, *cos_row = (float *)row + k->cos_offset;
            float32_rows(sa, ca, sb, cb, sin_band, cos_band, n, vectorised, sin_row, cos_row, k->d_model, k->stride,
                         flags, (int)rows);
        }
#endif
        for (Py_ssize_t t = 0; t < rows; t++, r++) {
            const double *sbt = sb + t * n, *cbt = cb + t * n;
            int64_t count = combine_row(sa, ca, sbt, cbt, sin_band, cos_band, k, row + t * row_step, vectorised,
                                        fused, format);
            if (count || flags[t])
                count = record_unsure(sa, ca, sbt, cbt, sin_band, cos_band, k, r, where, capacity, total, fused,
                                      format);
            unsure[r] = count;
            total += count;
        }
    }
    return total;
}

/* The builds of combine_rows: per output format, plain, and with fused multiply-adds on x86-64 CPUs that
   have them (~10% faster), whose float32 rows are vectorised by hand (1.4x faster than the compiler's).
   Each pass uses one of them throughout, so the unsure values it lists are those of the values it wrote. */
#define COMBINE_BUILD(name, target, format, fused)                                                     \
    target static Py_ssize_t name(COMBINE_PARAMETERS) {                                                 \
        return combine_rows(COMBINE_ARGUMENTS, fused, format);                                          \
    }

COMBINE_BUILD(combine_plain_float32, , FORMAT_FLOAT32, 0)
COMBINE_BUILD(combine_plain_bfloat16, , FORMAT_BFLOAT16, 0)
COMBINE_BUILD(combine_plain_float16, , FORMAT_FLOAT16, 0)
#if POSENC_FMA
#define FMA_TARGET __attribute__((target("avx2,fma")))
COMBINE_BUILD(combine_fma_float32, FMA_TARGET, FORMAT_FLOAT32, 1)
COMBINE_BUILD(combine_fma_bfloat16, FMA_TARGET, FORMAT_BFLOAT16, 1)
COMBINE_BUILD(combine_fma_float16, FMA_TARGET, FORMAT_FLOAT16, 1)
#endif

typedef Py_ssize_t (*Combine)(COMBINE_PARAMETERS);

/* The last build this CPU runs: BUILD_PLAIN everywhere, BUILD_FMA where it has AVX2 and FMA. */
static int best_build(void) {
#if POSENC_FMA
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return BUILD_FMA;
#endif
    return BUILD_PLAIN;
}

/* combine_rows for the output format and the build (one this CPU runs). */
static Combine combine_build(int format, int build) {
#if POSENC_FMA
    if (build == BUILD_FMA) {
        return format == FORMAT_FLOAT32    ? combine_fma_float32
               : format == FORMAT_BFLOAT16 ? combine_fma_bfloat16
                                           : combine_fma_float16;
    }
#else
    (void)build;
#endif
    return format == FORMAT_FLOAT32    ? combine_plain_float32
           : format == FORMAT_BFLOAT16 ? combine_plain_bfloat16
                                       : combine_plain_float16;
}


/* --- rotate_half: the eager road of posenc.torch.apply_rotary ---------------------------------------- */

/* The storage types of x and out: float32, bfloat16 and float16 (the 16-bit ones as their bits). */
#define ROTATE_FLOAT32 0
#define ROTATE_BFLOAT16 1
#define ROTATE_FLOAT16 2

/* A rotation: three outer dimensions (sizes n, element strides of x, cos, sin and out; each row holds
   2 half contiguous elements), and how NaNs come out. Torch's loops return, where both operands of a product, difference or sum are NaN, one of them
   (quieted): the second where mul_second (sub_second, add_second) is set, else the first; and round a NaN
   to 16 bits as nan_base | (sign bits & nan_sign) | (fraction bits & nan_payload). posenc.torch reads
   these from torch itself (it compares this kernel with its own loops). */
typedef struct {
    uint32_t base, sign, payload;
} NanRule;

typedef struct {
    Py_ssize_t n[3], x[3], c[3], s[3], o[3];
    Py_ssize_t half;
    int mul_second, sub_second, add_second;
    NanRule nan;
} Rotation;

/* The rows' pointers reach rotate_row inlined, without their restrict: the loop's stores do not alias its
   loads (out is a tensor of its own), which GCC is told, so that it need not check at run time. */
#if defined(__GNUC__) && !defined(__clang__)
#define ROTATE_IVDEP _Pragma("GCC ivdep")
#else
#define ROTATE_IVDEP
#endif

static ALWAYS_INLINE uint32_t bits_of(float v) {
    uint32_t b;
    memcpy(&b, &v, 4);
    return b;
}

static ALWAYS_INLINE float float_of(uint32_t b) {
    float v;
    memcpy(&v, &b, 4);
    return v;
}

/* Element i of x as float32, exactly: bfloat16 is float32's upper half; float16's finite values are its
   bits moved into float32's field and scaled by 2**112 (exact, subnormals included), inf and NaN keep
   their fraction bits. */
static ALWAYS_INLINE float load_x(const void *restrict x, Py_ssize_t i, const int kind) {
    if (kind == ROTATE_FLOAT32) return ((const float *)x)[i];
    const uint32_t h = ((const uint16_t *)x)[i];
    if (kind == ROTATE_BFLOAT16) return float_of(h << 16);
    const uint32_t sign = (h & 0x8000u) << 16, magnitude = h & 0x7FFFu;
    const uint32_t special = 0x7F800000u | (magnitude & 0x3FFu) << 13;
    const uint32_t finite = bits_of(float_of(magnitude << 13) * 0x1p112f);
    const uint32_t is_special = -(uint32_t)(magnitude >= 0x7C00u); /* selects by mask: vector code */
    return float_of(sign | (special & is_special) | (finite & ~is_special));
}

/* v rounded to x's storage type, to nearest with ties to even, as torch's .to() rounds: bfloat16 on the
   bits (the upper half, plus 0x7FFF and the kept half's last bit); float16 on the bits from its smallest
   normal number 2**-14 on (a carry into the exponent is right; past the largest finite value, inf), below it
   by adding 0.5 (whose float32 ulp is float16's smallest subnormal, 2**-24: the hardware rounds to nearest
   even); NaNs as the rotation says, or, where not_nan, as the rest (the caller redoes them). */
static ALWAYS_INLINE void store_out(void *restrict out, Py_ssize_t i, float v, const NanRule nan_rule,
                                    const int kind, const int not_nan) {
    if (kind == ROTATE_FLOAT32) {
        ((float *)out)[i] = v;
        return;
    }
    const uint32_t b = bits_of(v), magnitude = b & 0x7FFFFFFFu, shift = kind == ROTATE_BFLOAT16 ? 16 : 13;
    const uint32_t nan = nan_rule.base | ((b >> 16) & nan_rule.sign) | ((b >> shift) & nan_rule.payload);
    uint32_t h;
    if (kind == ROTATE_BFLOAT16) {
        h = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
    } else {
        uint32_t normal = ((magnitude + 0xFFFu + ((magnitude >> 13) & 1u)) >> 13) - ((127u - 15u) << 10);
        normal = normal > 0x7C00u ? 0x7C00u : normal;
        const uint32_t subnormal = bits_of(float_of(magnitude) + 0.5f) - bits_of(0.5f);
        const uint32_t tiny = -(uint32_t)(magnitude < 0x38800000u);
        h = ((b >> 16) & 0x8000u) | (subnormal & tiny) | (normal & ~tiny);
    }
    if (not_nan) {
        ((uint16_t *)out)[i] = (uint16_t)h;
        return;
    }
    const uint32_t is_nan = -(uint32_t)(magnitude > 0x7F800000u);
    ((uint16_t *)out)[i] = (uint16_t)((nan & is_nan) | (h & ~is_nan));
}

/* The NaN a product, difference or sum returns in torch's loops: where both operands are NaN, the one the
   rotation names (quieted), where one is, that one; otherwise the operation's own result. */
static inline int nan_pick(float a, float b, int second, float *result) {
    const int a_nan = a != a, b_nan = b != b;
    if (!a_nan && !b_nan) return 0;
    const float picked = (b_nan && (second || !a_nan)) ? b : a;
    *result = float_of(bits_of(picked) | 0x400000u);
    return 1;
}

static float rule_mul(float a, float b, int second) {
    float v;
    return nan_pick(a, b, second, &v) ? v : a * b;
}

static float rule_sub(float a, float b, int second) {
    float v;
    return nan_pick(a, b, second, &v) ? v : a - b;
}

static float rule_add(float a, float b, int second) {
    float v;
    return nan_pick(a, b, second, &v) ? v : a + b;
}

/* One row: out1 = x1 c1 - x2 s1 and out2 = x2 c2 + x1 s2, each product and the sum rounded to float32 (no
   contraction), then to x's type. The loop is vector code that leaves NaNs to the hardware's pick (and the
   compiler's operand order); a row whose results hold a NaN is done again one element at a time with the
   rotation's NaN rules (rare: NaNs in x, cos or sin, inf - inf, 0 · inf). */
static ALWAYS_INLINE void rotate_row(const void *restrict x, const float *restrict c, const float *restrict s,
                                     void *restrict out, const Rotation *r, const int kind) {
    const Py_ssize_t half = r->half;
    const NanRule nan_rule = r->nan;
    int nan = 0;
    ROTATE_IVDEP
    for (Py_ssize_t i = 0; i < half; i++) {
        const float x1 = load_x(x, i, kind), x2 = load_x(x, half + i, kind);
        const float p = x1 * c[i], q = x2 * s[i], u = x2 * c[half + i], w = x1 * s[half + i];
        const float o1 = p - q, o2 = u + w;
        nan |= (o1 != o1) | (o2 != o2);
        store_out(out, i, o1, nan_rule, kind, 1);
        store_out(out, half + i, o2, nan_rule, kind, 1);
    }
    if (!nan) return;
    const int mul = r->mul_second, sub = r->sub_second, add = r->add_second;
    for (Py_ssize_t i = 0; i < half; i++) {
        const float x1 = load_x(x, i, kind), x2 = load_x(x, half + i, kind);
        const float p = rule_mul(x1, c[i], mul), q = rule_mul(x2, s[i], mul);
        const float u = rule_mul(x2, c[half + i], mul), w = rule_mul(x1, s[half + i], mul);
        store_out(out, i, rule_sub(p, q, sub), nan_rule, kind, 0);
        store_out(out, half + i, rule_add(u, w, add), nan_rule, kind, 0);
    }
}

/* Every row of the rotation, in the order of the dimensions (x's memory order: the hardware's prefetch
   follows it; tiles along the positions that kept cos and sin rows in cache across the heads of a
   (B, H, L, D) x were 1.5 to 2x slower, measured on (1, 32, 4096, 128)). */
static ALWAYS_INLINE void rotate_rows(const char *x, const float *c, const float *s, char *out, const Rotation *r,
                                      const int kind) {
    const Py_ssize_t size = kind == ROTATE_FLOAT32 ? 4 : 2;
    for (Py_ssize_t i0 = 0; i0 < r->n[0]; i0++) {
        for (Py_ssize_t i1 = 0; i1 < r->n[1]; i1++) {
            for (Py_ssize_t i2 = 0; i2 < r->n[2]; i2++) {
                rotate_row(x + (i0 * r->x[0] + i1 * r->x[1] + i2 * r->x[2]) * size,
                           c + i0 * r->c[0] + i1 * r->c[1] + i2 * r->c[2],
                           s + i0 * r->s[0] + i1 * r->s[1] + i2 * r->s[2],
                           out + (i0 * r->o[0] + i1 * r->o[1] + i2 * r->o[2]) * size, r, kind);
            }
        }
    }
}

#define ROTATE_BUILD(name, kind)                                                                       \
    POSENC_CLONES static void name(const char *x, const float *c, const float *s, char *out,             \
                                   const Rotation *r) {                                                \
        rotate_rows(x, c, s, out, r, kind);                                                            \
    }

ROTATE_BUILD(rotate_float32, ROTATE_FLOAT32)
ROTATE_BUILD(rotate_bfloat16, ROTATE_BFLOAT16)
ROTATE_BUILD(rotate_float16, ROTATE_FLOAT16)

/* --- argument checking ------------------------------------------------------------------------------- */

static int need(Py_buffer *view, Py_ssize_t items, Py_ssize_t itemsize, const char *name) {
    if (view->len < items * itemsize) {
        PyErr_Format(PyExc_ValueError, "posenc.core._kernels: buffer %s holds %zd bytes, needs %zd", name,
                     view->len, items * itemsize);
        return 0;
    }
    return 1;
}

static int check_columns(const Columns *k, Py_ssize_t lo, Py_ssize_t hi) {
    if (k->n < 0 || lo < 0 || hi < lo || k->stride < 1 || k->stride > 2 ||
        (k->stride == 2 && k->cos_offset != k->sin_offset + 1) || k->sin_count > k->n || k->cos_count > k->n ||
        k->sin_count < 0 || k->cos_count < 0 || 2 * k->n > k->d_model + 2 ||
        (k->sin_count && k->sin_offset + k->stride * (k->sin_count - 1) >= k->d_model) ||
        (k->cos_count && k->cos_offset + k->stride * (k->cos_count - 1) >= k->d_model)) {
        PyErr_SetString(PyExc_ValueError, "posenc.core._kernels: inconsistent column plan or row range");
        return 0;
    }
    return 1;
}

static void release(Py_buffer *views, int count) {
    for (int i = 0; i < count; i++) PyBuffer_Release(&views[i]);
}

static PyObject *py_direct(PyObject *self, PyObject *args) {
    Py_buffer v[4];
    Py_ssize_t n, lo, hi;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*w*w*nnn", &v[0], &v[1], &v[2], &v[3], &n, &lo, &hi)) return NULL;
    if (n < 0 || lo < 0 || hi < lo || !need(&v[0], hi, 8, "positions") || !need(&v[1], 5 * n, 8, "limbs") ||
        !need(&v[2], hi * n, 8, "sin") || !need(&v[3], hi * n, 8, "cos")) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "posenc.core._kernels.direct: bad sizes");
        release(v, 4);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    direct_rows(v[0].buf, v[1].buf, n, lo, hi, v[2].buf, v[3].buf);
    Py_END_ALLOW_THREADS
    release(v, 4);
    Py_RETURN_NONE;
}

static PyObject *py_direct_pairs(PyObject *self, PyObject *args) {
    Py_buffer v[4];
    Py_ssize_t n;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*w*w*n", &v[0], &v[1], &v[2], &v[3], &n)) return NULL;
    if (n < 0 || !need(&v[0], n, 8, "positions") || !need(&v[1], 5 * n, 8, "limbs") || !need(&v[2], n, 8, "sin") ||
        !need(&v[3], n, 8, "cos")) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "posenc.core._kernels.direct_pairs: bad sizes");
        release(v, 4);
        return NULL;
    }
    const double *p = v[0].buf, *l = v[1].buf;
    double *sin_out = v[2].buf, *cos_out = v[3].buf;
    for (Py_ssize_t k = 0; k < n; k++)
        sincos_exact(p[k], l[k], l[n + k], l[2 * n + k], l[3 * n + k], l[4 * n + k], &sin_out[k], &cos_out[k]);
    release(v, 4);
    Py_RETURN_NONE;
}

static PyObject *py_encode_float32(PyObject *self, PyObject *args) {
    Py_buffer v[4];
    Columns k;
    double absolute_error;
    Py_ssize_t lo, hi, total;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*dw*w*(nnnnnnn)nn", &v[0], &v[1], &absolute_error, &v[2], &v[3], &k.n,
                          &k.d_model, &k.sin_offset, &k.cos_offset, &k.stride, &k.sin_count, &k.cos_count, &lo,
                          &hi))
        return NULL;
    if (!check_columns(&k, lo, hi) || !need(&v[0], hi, 8, "positions") || !need(&v[1], 5 * k.n, 8, "limbs") ||
        !need(&v[2], hi * k.d_model, 4, "out") || !need(&v[3], hi, 8, "unsure")) {
        release(v, 4);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    total = encode_rows(v[0].buf, v[1].buf, absolute_error, &k, lo, hi, v[2].buf, v[3].buf);
    Py_END_ALLOW_THREADS
    release(v, 4);
    return PyLong_FromSsize_t(total);
}

static PyObject *py_combine(PyObject *self, PyObject *args) {
    Py_buffer v[9];
    Columns k;
    Py_ssize_t block, lo, hi, total;
    int format, build = -1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*nw*w*w*(nnnnnnn)nni|i", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                          &block, &v[6], &v[7], &v[8], &k.n, &k.d_model, &k.sin_offset, &k.cos_offset, &k.stride,
                          &k.sin_count, &k.cos_count, &lo, &hi, &format, &build))
        return NULL;
    Py_ssize_t count = block > 0 ? (hi + block - 1) / block : 0;
    if (format < FORMAT_FLOAT32 || format > FORMAT_FLOAT16) {
        PyErr_SetString(PyExc_ValueError, "posenc.core._kernels.combine: format must be 0, 1 or 2");
        release(v, 9);
        return NULL;
    }
    const int best = best_build();
    if (build < 0) build = best;
    if (build > best) {
        PyErr_Format(PyExc_ValueError, "posenc.core._kernels.combine: build %d is not one this CPU runs (0 .. %d)",
                     build, best);
        release(v, 9);
        return NULL;
    }
    if (block < 1 || !check_columns(&k, lo, hi) || !need(&v[0], count * k.n, 8, "sin_a") ||
        !need(&v[1], count * k.n, 8, "cos_a") || !need(&v[2], block * k.n, 8, "sin_b") ||
        !need(&v[3], block * k.n, 8, "cos_b") || !need(&v[4], k.n, 8, "sin_band") ||
        !need(&v[5], k.n, 8, "cos_band") || !need(&v[6], hi * k.d_model, format ? 2 : 4, "out") ||
        !need(&v[7], hi, 8, "unsure")) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "posenc.core._kernels.combine: bad block");
        release(v, 9);
        return NULL;
    }
    Combine rows = combine_build(format, build);
    Py_BEGIN_ALLOW_THREADS
    total = rows(v[0].buf, v[1].buf, v[2].buf, v[3].buf, v[4].buf, v[5].buf, block, &k, lo, hi, v[6].buf,
                 v[7].buf, v[8].buf, v[8].len / 8);
    Py_END_ALLOW_THREADS
    release(v, 9);
    return PyLong_FromSsize_t(total);
}

static PyObject *py_builds(PyObject *self, PyObject *args) {
    static const char *names[] = {"plain", "fma"};
    (void)self;
    (void)args;
    PyObject *result = PyTuple_New(best_build() + 1);
    for (int i = 0; result && i <= best_build(); i++) {
        PyObject *name = PyUnicode_FromString(names[i]);
        if (!name) {
            Py_CLEAR(result);
            break;
        }
        PyTuple_SET_ITEM(result, i, name);
    }
    return result;
}

/* The rotation of strided buffers x, cos, sin and out (out and x of one shape; cos and sin broadcast to it,
   aligned at the last dimension, size 1 broadcasting): rows of `half` pairs, contiguous in all four; the
   other dimensions of size > 1 in x's memory order (strides descending), neighbours merged where all four
   tensors allow. 1 where that leaves three at most (r set, with nothing to do where a size is 0); 0 for
   layouts it does not handle. */
static int rotation_plan(const Py_buffer *v, Py_ssize_t size, Rotation *r) {
    const int nd = v[0].ndim;
    if (nd < 1 || v[3].ndim != nd || v[1].ndim < 1 || v[1].ndim > nd || v[2].ndim < 1 || v[2].ndim > nd) return 0;
    const Py_ssize_t width = v[0].shape[nd - 1];
    const Py_ssize_t item[4] = {size, 4, 4, size};
    for (int t = 0; t < 4; t++) {
        const Py_buffer *b = &v[t];
        if (b->shape[b->ndim - 1] != width || b->strides[b->ndim - 1] != item[t]) return 0;
    }
    if (width < 2 || width % 2) return 0;
    r->half = width / 2;
    Py_ssize_t dims[64][5]; /* n, then the element strides of x, cos, sin, out */
    int count = 0;
    for (int d = 0; d < nd - 1; d++) {
        const Py_ssize_t n = v[0].shape[d];
        if (v[3].shape[d] != n) return 0;
        if (n == 0) { /* nothing to do */
            r->n[0] = r->n[1] = r->n[2] = 0;
            return 1;
        }
        Py_ssize_t dim[5] = {n, 0, 0, 0, 0};
        for (int t = 0; t < 4; t++) {
            const Py_buffer *b = &v[t];
            const int e = d - (nd - b->ndim); /* the tensor's own dimension, aligned at the last */
            const Py_ssize_t m = e >= 0 ? b->shape[e] : 1, stride = e >= 0 ? b->strides[e] : 0;
            if ((m != n && m != 1) || stride < 0 || stride % item[t]) return 0;
            dim[1 + t] = m == 1 ? 0 : stride / item[t];
        }
        if (n == 1) continue;
        if (count == 64) return 0;
        int at = count++; /* insertion by x's stride, descending (stable) */
        while (at > 0 && dims[at - 1][1] < dim[1]) {
            memcpy(dims[at], dims[at - 1], sizeof dim);
            at--;
        }
        memcpy(dims[at], dim, sizeof dim);
    }
    int kept = 0;
    for (int k = 0; k < count; k++) {
        int merge = kept > 0;
        for (int t = 1; merge && t < 5; t++) merge = dims[kept - 1][t] == dims[k][t] * dims[k][0];
        if (merge) {
            dims[kept - 1][0] *= dims[k][0];
            for (int t = 1; t < 5; t++) dims[kept - 1][t] = dims[k][t];
        } else {
            memcpy(dims[kept++], dims[k], sizeof dims[k]);
        }
    }
    if (kept > 3) return 0;
    for (int k = 0; k < 3; k++) {
        const Py_ssize_t *dim = k < 3 - kept ? NULL : dims[k - (3 - kept)];
        r->n[k] = dim ? dim[0] : 1;
        r->x[k] = dim ? dim[1] : 0;
        r->c[k] = dim ? dim[2] : 0;
        r->s[k] = dim ? dim[3] : 0;
        r->o[k] = dim ? dim[4] : 0;
    }
    return 1;
}

/* Part `part` of `parts` of the rotation: the longest dimension (the outermost of equals) cut into `parts`
   runs as even as can be; its size and the pointers' offsets (elements) set. */
static void rotation_part(Rotation *r, Py_ssize_t part, Py_ssize_t parts, Py_ssize_t offsets[4]) {
    int axis = 0;
    for (int k = 1; k < 3; k++)
        if (r->n[k] > r->n[axis]) axis = k;
    const Py_ssize_t lo = r->n[axis] * part / parts, hi = r->n[axis] * (part + 1) / parts;
    r->n[axis] = hi - lo;
    offsets[0] = lo * r->x[axis];
    offsets[1] = lo * r->c[axis];
    offsets[2] = lo * r->s[axis];
    offsets[3] = lo * r->o[axis];
}

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#define MXCSR_STANDARD 0x1F80u /* every exception masked, round to nearest even, no flush to zero (FTZ, DAZ) */
#endif

static PyObject *py_float_mode_standard(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
#if defined(MXCSR_STANDARD)
    return PyBool_FromLong((_mm_getcsr() & 0xE040u) == 0); /* rounding control, FTZ and DAZ: all clear */
#else
    Py_RETURN_TRUE;
#endif
}

static PyObject *py_rotate_half(PyObject *self, PyObject *args) {
    PyObject *objects[4];
    Py_buffer v[4];
    Rotation r;
    Py_ssize_t part, parts, offsets[4] = {0, 0, 0, 0};
    int kind, got = 0, planned = 0;
    unsigned int base, sign, payload;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOi(iiiIII)nn", &objects[0], &objects[1], &objects[2], &objects[3], &kind,
                          &r.mul_second, &r.sub_second, &r.add_second, &base, &sign, &payload, &part, &parts))
        return NULL;
    if (kind < ROTATE_FLOAT32 || kind > ROTATE_FLOAT16 || parts < 1 || part < 0 || part >= parts) {
        PyErr_SetString(PyExc_ValueError, "posenc.core._kernels.rotate_half: bad kind or part");
        return NULL;
    }
    const Py_ssize_t size = kind == ROTATE_FLOAT32 ? 4 : 2;
    for (; got < 4; got++)
        if (PyObject_GetBuffer(objects[got], &v[got], PyBUF_STRIDES | (got == 3 ? PyBUF_WRITABLE : 0)) < 0) break;
    if (got < 4 || v[0].itemsize != size || v[3].itemsize != size || v[1].itemsize != 4 || v[2].itemsize != 4) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "posenc.core._kernels.rotate_half: x and out need items of 4 bytes "
                                              "(kind 0) or 2 (kinds 1, 2), cos and sin of 4 (float32)");
        release(v, got);
        return NULL;
    }
    r.nan.base = base & 0xFFFFu;
    r.nan.sign = sign & 0x8000u;
    r.nan.payload = payload & (kind == ROTATE_BFLOAT16 ? 0x7Fu : 0x3FFu);
    planned = rotation_plan(v, size, &r);
    if (planned && r.n[0] && r.n[1] && r.n[2]) {
        rotation_part(&r, part, parts, offsets);
        const char *x = (const char *)v[0].buf + offsets[0] * size;
        const float *c = (const float *)v[1].buf + offsets[1], *s = (const float *)v[2].buf + offsets[2];
        char *out = (char *)v[3].buf + offsets[3] * size;
        Py_BEGIN_ALLOW_THREADS
#if defined(MXCSR_STANDARD)
        /* this thread's floating-point mode may be another (a pool's thread); the rows need the standard one */
        const unsigned int saved = _mm_getcsr();
        _mm_setcsr(MXCSR_STANDARD);
#endif
        if (kind == ROTATE_FLOAT32)
            rotate_float32(x, c, s, out, &r);
        else if (kind == ROTATE_BFLOAT16)
            rotate_bfloat16(x, c, s, out, &r);
        else
            rotate_float16(x, c, s, out, &r);
#if defined(MXCSR_STANDARD)
        _mm_setcsr(saved | (_mm_getcsr() & 0x3Fu)); /* the mode back, the exception flags raised kept */
#endif
        Py_END_ALLOW_THREADS
    }
    release(v, 4);
    return PyBool_FromLong(planned);
}

static PyMethodDef methods[] = {
    {"direct", py_direct, METH_VARARGS,
     "direct(positions, limbs, sin, cos, n, lo, hi): core.arithmetic.direct of rows lo..hi-1 into sin/cos"
     " (float64)."},
    {"direct_pairs", py_direct_pairs, METH_VARARGS,
     "direct_pairs(positions, limbs, sin, cos, n): core.arithmetic.direct of each position k with limb column k"
     " (n pairs; float64)."},
    {"encode_float32", py_encode_float32, METH_VARARGS,
     "encode_float32(positions, limbs, absolute_error, out, unsure, columns, lo, hi) -> unsure total."},
    {"combine", py_combine, METH_VARARGS,
     "combine(sin_a, cos_a, sin_b, cos_b, sin_band, cos_band, block, out, unsure, where, columns, lo, hi,"
     " format[, build]) -> the number of unsure values; where (int64) receives r*2n + 2i + which of the first"
     " len(where); format 0: float32 out, 1: bfloat16 bits (uint16), 2: float16 bits (uint16); build: an"
     " index into builds() (default: the last)."},
    {"builds", py_builds, METH_NOARGS,
     "builds() -> the builds of combine this CPU runs, by index: ('plain'[, 'fma'])."},
    {"rotate_half", py_rotate_half, METH_VARARGS,
     "rotate_half(x, cos, sin, out, kind, rules, part, parts) -> whether the layout is one it handles (if not,"
     " nothing is written): part of out1 = x1 c1 - x2 s1, out2 = x2 c2 + x1 s2 in float32 (each product and"
     " sum rounded), rounded to x's type; strided buffers, cos and sin (float32) broadcast to x; kind 0:"
     " float32, 1: bfloat16 bits, 2: float16 bits (16-bit items); rules: (mul_second, sub_second, add_second,"
     " nan_base, nan_sign, nan_payload)."},
    {"float_mode_standard", py_float_mode_standard, METH_NOARGS,
     "float_mode_standard() -> whether this thread rounds to nearest even without flushing subnormals."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "posenc.core._kernels",
    "The compiled kernels of posenc.core (C, built at install; see _kernels.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void) {
#if POSENC_FMA
    __builtin_cpu_init();
#endif
    return PyModule_Create(&module);
}
