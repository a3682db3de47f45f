"""Networks: `Network` (input map -> core -> output transform), the MLP core and the
other cores (`network.kind`: modified MLP, PirateNet, random weight factorisation),
embeddings. (`HardDirichlet`, imported from here before, is a hard constraint:
`pinnkit.physics.constraints`; this path stays for one release.)"""

from .embeddings import FourierFeatures as FourierFeatures
from .embeddings import Normalize as Normalize
from .embeddings import PeriodicEmbedding as PeriodicEmbedding
from .layers import MLP as MLP
from .layers import HardDirichlet as HardDirichlet
from .nets import Dense as Dense
from .nets import ModifiedMLP as ModifiedMLP
from .nets import PirateNet as PirateNet
from .network import Network as Network
from .network import Parity as Parity
