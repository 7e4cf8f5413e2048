"""mpmath helpers shared by the exact forms (mpmath is imported on call)."""


def log(u, x):
    """log u: from x = u - 1 near 1, where it keeps the digits of x; from u
    elsewhere, where x rounds to -1 for u below 1e-50."""
    import mpmath as mp

    return mp.log1p(x) if abs(x) < 0.5 else mp.log(u)


def xlog(u, x):
    """u log u, 0 at u = 0."""
    import mpmath as mp

    return mp.mpf(0) if u == 0 else u * log(u, x)
