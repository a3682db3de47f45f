"""pinnkit: physics-informed neural networks in JAX, from a YAML config to a trained,
evaluated and plotted solution, on one device or many.

Importing pinnkit never changes JAX's global configuration.
"""

from . import diffops as diffops
from ._version import __version__ as __version__
from .errors import ConfigError as ConfigError
from .errors import PinnkitError as PinnkitError
from .errors import RunDirError as RunDirError
from .geometry.domains import Box as Box
from .geometry.domains import Interval as Interval
from .geometry.domains import SpaceTime as SpaceTime
from .nn.layers import MLP as MLP
from .nn.network import Network as Network
from .physics.constraints import AbstractHardConstraint as AbstractHardConstraint
from .physics.constraints import HardDirichlet as HardDirichlet
from .physics.constraints import InitialValue as InitialValue
from .physics.problem import Problem as Problem
from .physics.terms import Dirichlet as Dirichlet
from .physics.terms import Equation as Equation
from .physics.terms import Initial as Initial
from .physics.terms import Neumann as Neumann
from .physics.terms import Observation as Observation
from .physics.terms import Robin as Robin
from .run.build import build_run as build_run
from .run.config import RunConfig as RunConfig
from .run.config import load_config as load_config
from .run.rundir import RunData as RunData
from .run.rundir import load_run as load_run
from .run.rundir import train_to_dir as train_to_dir
from .sphere.domain import Sphere as Sphere
from .train.callbacks import Callback as Callback
from .train.callbacks import EarlyStopping as EarlyStopping
from .train.callbacks import ExtraMetrics as ExtraMetrics
from .train.callbacks import TrainInfo as TrainInfo
from .train.collocation import Sampler as Sampler
from .train.loop import RESULTS as RESULTS
from .train.loop import FitResult as FitResult
from .train.loop import fit as fit
from .train.spec import Run as Run
