"""tadiff.distributions against torch.distributions: log_prob, entropy, mean, variance and their
gradients; kl_divergence; sample shapes and moments; errors."""

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import InputError, ShapeError

torch = pytest.importorskip("torch")
D, TD = td.distributions, torch.distributions
RNG = np.random.default_rng(0)
N = RNG.standard_normal((3, 2))
S = RNG.uniform(0.5, 2, (3, 2))
A = RNG.standard_normal((2, 3, 3))
COV = A @ A.transpose(0, 2, 1) + 3 * np.eye(3)
TRIL = np.linalg.cholesky(COV)

CASES = {
    "normal": (lambda d, a, b: d.Normal(a, b), [N, S], RNG.standard_normal((3, 2))),
    "lognormal": (lambda d, a, b: d.LogNormal(a, b), [N, S], RNG.uniform(0.5, 2, (3, 2))),
    "laplace": (lambda d, a, b: d.Laplace(a, b), [N, S], RNG.standard_normal((3, 2))),
    "uniform": (lambda d, a, b: d.Uniform(a, b), [N, N + S], N + 0.3 * S),
    "exponential": (lambda d, a: d.Exponential(a), [S], RNG.uniform(0.1, 2, (3, 2))),
    "bernoulli_probs": (
        lambda d, a: d.Bernoulli(probs=a),
        [RNG.uniform(0.1, 0.9, (3, 2))],
        (RNG.random((3, 2)) < 0.5) * 1.0,
    ),
    "bernoulli_logits": (lambda d, a: d.Bernoulli(logits=a), [N], (RNG.random((3, 2)) < 0.5) * 1.0),
    "categorical_logits": (
        lambda d, a: d.Categorical(logits=a),
        [RNG.standard_normal((4, 5))],
        np.array([0, 3, 4, 1]),
    ),
    "categorical_probs": (
        lambda d, a: d.Categorical(probs=a),
        [RNG.uniform(0.1, 1, (4, 5))],
        np.array([[0, 3, 4, 1]]),
    ),
    "mvn_covariance": (
        lambda d, a, c: d.MultivariateNormal(a, covariance_matrix=c),
        [RNG.standard_normal((2, 3)), COV],
        RNG.standard_normal((4, 2, 3)),
    ),
    "mvn_scale_tril": (
        lambda d, a, c: d.MultivariateNormal(a, scale_tril=c),
        [RNG.standard_normal(3), TRIL],
        RNG.standard_normal((2, 3)),
    ),
    "mvn_precision": (
        lambda d, a, c: d.MultivariateNormal(a, precision_matrix=c),
        [RNG.standard_normal(3), COV],
        RNG.standard_normal((2, 3)),
    ),
    "independent": (
        lambda d, a, b: d.Independent(d.Normal(a, b), 1),
        [N, S],
        RNG.standard_normal((3, 2)),
    ),
    "gamma": (lambda d, a, b: d.Gamma(a, b), [S, S[::-1]], RNG.uniform(0.1, 3, (3, 2))),
    "beta": (lambda d, a, b: d.Beta(a, b), [S, S[::-1]], RNG.uniform(0.1, 0.9, (3, 2))),
    "dirichlet": (
        lambda d, a: d.Dirichlet(a),
        [RNG.uniform(0.5, 3, (2, 4))],
        RNG.dirichlet(np.ones(4), 2),
    ),
    "poisson": (lambda d, a: d.Poisson(a), [S], RNG.poisson(2, (3, 2)) * 1.0),
    "binomial": (lambda d, a: d.Binomial(10, logits=a), [N], RNG.integers(0, 11, (3, 2)) * 1.0),
}
# torch computes trigamma (the derivative of digamma) to about 5e-10 only: the families whose
# entropy uses digamma are compared with it at that level (and checked by gradcheck below)
TRIGAMMA_LIMITED = {"gamma", "beta", "dirichlet"}
NO_ENTROPY = {"poisson", "binomial"}  # torch sums its support numerically; not provided here


def _evaluate(lib, dist, make, params, value, entropy=True):
    ps = [lib.tensor(np.ascontiguousarray(p), requires_grad=True) for p in params]
    d = make(dist, *ps)
    lp = d.log_prob(lib.tensor(value))
    ent = d.entropy() if entropy else lp * 0
    total = lp.sum() + ent.sum()
    if not isinstance(d, dist.Categorical):
        total = total + d.mean.sum() + d.variance.sum()
    total.backward()
    arrays = [lp, ent, *(p.grad for p in ps)]
    return [np.asarray(t.detach().numpy() if lib is torch else t.data) for t in arrays]


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_prob_entropy_moments_and_gradients_match_torch(name):
    make, params, value = CASES[name]
    entropy = name not in NO_ENTROPY
    ours = _evaluate(td, D, make, params, value, entropy)
    theirs = _evaluate(torch, TD, make, params, value, entropy)
    rtol = 2e-8 if name in TRIGAMMA_LIMITED else 1e-10
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("name", sorted(TRIGAMMA_LIMITED))
def test_digamma_families_pass_gradcheck(name):
    make, params, value = CASES[name]

    def f(*ps):
        d = make(D, *ps)
        return d.log_prob(td.tensor(value)).sum() + d.entropy().sum()

    assert td.autograd.gradcheck(f, [td.tensor(p.copy(), requires_grad=True) for p in params])


KL = {
    "normal": (lambda d, a, b, c, e: (d.Normal(a, b), d.Normal(c, e)), [N, S, N[::-1], S[::-1]]),
    "bernoulli": (lambda d, a, b: (d.Bernoulli(logits=a), d.Bernoulli(logits=b)), [N, N[::-1]]),
    "categorical": (lambda d, a, b: (d.Categorical(logits=a), d.Categorical(logits=b)), [N, S]),
    "mvn": (
        lambda d, a, b, c, e: (
            d.MultivariateNormal(a, scale_tril=b),
            d.MultivariateNormal(c, scale_tril=e),
        ),
        [N[:2, :1].repeat(3, 1), TRIL, N[1:, :1].repeat(3, 1), TRIL[::-1]],
    ),
    "laplace": (lambda d, a, b, c, e: (d.Laplace(a, b), d.Laplace(c, e)), [N, S, N[::-1], S[::-1]]),
    "exponential": (lambda d, a, b: (d.Exponential(a), d.Exponential(b)), [S, S[::-1]]),
    "independent": (
        lambda d, a, b, c, e: (d.Independent(d.Normal(a, b), 1), d.Independent(d.Normal(c, e), 1)),
        [N, S, N[::-1], S[::-1]],
    ),
    "gamma": (lambda d, a, b, c, e: (d.Gamma(a, b), d.Gamma(c, e)), [S, S[::-1], S[::-1], S]),
    "beta": (lambda d, a, b, c, e: (d.Beta(a, b), d.Beta(c, e)), [S, S[::-1], S[::-1], S]),
    "dirichlet": (lambda d, a, b: (d.Dirichlet(a), d.Dirichlet(b)), [S.T, S.T[::-1]]),
    "poisson": (lambda d, a, b: (d.Poisson(a), d.Poisson(b)), [S, S[::-1]]),
}


@pytest.mark.parametrize("name", sorted(KL))
def test_kl_divergence_matches_torch(name):
    make, params = KL[name]
    results = []
    for lib, dist in ((td, D), (torch, TD)):
        ps = [lib.tensor(np.ascontiguousarray(p), requires_grad=True) for p in params]
        k = dist.kl_divergence(*make(dist, *ps))
        k.sum().backward()
        arrays = [k, *(p.grad for p in ps)]
        results.append([np.asarray(t.detach().numpy() if lib is torch else t.data) for t in arrays])
    rtol = 2e-8 if name in TRIGAMMA_LIMITED else 1e-10
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize(
    "name",
    [
        "normal",
        "lognormal",
        "laplace",
        "uniform",
        "exponential",
        "mvn_covariance",
        "bernoulli_probs",
        "gamma",
        "beta",
        "dirichlet",
        "poisson",
        "binomial",
    ],
)
def test_samples_have_the_shapes_and_moments(name):
    make, params, _ = CASES[name]
    if name == "lognormal":  # heavy tails: moderate parameters so 40000 samples settle
        params = [N * 0.3, S * 0.2]
    d = make(D, *[td.tensor(p) for p in params])
    td.manual_seed(0)
    x = d.sample((40000,))
    assert x.shape == (40000, *d.batch_shape, *d.event_shape)
    np.testing.assert_allclose(x.data.mean(0), d.mean.data, rtol=0.05, atol=0.05)
    np.testing.assert_allclose(x.data.var(0), d.variance.data, rtol=0.1, atol=0.02)
    assert not x.requires_grad


def test_categorical_sample_frequencies():
    probs = np.array([0.1, 0.6, 0.3])
    td.manual_seed(1)
    x = D.Categorical(probs=td.tensor(probs)).sample((30000,))
    assert x.dtype == np.int64
    np.testing.assert_allclose(np.bincount(x.data, minlength=3) / 30000, probs, atol=0.01)


def test_rsample_is_differentiable_in_the_parameters():
    loc = td.tensor([1.0, -2.0], dtype=td.float64, requires_grad=True)
    scale = td.tensor([0.5, 2.0], dtype=td.float64, requires_grad=True)
    td.manual_seed(2)
    z = D.Normal(loc, scale).rsample((5000,))
    (z * z).mean(0).sum().backward()  # d/dθ E[z²] = (2 loc, 2 scale)
    np.testing.assert_allclose(loc.grad.data, 2 * loc.data, rtol=0.1)
    np.testing.assert_allclose(scale.grad.data, 2 * scale.data, rtol=0.1)
    with pytest.raises(InputError, match="no reparameterised sample"):
        D.Bernoulli(probs=td.tensor([0.5])).rsample()


def test_errors():
    with pytest.raises(InputError, match="scale must be positive"):
        D.Normal(0.0, td.tensor([1.0, -1.0]))
    with pytest.raises(InputError, match="exactly one of probs or logits"):
        D.Categorical()
    with pytest.raises(InputError, match=r"probs must be in \[0, 1\]"):
        D.Bernoulli(probs=td.tensor([1.5]))
    with pytest.raises(InputError, match="exactly one of covariance_matrix"):
        D.MultivariateNormal(td.zeros(2))
    with pytest.raises(ShapeError, match=r"must be \(\.\.\., 2, 2\)"):
        D.MultivariateNormal(td.zeros(2), scale_tril=td.eye(3))
    with pytest.raises(InputError, match=r"categories must be in \[0, 3\)"):
        D.Categorical(logits=td.zeros(3)).log_prob(td.tensor([3]))
    with pytest.raises(InputError, match="no closed form for Normal and Laplace"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Laplace(0.0, 1.0))
