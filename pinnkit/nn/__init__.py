"""Networks: `Network` (input map -> core -> output transform), the MLP core and the
other cores (`network.kind`: modified MLP, PirateNet, random weight factorisation),
embeddings and hard-constraint transforms."""

from .layers import MLP as MLP
from .layers import FourierFeatures as FourierFeatures
from .layers import HardDirichlet as HardDirichlet
from .layers import Network as Network
from .layers import Normalize as Normalize
from .layers import Parity as Parity
from .layers import PeriodicEmbedding as PeriodicEmbedding
from .nets import Dense as Dense
from .nets import ModifiedMLP as ModifiedMLP
from .nets import PirateNet as PirateNet
