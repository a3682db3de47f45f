"""Geometry inputs answered in seconds and refused when impossible: vector Dirichlet data
under every hard-constraint kind, features below the float resolution, mesh values, and
polygons / CSG trees with many vertices and operands (issue 38)."""

import jax.numpy as jnp
import pytest

from pinnkit.run.build import build_run
from pinnkit.run.config import from_dict
from pinnkit.train.loss import make_loss
from pinnkit.train.step import TrainState, init_extra, make_chunk, point_arrays, split_model, train_key


def _config(domain, fields, equations, conditions, batch, hard=True):
    return {
        "problem": {"name": "expression", "params": {
            "domain": domain, "fields": fields, "equations": equations, "conditions": conditions}},
        "network": {"width": 8, "depth": 1, "hard_constraint": hard},
        "sampler": {"method": "uniform", "batch": batch},
        "diffops": {"method": "taylor"},
        "train": {"steps": 1, "chunk": 1}, "checkpoint": {"every": 0}, "eval": {"resolution": 5},
    }


def _lower_step(cfg):
    """Traces and lowers the training chunk (the loss inside ``shard_map``, its gradient
    and the update) as ``pinnkit train`` compiles it, without compiling: a trace-time
    error of the hard constraint shows here in a second."""
    run = build_run(from_dict(cfg))
    params, static = split_model(run)
    ph = run.phases[0]
    state = TrainState(params, ph.init(params), jnp.asarray(0, jnp.int32), init_extra(run))
    chunk = make_chunk(make_loss(run, static), ph, 1, train_key(run), run=run)
    chunk.lower(point_arrays(run), state)
    return run


UV = {"pu": "-lap(u)", "pv": "-lap(v)"}
PLATE = {"difference": [{"rectangle": {"lower": [-1, -1], "upper": [1, 1], "name": "outer"}},
                        {"disk": {"center": [0.3, 0.2], "radius": 0.4, "name": "inner"}}]}
BOX = {"x": [-1, 1], "y": [-1, 1]}


@pytest.mark.parametrize("value", [["-y", "x"], [1, "x*y"]])
@pytest.mark.parametrize("kind", ["distance", "box", "initial"])
def test_vector_dirichlet_under_every_hard_constraint_kind(kind, value):
    """``dirichlet: [-y, x]`` on ``[u, v]`` with ``network.hard_constraint`` built and
    traced inside ``shard_map`` (was: "Primitive stack requires varying manual axes to
    match"): constant components mixed with coordinate ones, on a shape (distance
    functions), on a box (the polynomial `HardDirichlet`) and as an initial value."""
    if kind == "distance":
        cfg = _config(PLATE, ["u", "v"], UV, {
            "outer": {"where": "outer", "fields": ["u", "v"], "dirichlet": 0},
            "inner": {"where": "inner", "fields": ["u", "v"], "dirichlet": value}}, {"pu": 32, "pv": 32})
    elif kind == "box":
        cfg = _config(BOX, ["u", "v"], UV, {
            "wall": {"where": "boundary", "fields": ["u", "v"], "dirichlet": value}}, {"pu": 32, "pv": 32})
    else:
        cfg = _config({"x": [-1, 1], "y": [-1, 1], "t": [0, 1]}, ["u", "v"],
                      {"pu": "u_t - lap(u)", "pv": "v_t - lap(v)"},
                      {"start": {"where": "initial", "fields": ["u", "v"], "initial": value}},
                      {"pu": 32, "pv": 32})
    run = _lower_step(cfg)
    hc = run.problem.hard_constraint
    assert hc is not None, "the condition must be imposed exactly, not as a loss term"
    assert type(hc).__name__ == {"distance": "DistanceDirichlet", "box": "HardDirichlet",
                                 "initial": "InitialValue"}[kind]
