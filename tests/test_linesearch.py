"""`pinnkit.optim.linesearch.zoom_linesearch` takes optax's zoom line search's steps to the
bit (the same arithmetic, one evaluation of the objective per iteration instead of one per
branch), and its program holds the objective once where optax's holds it twice.

The trajectories are L-BFGS's (optax.lbfgs with either line search) on a small tanh
network's regression loss, float32 and float64, with each initial-guess strategy, and
with 2 line-search iterations at most (searches that run out and take the safe step).
The self-scaled methods' `search_step` (the loss at the parameters evaluated in the same
loop) takes their `update`'s steps to the bit.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from pinnkit.optim.linesearch import zoom_linesearch


def _problem(dtype):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.uniform(-1, 1, (64, 2)), dtype)
    y = jnp.sin(3 * x[:, :1]) * jnp.cos(2 * x[:, 1:])
    params = {"w1": jnp.asarray(rng.normal(0, 1, (2, 16)), dtype), "b1": jnp.zeros((1, 16), dtype),
              "w2": jnp.asarray(rng.normal(0, 0.3, (16, 1)), dtype)}

    def loss(p):
        return jnp.mean((jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] - y) ** 2)

    return loss, params


def _trajectory(linesearch, dtype, steps):
    loss, params = _problem(dtype)
    opt = optax.lbfgs(memory_size=5, linesearch=linesearch)

    @jax.jit
    def step(params, state):
        value, grad = jax.value_and_grad(loss)(params)
        updates, state = opt.update(grad, state, params, value=value, grad=grad, value_fn=loss)
        return optax.apply_updates(params, updates), state, value

    state, values = opt.init(params), []
    for _ in range(steps):
        params, state, value = step(params, state)
        values.append(value)
    return np.asarray(values), params, state


@pytest.mark.parametrize(("x64_on", "guess", "max_steps"),
                         [(False, "keep", 16), (True, "one", 16), (True, "keep", 2), (False, "one", 2)])
def test_same_steps_as_optax_to_the_bit(x64_on, guess, max_steps):
    old = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", x64_on)
    try:
        dtype = jnp.float64 if x64_on else jnp.float32
        ref = optax.scale_by_zoom_linesearch(max_steps, initial_guess_strategy=guess)
        ours = zoom_linesearch(max_steps, initial_guess_strategy=guess)
        v_ref, p_ref, s_ref = _trajectory(ref, dtype, 20)
        v_new, p_new, s_new = _trajectory(ours, dtype, 20)
    finally:
        jax.config.update("jax_enable_x64", old)
    assert v_ref[-1] < 0.5 * v_ref[0]  # it trains: the comparison is not of a stuck run
    np.testing.assert_array_equal(v_new, v_ref)
    for a, b in zip(jax.tree.leaves((p_new, s_new)), jax.tree.leaves((p_ref, s_ref)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _tanh_count(linesearch):
    loss, params = _problem(jnp.float32)
    value, grad = jax.value_and_grad(loss)(params)
    state = linesearch.init(params)
    jaxpr = jax.make_jaxpr(lambda p, s: linesearch.update(
        jax.tree.map(jnp.negative, grad), s, p, value=value, grad=grad, value_fn=loss))(params, state)
    return str(jaxpr).count(" tanh ")


def test_objective_traced_once():
    assert _tanh_count(optax.scale_by_zoom_linesearch(16)) == 2  # one per branch
    assert _tanh_count(zoom_linesearch(16)) == 1


@pytest.mark.parametrize("member", ["ssbfgs", "ssbroyden"])
def test_search_step_equals_update_to_the_bit(x64, member):
    """`search_step` (the loss at the parameters evaluated in the line search's loop) takes
    `update`'s steps (the loss evaluated before the line search) to the bit, and its
    program holds the loss once where `update`'s holds it twice."""
    from pinnkit.optim import quasi_newton

    loss, params = _problem(jnp.float64)
    opt = getattr(quasi_newton, member)()
    def with_aux(p):
        value = loss(p)
        return value, {"mse": value}

    vg = jax.value_and_grad(with_aux, has_aux=True)

    @jax.jit
    def by_update(params, state):
        (value, _), grad = vg(params)
        updates, state = opt.update(grad, state, params, value=value, value_fn=loss)
        return optax.apply_updates(params, updates), state, state.linesearch.value

    @jax.jit
    def searched(params, state):
        updates, state, aux = opt.search_step(state, params, vg)
        assert set(aux) == {"mse"}
        return optax.apply_updates(params, updates), state, state.linesearch.value

    a = b = (params, opt.init(params))
    for _ in range(12):
        *a, va = by_update(*a)
        *b, vb = searched(*b)
        assert va == vb
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert float(vb) < 0.5 * float(loss(params))
    count = lambda f: str(jax.make_jaxpr(f)(params, opt.init(params))).count(" tanh ")  # noqa: E731
    assert (count(by_update), count(searched)) == (2, 1)


@pytest.mark.parametrize("member", ["ssbfgs", "ssbroyden"])
def test_search_step_reusing_the_last_gradient_skips_one_evaluation(x64, member):
    """With ``reuse`` (`reusable`: the objective has not changed, so the state's value and
    gradient are those at the parameters) a step evaluates the loss once fewer and takes
    the plain trajectory to rounding (the accepted point ``p + t d`` and the applied
    ``p + (t d)`` may round apart by an ulp). The aux returned is the loss's at the
    point the step moved to."""
    from pinnkit.optim import quasi_newton

    loss, params = _problem(jnp.float64)
    opt = getattr(quasi_newton, member)()
    calls = []

    def with_aux(p):
        value = loss(p)
        jax.debug.callback(lambda: calls.append(1))  # one per evaluation, at run time
        return value, {"mse": value}

    vg = jax.value_and_grad(with_aux, has_aux=True)

    def stepper(reuse):
        @jax.jit
        def step(params, state):
            updates, state, aux = opt.search_step(state, params, vg,
                                                  opt.reusable(state) if reuse else None)
            return optax.apply_updates(params, updates), state, aux
        return step

    steps, runs = 12, []
    for reuse in (False, True):
        step, p, s, values, n_calls = stepper(reuse), params, opt.init(params), [], []
        for _ in range(steps):
            calls.clear()
            p, s, aux = step(p, s)
            jax.block_until_ready(p)
            n_calls.append(len(calls))
            # the loss and aux reported are the objective's where the step moved to
            np.testing.assert_allclose(float(aux["mse"]), float(loss(p)), rtol=1e-12)
            assert float(s.linesearch.value) == float(aux["mse"]) and float(s.step_size) > 0
            values.append(float(aux["mse"]))
        runs.append((values, p, n_calls))
    (v_plain, p_plain, n_plain), (v_reuse, p_reuse, n_reuse) = runs
    assert not bool(opt.reusable(opt.init(params)))  # a phase's first step evaluates
    assert n_reuse[0] == n_plain[0] and n_reuse[1:] == [n - 1 for n in n_plain[1:]]
    np.testing.assert_allclose(v_reuse, v_plain, rtol=1e-9)
    for x, y in zip(jax.tree.leaves(p_reuse), jax.tree.leaves(p_plain), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-7, atol=1e-9)
    assert v_reuse[-1] < 0.5 * float(loss(params))


@pytest.mark.parametrize("known", [False, True])
def test_a_search_that_takes_no_step_returns_the_aux_at_the_parameters(x64, known):
    """The only trial is non-finite (a NaN objective past a radius) and the search runs out:
    the step is 0, and the aux is the objective's at the parameters; with the value and
    gradient there ``known`` the loop evaluates there once more to get it (two
    evaluations either way: the trial and the parameters)."""
    from pinnkit.optim.linesearch import zoom_search

    x0 = jnp.asarray([0.3, -0.2])
    calls = []

    def vg(x):
        def f(x):
            v = jnp.sum((x - 1.0) ** 2)
            return jnp.where(jnp.sum((x - x0) ** 2) > 0.01, jnp.nan, v), {"v": v, "x": x}
        jax.debug.callback(lambda: calls.append(1))
        return jax.value_and_grad(f, has_aux=True)(x)

    (v0, _), g0 = vg(x0)
    calls.clear()
    search = zoom_search(1, initial_guess_strategy="one")
    state = zoom_linesearch(1).init(x0)
    given = (jnp.asarray(True), v0, g0) if known else None
    r = jax.jit(lambda x: search(vg, x, lambda g: (-g, ()), state, given))(x0)
    jax.block_until_ready(r)
    assert float(r.state.learning_rate) == 0.0 and len(calls) == 2
    np.testing.assert_array_equal(np.asarray(r.aux["x"]), np.asarray(x0))
    assert float(r.state.value) == float(v0) == float(r.aux["v"])


@pytest.mark.parametrize(("last", "first_trial"), [(0.4, 0.5), (0.9, 1.0), (0.0, 1.0), (2.0, 1.0)])
def test_the_grow_guess_tries_a_little_past_the_last_step(x64, last, first_trial):
    """``initial_guess_strategy="grow"`` (the self-scaled phases' ``step_guess: last``):
    the first trial is 1.25 times the last accepted step, at most 1, and 1 after a step of
    0. On f = |x|^2 along -g from x = 1 every trial in (0, 1] is accepted at once."""
    from pinnkit.optim.linesearch import zoom_search

    trials = []

    def vg(x):
        jax.debug.callback(lambda x: trials.append(float(x[0])), x)
        return jax.value_and_grad(lambda x: (jnp.sum(x**2), {}), has_aux=True)(x)

    x0 = jnp.asarray([1.0])
    state = zoom_linesearch(4).init(x0)._replace(learning_rate=jnp.asarray(last))
    r = zoom_search(4, initial_guess_strategy="grow")(vg, x0, lambda g: (-0.5 * g, ()), state)
    jax.block_until_ready(r)
    # the parameters, then x0 - t * x0 at the first trial t: accepted there
    assert trials[0] == 1.0 and trials[1] == pytest.approx(1.0 - first_trial) and len(trials) == 2
    assert float(r.state.learning_rate) == pytest.approx(first_trial)
