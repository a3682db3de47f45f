"""`HostFunction` lives in `pinnkit._host` (below physics, so that the device mesh and
evaluation can test for it without importing physics); this public path stays."""

from .._host import HostFunction as HostFunction
