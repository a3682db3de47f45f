"""Training: the data-only spec (`Run`), the objective (`Loss`), optimiser phases
(`pinnkit.train.phases`), the scanned step (`pinnkit.train.step`) and the host loop
(`fit`) and its callbacks, plus time windows, loss weighting, adaptive point sets, the collocation
sampler and checkpoints. Nothing here reads a config or knows the problem table."""

from .callbacks import Callback as Callback
from .callbacks import EarlyStopping as EarlyStopping
from .callbacks import ExtraMetrics as ExtraMetrics
from .loop import RESULTS as RESULTS
from .loop import FitResult as FitResult
from .loop import TrainingError as TrainingError
from .loop import fit as fit
from .loss import Loss as Loss
from .spec import Run as Run
from .spec import TimeWindows as TimeWindows
