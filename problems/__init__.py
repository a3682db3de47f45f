"""Built-in problems: ``PROBLEMS[name](**params) -> Problem``.

A config names one of these in ``problem.name``, or a user's own factory as
``path/to/file.py:make_problem``. The table is written out by hand on purpose: no
registration decorators, no import-time side effects.
"""

from .expression import expression
from .burgers import burgers
from .inverse import burgers_inverse, ebm_inverse, flow_assimilation, kovasznay_inverse
from .poisson import poisson, poisson2d

PROBLEMS = {
    "poisson2d": poisson2d,
    "poisson": poisson,
    "expression": expression,
    "burgers": burgers,
    "burgers_inverse": burgers_inverse,
    "kovasznay_inverse": kovasznay_inverse,
    "ebm_inverse": ebm_inverse,
    "flow_assimilation": flow_assimilation,
}
