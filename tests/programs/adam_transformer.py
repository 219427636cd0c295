"""A new user's job (issue 44): a small 4-layer transformer trained with a hand-written Adam
step, several jits. Its parameters are drawn with jax.random.normal at several shapes, so the
record holds several `jit__normal` modules alike in name and inputs (a key); its train step
takes every parameter and both Adam moments, a pytree of more than 80 arrays.

    adam_transformer.py [STEPS]
"""

import sys

import jax
import jax.numpy as jnp

D, FF, LAYERS, SEQ, VOCAB = 32, 64, 4, 16, 48


def init(key):
    def normal(key, shape):
        return jax.random.normal(key, shape) * 0.02

    keys = iter(jax.random.split(key, 8 * LAYERS + 2))
    layers = [{"wq": normal(next(keys), (D, D)), "wk": normal(next(keys), (D, D)),
               "wv": normal(next(keys), (D, D)), "wo": normal(next(keys), (D, D)),
               "w1": normal(next(keys), (D, FF)), "b1": jnp.zeros(FF),
               "w2": normal(next(keys), (FF, D)), "b2": jnp.zeros(D),
               "ln1": jnp.ones(D), "ln2": jnp.ones(D)} for _ in range(LAYERS)]
    return {"embed": normal(next(keys), (VOCAB, D)), "layers": layers,
            "out": normal(next(keys), (D, VOCAB))}


def norm(x, g):
    return g * (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)


def forward(params, tokens):
    x = params["embed"][tokens]
    mask = jnp.tril(jnp.ones((SEQ, SEQ), bool))
    for p in params["layers"]:
        h = norm(x, p["ln1"])
        q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
        att = jnp.where(mask, q @ k.swapaxes(-1, -2) / jnp.sqrt(D), -1e9)
        x = x + jax.nn.softmax(att) @ v @ p["wo"]
        h = norm(x, p["ln2"])
        x = x + jax.nn.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    return x @ params["out"]


def loss(params, tokens):
    logits = forward(params, tokens[:, :-1])
    labels = jax.nn.one_hot(tokens[:, 1:], VOCAB)
    return -jnp.mean(jnp.sum(labels * jax.nn.log_softmax(logits), -1))


@jax.jit
def train_k(params, m, v, t, tokens):
    """Adam by hand, two steps unrolled."""
    for _ in range(2):
        value, grads = jax.value_and_grad(loss)(params, tokens)
        t = t + 1
        m = jax.tree.map(lambda a, g: 0.9 * a + 0.1 * g, m, grads)
        v = jax.tree.map(lambda a, g: 0.999 * a + 0.001 * g * g, v, grads)
        c1, c2 = 1 - 0.9 ** t, 1 - 0.999 ** t
        params = jax.tree.map(lambda p, a, b, c1=c1, c2=c2:
                              p - 1e-3 * (a / c1) / (jnp.sqrt(b / c2) + 1e-8), params, m, v)
    return params, m, v, t, value


@jax.jit
def evaluate(params, tokens):
    return loss(params, tokens)


steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2
params = init(jax.random.PRNGKey(0))
m = jax.tree.map(jnp.zeros_like, params)
v = jax.tree.map(jnp.zeros_like, params)
t = jnp.zeros((), jnp.float32)
tokens = jax.random.randint(jax.random.PRNGKey(1), (4, SEQ + 1), 0, VOCAB)
for _ in range(steps):
    params, m, v, t, value = train_k(params, m, v, t, tokens)
print(f"loss {float(value):.4f} eval {float(evaluate(params, tokens)):.4f}")
