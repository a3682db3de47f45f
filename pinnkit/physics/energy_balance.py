r"""The diffusive energy-balance model of North (1975) in $x = \sin\varphi$, the pieces its
forward (`pinnkit.problems.climate.ebm`, benchmark C1) and inverse
(`pinnkit.problems.inverse.ebm_inverse`) problems share:

$$C\,T_t = D\,\partial_x\big[(1 - x^2)\,T_x\big] - (A + B\,T) + Q\,s(x)\,a(x),$$

insolation $s = 1 - s_2P_2$ and co-albedo (absorbed fraction) $a = a_0 - a_2P_2$
(`absorbed_fraction`), $P_n$ the Legendre polynomials (`legendre_p2`, `legendre_p4`), $T$
in °C; the steady solution is $T_0 + T_2P_2 + T_4P_4$ (`ebm_steady_modes`).
"""

from __future__ import annotations

# North / Budyko–Sellers constants (benchmark C1, docs/benchmarks.md): W m^-2, W m^-2 K^-1, W m^-2.
EBM_A, EBM_B, EBM_Q = 210.0, 2.0, 1365.2 / 4


def legendre_p2(x):
    """$P_2(x) = (3x^2 - 1)/2$ (array or scalar, any dtype)."""
    return 0.5 * (3 * x**2 - 1)


def legendre_p4(x):
    """$P_4(x) = (35x^4 - 30x^2 + 3)/8$."""
    return (35 * x**4 - 30 * x**2 + 3) / 8


def absorbed_fraction(x, a0: float = 0.7, a2: float = 0.078, s2: float = 0.48):
    """$s(x)\\,a(x) = (1 - s_2P_2(x))\\,(a_0 - a_2P_2(x))$: the insolation's shape times the
    co-albedo (dimensionless; North's 0.7, 0.078, 0.48 by default)."""
    return (1 - s2 * legendre_p2(x)) * (a0 - a2 * legendre_p2(x))


def ebm_steady_modes(D: float, A: float = EBM_A, B: float = EBM_B, Q: float = EBM_Q, *,
                     a0: float = 0.7, a2: float = 0.078, s2: float = 0.48):
    r"""Legendre modes $(T_0, T_2, T_4)$ of the steady EBM in °C, for insolation
    $s = 1 - s_2P_2$ and co-albedo $a = a_0 - a_2P_2$ (units of `D`, `A`, `B`, `Q` as in
    the module docstring: W m⁻² K⁻¹, W m⁻², W m⁻² K⁻¹, W m⁻²).

    With $s\,a = c_0 + c_2 P_2 + c_4 P_4$ (using
    $P_2^2 = \tfrac{18}{35}P_4 + \tfrac27 P_2 + \tfrac15$), each mode solves
    $-(B + n(n+1)D)\,T_n + Q c_n - A\,\delta_{n0} = 0$ because
    $\partial_x[(1-x^2)P_n'] = -n(n+1)P_n$.
    """
    k = s2 * a2
    c0, c2, c4 = a0 + k / 5, -a2 - s2 * a0 + k * 2 / 7, k * 18 / 35
    return (Q * c0 - A) / B, Q * c2 / (B + 6 * D), Q * c4 / (B + 20 * D)
