/* The rotor persistent DP of solvers/chain/dp.py and the least-memory DP of min_memory.py, in C.
 *
 * Built on first use by solvers/chain/ckernel.py with the system C compiler (no fast-math, no
 * FMA contraction: every value is the same IEEE double sum as in the numba and numpy kernels,
 * so the tables are equal bit for bit; tests/test_chain_kernels.py checks it) and loaded with
 * ctypes. Notation of docs/chain.md: x, xbar, o_fa, o_fn, o_b (sizes, int64), u_fa (F_all's time),
 * u_b (times), sf[k] = u_fn[0] + ... + u_fn[k-1] (no-grad forward times); the packed table C has row off[i] + l - i for (i, l) and
 * columns m = 0..M; first[r] is the least m where row r is finite (M + 1 if none).
 *
 * rotor_fill_part, called part by part over the whole table, computes exactly the table of the
 * recurrence in dp.py; only the order of the work differs from the plain loops, and options are
 * skipped where they provably change nothing:
 *  - every row is non-increasing in m, so an option (C_ck with split j) whose value at M (its
 *    least) is not below the row's current value at m can only lower the row below that m: it
 *    is tried on [m0, end), end found by bisection;
 *  - on each aligned block of BLK values of m it is tried only when its value at the block's end
 *    (a lower bound over the block, read from a per-row summary S of block-end values) is below
 *    the row's current value at the block's start (its largest value over the block);
 *  - the values of l are taken TILE at a time: the rows (i, j-1) that C_ck reads for one l are
 *    read for TILE values of l while they are in cache (a row (i, j-1) is final once every
 *    split j' <= j-1 has been applied, so j ascending is a valid order).
 * A minimum over the same candidate values does not depend on their order, so the table is the
 * one of the plain loops.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#define BLK 16
#define TILE 4

static inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

/* The layout constants, read by ckernel.py to size the buffers of rotor_fill_part. */
const int64_t rotor_blk = BLK, rotor_tile = TILE;

/* One part of the table: the rows (i, l) of the tile of l0 (l = l0 .. min(l0 + TILE, L + 1) - 1, l0 a
 * multiple of TILE) for i = i_hi down to i_lo (i_hi = l1 - 1 starts the tile), into C (nrows x (M+1),
 * row-major) and first. The caller owns the buffers kept from part to part: S (nrows x nb, nb =
 * (M + BLK) / BLK: the block-end summaries of the final rows, read by later tiles), col (TILE x (L+1)
 * x (M+1)) and fcol (TILE x (L+1)) (the rows (j, l) of the current tile, read by the next values of
 * i). Calling it for every tile in ascending order, each tile's i from l1 - 1 down to 0 in any split,
 * does exactly the work of one loop over everything (the table is the same bit for bit); ckernel.py
 * returns to Python between parts, so a Ctrl-C stops the fill within one part. */
void rotor_fill_part(int64_t L, int64_t M, int64_t l0, int64_t i_hi, int64_t i_lo, const int64_t *x,
                     const int64_t *xbar, const int64_t *o_fa, const int64_t *o_fn, const int64_t *o_b,
                     const double *u_fa, const double *u_b, const double *sf, const int64_t *off, double *C,
                     int64_t *first, double *S, double *col, int64_t *fcol)
{
    const int64_t W = M + 1, nb = (M + BLK) / BLK;
    int64_t sw[TILE];
    const int64_t l1 = imin(l0 + TILE, L + 1);
    for (int64_t i = i_hi; i >= i_lo; i--) {
        /* leaves and C_all: F_all(i), (i+1, l), B(i) */
        for (int64_t l = imax(i, l0); l < l1; l++) {
            const int64_t g = l - l0;
            double *c = col + (g * (L + 1) + i) * W;
            const double t = u_fa[i] + u_b[i];
            for (int64_t m = 0; m < W; m++) c[m] = INFINITY;
            if (i == l) {
                const int64_t need = imax(x[i + 1] + xbar[i + 1] + o_fa[i], x[i] + x[i + 1] + xbar[i + 1] + o_b[i]);
                for (int64_t m = imax(need, 0); m < W; m++) c[m] = t;
            } else {
                const int64_t xb = xbar[i + 1];
                const double *s = col + (g * (L + 1) + i + 1) * W;
                const int64_t lo = imax(imax(x[l + 1] + xb + o_fa[i], x[i] + x[i + 1] + xb + o_b[i]),
                                        xb + fcol[g * (L + 1) + i + 1]);
                for (int64_t m = lo; m < W; m++) c[m] = t + s[m - xb];
            }
            sw[g] = x[l + 1] + x[i + 1] + o_fn[i]; /* sweep(i, i+1, l) */
        }
        /* C_ck: F_ck(i) F_n(i+1..j-1), (j, l), (i, j-1), for j ascending */
        for (int64_t j = i + 1; j <= l1; j++) {
            const int64_t lf = j - 1;
            if (lf >= l0) { /* row (i, j-1) is final: store it, its first finite m, its summary */
                const int64_t g = lf - l0, r = off[i] + (lf - i);
                const double *c = col + (g * (L + 1) + i) * W;
                int64_t f = W;
                for (int64_t m = 0; m < W; m++)
                    if (c[m] < INFINITY) { f = m; break; }
                first[r] = f;
                fcol[g * (L + 1) + i] = f;
                memcpy(C + r * W, c, sizeof(double) * (size_t)W);
                double *sr = S + r * nb;
                for (int64_t k = 0; k < nb; k++) sr[k] = c[imin(k * BLK + BLK, W) - 1];
            }
            if (j == l1) break;
            const int64_t xj = x[j], rb = off[i] + (j - 1 - i), fb = first[rb];
            const double *b = C + rb * W, *sb = S + rb * nb;
            const double base = sf[j] - sf[i];
            for (int64_t l = imax(j, l0); l < l1; l++) {
                const int64_t g = l - l0;
                if (j > i + 1) sw[g] = imax(sw[g], x[l + 1] + x[j - 1] + x[j] + o_fn[j - 1]);
                const double *a = col + (g * (L + 1) + j) * W;
                double *c = col + (g * (L + 1) + i) * W;
                const int64_t m0 = imax(imax(sw[g], xj + fcol[g * (L + 1) + j]), fb);
                if (m0 > M) continue;
                const double least = base + a[M - xj] + sb[nb - 1]; /* sb[nb-1] = b[M] */
                int64_t lo = m0, hi = W;
                while (lo < hi) {
                    const int64_t mid = (lo + hi) / 2;
                    if (c[mid] > least) lo = mid + 1;
                    else hi = mid;
                }
                const int64_t end = lo;
                for (int64_t k = m0 / BLK; end > m0 && k <= (end - 1) / BLK; k++) {
                    const int64_t s0 = imax(m0, k * BLK), s1 = imin(end, k * BLK + BLK);
                    if (base + a[s1 - 1 - xj] + sb[k] < c[s0]) {
                        for (int64_t m = s0; m < s1; m++) {
                            const double v = base + a[m - xj] + b[m];
                            c[m] = v < c[m] ? v : c[m];
                        }
                    }
                }
            }
        }
    }
}

/* Mmin(i, l) and the choice (-1 leaf, 0 C_all, j > 0 split j) into (L+1) x (L+1) row-major
 * arrays, as _min_memory_numba in min_memory.py (ties keep C_all, then the smallest j). */
void rotor_min_memory(int64_t L, const int64_t *x, const int64_t *xbar, const int64_t *o_fa, const int64_t *o_fn,
                      const int64_t *o_b, int64_t *Mm, int64_t *ch)
{
    const int64_t n = L + 1;
    for (int64_t l = 0; l <= L; l++) {
        for (int64_t i = l; i >= 0; i--) {
            if (i == l) {
                Mm[i * n + l] = imax(x[i + 1] + xbar[i + 1] + o_fa[i], x[i] + x[i + 1] + xbar[i + 1] + o_b[i]);
                ch[i * n + l] = -1;
                continue;
            }
            const int64_t xb = xbar[i + 1];
            int64_t best = imax(imax(x[l + 1] + xb + o_fa[i], x[i] + x[i + 1] + xb + o_b[i]), xb + Mm[(i + 1) * n + l]);
            int64_t arg = 0, sw = x[l + 1] + x[i + 1] + o_fn[i];
            for (int64_t j = i + 1; j <= l; j++) {
                if (j > i + 1) sw = imax(sw, x[l + 1] + x[j - 1] + x[j] + o_fn[j - 1]);
                const int64_t v = imax(imax(sw, x[j] + Mm[j * n + l]), Mm[i * n + j - 1]);
                if (v < best) {
                    best = v;
                    arg = j;
                }
            }
            Mm[i * n + l] = best;
            ch[i * n + l] = arg;
        }
    }
}
