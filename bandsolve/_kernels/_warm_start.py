"""Warm starts for the root finder, from the band on a grid in logit p.

``_solver.margin_at`` fills the table; this module interpolates it.

For one delta and many elements, solving the band once on a fine uniform
grid in z = log(p / (1 - p)) and interpolating the solver's own variable
x = log(m / (b - m)) gives each element a starting point within about 1e-9,
from which one or two Newton steps finish. The safeguarded iteration is
unchanged, so a poor start (near a saturation threshold, where the table has
NaN nodes, or outside the grid) costs iterations, never accuracy.

z covers p in [4e-18, 1 - 4e-18]; in z both tails of x are close to linear,
so four-point Lagrange interpolation is accurate to O(h^4).
"""

import math

import numpy as np

from ._util import jit

Z_MIN = -40.0
Z_MAX = 40.0
NODES = 4097
NODE_Z = np.linspace(Z_MIN, Z_MAX, NODES)

@jit
def interpolate(table, z):
    """Four-point Lagrange interpolation of the table at z; NaN off the grid
    or next to a NaN node."""
    n = table.size
    if n == 0:
        return math.nan
    t = (z - Z_MIN) * ((n - 1) / (Z_MAX - Z_MIN))
    if not (1.0 <= t < n - 2.0):  # also false for NaN
        return math.nan
    k = int(t)
    s = t - k
    sm1 = s - 1.0
    sm2 = s - 2.0
    sp1 = s + 1.0
    return (-(s * sm1 * sm2) * table[k - 1] / 6.0
            + (sp1 * sm1 * sm2) * table[k] / 2.0
            - (sp1 * s * sm2) * table[k + 1] / 2.0
            + (sp1 * s * sm1) * table[k + 2] / 6.0)
