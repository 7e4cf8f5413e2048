"""Generators f(w) as DCP expressions, for the cvxpy backend.

The convex programs use the ratios w = pi_new / pi_old as variables, so a
divergence is D_f = sum_b pi_old(b) f(w_b): a nonnegative Parameter times a
convex expression of w, which is DPP, and w is of order 1 whatever the
probabilities (better scaled than the probabilities themselves, which span
many decades near p = 0 and p = 1). Every form is the normalised generator
(f(1) = f'(1) = 0), so each term is >= 0 and small deltas are not lost to
cancelling first-order terms.

cvxpy is imported inside the functions: importing bandsolve does not.
"""

from __future__ import annotations


def kl_generator(w, a):
    import cvxpy as cp

    return w - 1 - cp.log(w)  # u - 1 - log u


def rkl_generator(w, a):
    import cvxpy as cp

    return cp.kl_div(w, 1)  # u log u - u + 1


def tv_generator(w, a):
    import cvxpy as cp

    return cp.abs(w - 1) / 2


def chi2_generator(w, a):
    import cvxpy as cp

    return cp.square(w - 1)


def neyman_generator(w, a):
    import cvxpy as cp

    return w - 2 + cp.inv_pos(w)  # (u - 1)^2 / u


def hellinger_generator(w, a):
    import cvxpy as cp

    return w + 1 - 2 * cp.sqrt(w)  # (sqrt u - 1)^2


def js_generator(w, a):
    import cvxpy as cp

    mix = (w + 1) / 2  # the Jensen-Shannon midpoint, in ratio units
    return (cp.kl_div(w, mix) + cp.kl_div(1, mix)) / 2


def alpha_generator(w, a):
    import cvxpy as cp

    # w^a is convex for a > 1 or a < 0 and concave for 0 < a < 1, where the
    # sign of a (a - 1) flips it: convex for every a not 0 or 1
    return (cp.power(w, a) - 1 - a * (w - 1)) / (a * (a - 1))
