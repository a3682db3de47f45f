"""`HyperBall` moved to `pinnkit.geometry.hyperball` (beside it, `pinnkit.geometry.Ball`
is the 3-D CSG ball of `pinnkit.geometry.round`); this path stays for one release."""

from .hyperball import HyperBall as HyperBall
from .hyperball import beta_quantile as beta_quantile
