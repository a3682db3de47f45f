"""A safe expression language for PDEs written in a config (``docs/expressions.md``).

Three stages, one module each:

1. `_parse`: text → syntax tree, with Python's parser under a strict whitelist (no
   `eval`, `exec` or `compile` of user text ever; no attributes, imports, lambdas...).
2. `_resolve`: names → coordinates, parameters, fields, helpers, derivatives
   (``u_xx``, ``lap(u)``, ``d(k*u_x, x)``); vectors expanded to scalar components;
   constants folded; derivatives of expressions taken symbolically (`_ir`).
3. `_eval`: components → pure JAX functions ``fn(f, coeffs)`` (residuals, read through
   `Fields`, so the derivative method computes exactly the derivatives named) or
   ``fn(x)`` (exact solutions, boundary data).

```python
sym = Symbols(coords=("x", "y"), spatial=("x", "y"), fields=("u",), params={"k": 2.0})
r = Resolver(sym)
pde = residual_function(r.components("-k*lap(u) - sin(pi*x)", "equations.pde"))
```
"""

from ._eval import evaluate as evaluate
from ._eval import host_function as host_function
from ._eval import point_function as point_function
from ._eval import residual_function as residual_function
from ._ir import Algebra as Algebra
from ._ir import Ex as Ex
from ._parse import MAX_DEPTH as MAX_DEPTH
from ._parse import MAX_LENGTH as MAX_LENGTH
from ._parse import ExprError as ExprError
from ._parse import Node as Node
from ._parse import parse as parse
from ._resolve import ALL_FUNCTIONS as ALL_FUNCTIONS
from ._resolve import RESERVED as RESERVED
from ._resolve import Resolver as Resolver
from ._resolve import Symbols as Symbols
