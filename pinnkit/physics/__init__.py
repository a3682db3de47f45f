"""The physics wing: a PDE problem as data (`Problem`), its pointwise loss terms,
coefficients (learnt or fixed), observations and hard constraints. It knows no training."""

from .constraints import AbstractHardConstraint as AbstractHardConstraint
from .constraints import AbstractTimeRestart as AbstractTimeRestart
from .constraints import HardDirichlet as HardDirichlet
from .constraints import InitialValue as InitialValue
from .problem import Problem as Problem
from .sections import SectionFlux as SectionFlux
from .terms import AbstractRowTerm as AbstractRowTerm
from .terms import AbstractTerm as AbstractTerm
from .terms import CircleFlux as CircleFlux
from .terms import Dirichlet as Dirichlet
from .terms import Equation as Equation
from .terms import Initial as Initial
from .terms import Neumann as Neumann
from .terms import Observation as Observation
from .terms import PointEquation as PointEquation
from .terms import Robin as Robin
