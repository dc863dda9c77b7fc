"""Prints the coefficient tables of musa_erff (src/backend/cpu/vmath.c).

erf(t) for t = |x| in [0, 4] is a polynomial of degree 5 in d = t - center
on 32 intervals of width 1/8 (the interval floor(8 t), 31 at most); from
t = 3.92 on, erf rounds to 1 in float32. Interval 0 is centred on 0 and
holds erf(t) = t + t (q1 + q2 t + ... + q5 t^4), ERF_E = 1 adding the t, so
that small arguments keep their relative accuracy; the others hold
c0 + c1 d + ... + c5 d^5. Each interval is a least-squares fit of the
relative error at 400 Chebyshev points, its coefficients rounded to float32
one at a time from the lowest, each after refitting the ones above it to
what the rounded ones left (so the rounding of c0 and c1, the largest
terms, is made up for by the others where it can be). The fit's own
largest relative error, rounding included, is printed first, in units of
2^-24; the kernel's measured error is in docs/design.md ("Numerics").

    /usr/bin/python3 tools/vmath_fit.py
"""
import math

import numpy as np

INTERVALS, WIDTH, DEGREE, POINTS = 32, 0.125, 5, 400


def fit(i):
    """(center, [c0..c5]) of interval i and its largest relative error."""
    center = 0.0 if i == 0 else i * WIDTH + WIDTH / 2
    a, b = i * WIDTH, (i + 1) * WIDTH
    k = np.arange(POINTS)
    t = (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (k + 0.5) / POINTS)
    t = t[t > 1e-6]
    d = t - center
    y = np.array([math.erf(v) for v in t])
    plain = d if i == 0 else 0 * d  # the t that ERF_E adds in interval 0
    first = 1 if i == 0 else 0
    coef = [0.0] * first
    for j in range(first, DEGREE + 1):
        A = np.stack([d ** p for p in range(j, DEGREE + 1)], 1)
        rest = y - plain - sum(coef[p] * d ** p for p in range(j))
        sol, *_ = np.linalg.lstsq(A / y[:, None], rest / y, rcond=None)
        coef.append(float(np.float32(sol[0])))
    p = plain + sum(coef[j] * d ** j for j in range(DEGREE + 1))
    return center, coef, float(np.max(np.abs(p / y - 1)) * 2 ** 24)


def main():
    rows = [fit(i) for i in range(INTERVALS)]
    print(f"/* tools/vmath_fit.py: largest relative error of the fits "
          f"{max(r[2] for r in rows):.3f} x 2^-24 */")

    def table(name, values):
        body = ", ".join(values)
        print(f"static const float {name}[32] __attribute__((aligned(64))) = {{{body}}};")

    table("ERF_E", ["1.0f"] + ["0.0f"] * (INTERVALS - 1))
    table("ERF_CENTER", [f"{r[0]}f" for r in rows])
    for j in range(DEGREE + 1):
        table(f"ERF_C{j}", [f"{r[1][j]:.9e}f" for r in rows])


if __name__ == "__main__":
    main()
