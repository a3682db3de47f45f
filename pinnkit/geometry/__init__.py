"""Geometry: where a problem lives, its named boundary pieces, and how to sample them
(`AbstractDomain`; `Box`, `Interval`, `SpaceTime`)."""

from .domains import AbstractDomain as AbstractDomain
from .domains import Box as Box
from .domains import Interval as Interval
from .domains import SpaceTime as SpaceTime
