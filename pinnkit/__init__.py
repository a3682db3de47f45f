"""pinnkit: physics-informed neural networks in JAX, from a YAML config to a trained,
evaluated and plotted solution, on one device or many.

Importing pinnkit never changes JAX's global configuration.
"""

from . import diffops as diffops
from .build import Run as Run
from .build import build_run as build_run
from .config import RunConfig as RunConfig
from .config import load_config as load_config
from .domains import Box as Box
from .domains import Interval as Interval
from .domains import SpaceTime as SpaceTime
from .errors import ConfigError as ConfigError
from .errors import PinnkitError as PinnkitError
from .errors import RunDirError as RunDirError
from .nn import MLP as MLP
from .nn import HardDirichlet as HardDirichlet
from .nn import Network as Network
from .problem import Problem as Problem
from .rundir import RunData as RunData
from .rundir import load_run as load_run
from .rundir import train_to_dir as train_to_dir
from .sampling import Sampler as Sampler
from .terms import Dirichlet as Dirichlet
from .terms import Equation as Equation
from .terms import Initial as Initial
from .terms import Neumann as Neumann
from .terms import Observation as Observation
from .terms import Robin as Robin
from .train import RESULTS as RESULTS
from .train import FitResult as FitResult
from .train import fit as fit

__version__ = "0.1.0"
