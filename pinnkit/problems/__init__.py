"""Built-in problems: ``PROBLEMS[name](**params) -> Problem``.

A config names one of these in ``problem.name``, or a user's own factory as
``path/to/file.py:make_problem``. The table is written out by hand on purpose: no
registration decorators, no import-time side effects.
"""

from .allen_cahn import allen_cahn
from .burgers import burgers
from .cavity import lid_driven_cavity
from .climate import ebm, rossby_haurwitz, tracer_transport, williamson2, williamson6
from .dfg import dfg_cylinder
from .dfg2 import dfg_assimilation, dfg_shedding
from .dfg3d import dfg_cylinder_3d
from .expression import expression
from .flow import incompressible_flow
from .highdim import allen_cahn_ball, poisson_ball
from .inverse import burgers_inverse, ebm_inverse, flow_assimilation, kovasznay_inverse
from .navier_stokes import beltrami_flow, channel_flow, kovasznay, taylor_green
from .periodic_flow import periodic_flow
from .pipe import pipe_flow
from .poisson import poisson, poisson2d
from .poisson_domain import poisson_domain

PROBLEMS = {
    "poisson2d": poisson2d,
    "poisson": poisson,
    "poisson_domain": poisson_domain,
    "expression": expression,
    "incompressible_flow": incompressible_flow,
    "kovasznay": kovasznay,
    "lid_driven_cavity": lid_driven_cavity,
    "taylor_green": taylor_green,
    "periodic_flow": periodic_flow,
    "beltrami_flow": beltrami_flow,
    "channel_flow": channel_flow,
    "dfg_cylinder": dfg_cylinder,
    "dfg_shedding": dfg_shedding,
    "dfg_assimilation": dfg_assimilation,
    "dfg_cylinder_3d": dfg_cylinder_3d,
    "pipe_flow": pipe_flow,
    "burgers": burgers,
    "allen_cahn": allen_cahn,
    "burgers_inverse": burgers_inverse,
    "kovasznay_inverse": kovasznay_inverse,
    "ebm_inverse": ebm_inverse,
    "flow_assimilation": flow_assimilation,
    "ebm": ebm,
    "tracer_transport": tracer_transport,
    "williamson2": williamson2,
    "williamson6": williamson6,
    "rossby_haurwitz": rossby_haurwitz,
    "poisson_ball": poisson_ball,
    "allen_cahn_ball": allen_cahn_ball,
}
