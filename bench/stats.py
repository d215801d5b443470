"""Small statistics shared by bench/podstart.py and bench/report.py (standard library only)."""
import math
import random

# Bootstrap settings of every confidence interval the bench reports (issue 22 §5): fixed, so that
# the same samples always give the same interval.
RESAMPLES = 2000
SEED = 22
LEVEL = 0.95


def pct(v, q):
    """Nearest-rank percentile q (0..1] of the samples v; nan when v is empty."""
    if not v:
        return float("nan")
    s = sorted(v)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def diff_ci(x, base, q, resamples=RESAMPLES, seed=SEED, level=LEVEL):
    """Difference of the q-percentiles pct(x, q) - pct(base, q), in the samples' unit, with a
    percentile-bootstrap confidence interval: each of `resamples` rounds draws len(x) samples of x
    and len(base) of base with replacement (random.choices, independently: the two sets may
    differ in size when a pod failed) and takes the difference; the interval is the
    (1-level)/2 and (1+level)/2 quantiles of those differences. Returns (point, low, high); all
    nan when either set is empty."""
    if not x or not base:
        return (float("nan"),) * 3
    rng = random.Random(seed)
    d = sorted(pct(rng.choices(x, k=len(x)), q) - pct(rng.choices(base, k=len(base)), q) for _ in range(resamples))
    lo = d[int(math.floor((1 - level) / 2 * resamples))]
    hi = d[min(resamples - 1, int(math.ceil((1 + level) / 2 * resamples)) - 1)]
    return pct(x, q) - pct(base, q), lo, hi
