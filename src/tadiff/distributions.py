"""Probability distributions with ``torch.distributions``' names and formulas: ``Normal``,
``LogNormal``, ``Laplace``, ``Uniform``, ``Exponential``, ``Gamma``, ``Beta``, ``Dirichlet``,
``Bernoulli``, ``Binomial``, ``Poisson``, ``Categorical``, ``MultivariateNormal``,
``Independent``, and ``kl_divergence``.

``log_prob``, ``entropy``, ``mean``/``variance`` and ``rsample`` (the reparameterised sample,
where the distribution has one) are compositions of tadiff ops, so they are differentiable in
the parameters: a VAE's ELBO or a policy gradient backpropagates through them. ``sample``
draws without gradient. Sampling uses tadiff's generator (``td.manual_seed``).
``MultivariateNormal`` works through the Cholesky factor (``td.linalg.cholesky`` when a
covariance is given).

Example:
    >>> import tadiff as td
    >>> loc = td.tensor([0.0, 1.0], requires_grad=True)
    >>> d = td.distributions.Normal(loc, 2.0)
    >>> d.log_prob(td.tensor([0.5, 0.5])).sum().backward(); loc.grad
    tensor([ 0.125, -0.125])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tadiff.autograd import factories
from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError, ShapeError
from tadiff.ops import decompositions as la
from tadiff.ops import elementwise as ew
from tadiff.ops import pointwise as pw
from tadiff.ops import reductions as red
from tadiff.ops.shape import broadcast_to

__all__ = [
    "Bernoulli", "Beta", "Binomial", "Categorical", "Dirichlet", "Distribution", "Exponential",
    "Gamma", "Independent", "Laplace", "LogNormal", "MultivariateNormal", "Normal", "Poisson",
    "Uniform", "kl_divergence",
]  # fmt: skip

_LOG_2PI = math.log(2 * math.pi)


def _param(value: Any, name: str, like: Tensor | None = None) -> Tensor:
    if isinstance(value, Tensor):
        if value.dtype.kind != "f":
            raise InputError(f"{name} must be a floating tensor, got dtype {value.dtype}")
        return value
    dtype = like.dtype if like is not None else np.float32
    return Tensor(np.asarray(value, dtype=dtype))


def _shape(sample_shape: Any) -> tuple[int, ...]:
    return tuple(
        int(s)
        for s in (sample_shape if isinstance(sample_shape, (tuple, list)) else (sample_shape,))
    )


class Distribution:
    """Base class: ``batch_shape``, ``event_shape``, ``sample``/``rsample``, ``log_prob``."""

    has_rsample = False
    batch_shape: tuple[int, ...] = ()
    event_shape: tuple[int, ...] = ()

    def sample(self, sample_shape: Any = ()) -> Tensor:
        """Samples of shape ``sample_shape + batch_shape + event_shape``, without gradient."""
        return self.rsample(sample_shape).detach()

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        raise InputError(f"{type(self).__name__} has no reparameterised sample (rsample)")

    def log_prob(self, value: Any) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} must define log_prob")

    def entropy(self) -> Tensor:
        raise InputError(f"{type(self).__name__}: entropy is not available (no closed form)")

    @property
    def stddev(self) -> Tensor:
        return ew.sqrt(self.variance)

    def _extended(self, sample_shape: Any) -> tuple[int, ...]:
        return _shape(sample_shape) + self.batch_shape + self.event_shape

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(batch_shape={self.batch_shape}, event_shape={self.event_shape})"
        )


def _noise(shape: tuple[int, ...], like: Tensor) -> Tensor:
    return Tensor(factories._rng.standard_normal(shape).astype(like.dtype))


def _uniform(shape: tuple[int, ...], like: Tensor) -> Tensor:
    return Tensor(factories._rng.random(shape).astype(like.dtype))


class Normal(Distribution):
    """Gaussian with mean ``loc`` and standard deviation ``scale`` (> 0), broadcast together."""

    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool = True):
        self.loc = _param(loc, "loc")
        self.scale = _param(scale, "scale", self.loc)
        if validate_args and (self.scale.data <= 0).any():
            raise InputError("Normal: scale must be positive")
        self.batch_shape = np.broadcast_shapes(self.loc.shape, self.scale.shape)

    @property
    def mean(self) -> Tensor:
        return broadcast_to(self.loc, self.batch_shape)

    @property
    def variance(self) -> Tensor:
        return broadcast_to(self.scale * self.scale, self.batch_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self.loc + self.scale * _noise(self._extended(sample_shape), self.loc)

    def log_prob(self, value: Any) -> Tensor:
        z = (_param(value, "value", self.loc) - self.loc) / self.scale
        return -0.5 * z * z - ew.log(self.scale) - 0.5 * _LOG_2PI

    def entropy(self) -> Tensor:
        return broadcast_to(0.5 + 0.5 * _LOG_2PI + ew.log(self.scale), self.batch_shape)

    def cdf(self, value: Any) -> Tensor:
        z = (_param(value, "value", self.loc) - self.loc) / self.scale
        return 0.5 * ew.erfc(-z / math.sqrt(2))


class LogNormal(Distribution):
    """``exp(X)`` for ``X ~ Normal(loc, scale)``."""

    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool = True):
        self.base = Normal(loc, scale, validate_args)
        self.loc, self.scale, self.batch_shape = (
            self.base.loc,
            self.base.scale,
            self.base.batch_shape,
        )

    @property
    def mean(self) -> Tensor:
        return broadcast_to(ew.exp(self.loc + 0.5 * self.scale * self.scale), self.batch_shape)

    @property
    def variance(self) -> Tensor:
        s2 = self.scale * self.scale
        return broadcast_to((ew.exp(s2) - 1) * ew.exp(2 * self.loc + s2), self.batch_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return ew.exp(self.base.rsample(sample_shape))

    def log_prob(self, value: Any) -> Tensor:
        v = _param(value, "value", self.loc)
        return self.base.log_prob(ew.log(v)) - ew.log(v)

    def entropy(self) -> Tensor:
        return self.base.entropy() + broadcast_to(self.loc, self.batch_shape)


class Laplace(Distribution):
    """Density ``exp(-|x - loc| / scale) / (2 scale)``."""

    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool = True):
        self.loc = _param(loc, "loc")
        self.scale = _param(scale, "scale", self.loc)
        if validate_args and (self.scale.data <= 0).any():
            raise InputError("Laplace: scale must be positive")
        self.batch_shape = np.broadcast_shapes(self.loc.shape, self.scale.shape)

    @property
    def mean(self) -> Tensor:
        return broadcast_to(self.loc, self.batch_shape)

    @property
    def variance(self) -> Tensor:
        return broadcast_to(2 * self.scale * self.scale, self.batch_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        eps = np.finfo(self.loc.dtype).eps
        u = _uniform(self._extended(sample_shape), self.loc) * (2 - 2 * eps) - (1 - eps)
        return self.loc - self.scale * ew.sign(u) * ew.log1p(-ew.abs(u))

    def log_prob(self, value: Any) -> Tensor:
        v = _param(value, "value", self.loc)
        return -ew.log(2 * self.scale) - ew.abs(v - self.loc) / self.scale

    def entropy(self) -> Tensor:
        return broadcast_to(1 + ew.log(2 * self.scale), self.batch_shape)


class Uniform(Distribution):
    """Uniform on ``[low, high)``."""

    has_rsample = True

    def __init__(self, low: Any, high: Any, validate_args: bool = True):
        self.low = _param(low, "low")
        self.high = _param(high, "high", self.low)
        if validate_args and (self.high.data <= self.low.data).any():
            raise InputError("Uniform: high must be larger than low")
        self.batch_shape = np.broadcast_shapes(self.low.shape, self.high.shape)

    @property
    def mean(self) -> Tensor:
        return broadcast_to((self.low + self.high) / 2, self.batch_shape)

    @property
    def variance(self) -> Tensor:
        w = self.high - self.low
        return broadcast_to(w * w / 12, self.batch_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        u = _uniform(self._extended(sample_shape), self.low)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value: Any) -> Tensor:
        v = _param(value, "value", self.low)
        inside = (v.data >= self.low.data) & (v.data < self.high.data)
        return ew.where(inside, -ew.log(self.high - self.low), -np.inf)

    def entropy(self) -> Tensor:
        return broadcast_to(ew.log(self.high - self.low), self.batch_shape)


class Exponential(Distribution):
    """Density ``rate · exp(-rate · x)`` on ``x >= 0``."""

    has_rsample = True

    def __init__(self, rate: Any, validate_args: bool = True):
        self.rate = _param(rate, "rate")
        if validate_args and (self.rate.data <= 0).any():
            raise InputError("Exponential: rate must be positive")
        self.batch_shape = self.rate.shape

    @property
    def mean(self) -> Tensor:
        return 1 / self.rate

    @property
    def variance(self) -> Tensor:
        return 1 / (self.rate * self.rate)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        u = _uniform(self._extended(sample_shape), self.rate)
        return -ew.log1p(-u) / self.rate

    def log_prob(self, value: Any) -> Tensor:
        v = _param(value, "value", self.rate)
        return ew.where(v.data >= 0, ew.log(self.rate) - self.rate * v, -np.inf)

    def entropy(self) -> Tensor:
        return 1 - ew.log(self.rate)


def _positive(value: Any, name: str, where: str, like: Tensor | None = None) -> Tensor:
    t = _param(value, name, like)
    if (t.data <= 0).any():
        raise InputError(f"{where}: {name} must be positive")
    return t


class Gamma(Distribution):
    """Density ``rate^α x^(α−1) e^(−rate x) / Γ(α)`` on ``x > 0`` (``α = concentration``).
    No ``rsample`` (its reparameterised gradient needs implicit differentiation)."""

    def __init__(self, concentration: Any, rate: Any, validate_args: bool = True):
        self.concentration = _positive(concentration, "concentration", "Gamma")
        self.rate = _positive(rate, "rate", "Gamma", self.concentration)
        self.batch_shape = np.broadcast_shapes(self.concentration.shape, self.rate.shape)

    @property
    def mean(self) -> Tensor:
        return broadcast_to(self.concentration / self.rate, self.batch_shape)

    @property
    def variance(self) -> Tensor:
        return broadcast_to(self.concentration / (self.rate * self.rate), self.batch_shape)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended(sample_shape)
        a = np.broadcast_to(self.concentration.data, shape)
        draws = factories._rng.gamma(a) / np.broadcast_to(self.rate.data, shape)
        return Tensor(draws.astype(self.rate.dtype))

    def log_prob(self, value: Any) -> Tensor:
        v = _param(value, "value", self.rate)
        a, b = self.concentration, self.rate
        return a * ew.log(b) + (a - 1) * ew.log(v) - b * v - pw.lgamma(a)

    def entropy(self) -> Tensor:
        a = self.concentration
        return a - ew.log(self.rate) + pw.lgamma(a) + (1 - a) * pw.digamma(a)


class Dirichlet(Distribution):
    """Distributions on the simplex with ``concentration`` (..., K) > 0. No ``rsample``."""

    def __init__(self, concentration: Any, validate_args: bool = True):
        self.concentration = _positive(concentration, "concentration", "Dirichlet")
        if self.concentration.ndim < 1:
            raise ShapeError("Dirichlet: concentration needs at least one dim (the categories)")
        self.batch_shape = self.concentration.shape[:-1]
        self.event_shape = self.concentration.shape[-1:]

    @property
    def mean(self) -> Tensor:
        return self.concentration / red.sum(self.concentration, -1, True)

    @property
    def variance(self) -> Tensor:
        total = red.sum(self.concentration, -1, True)
        m = self.concentration / total
        return m * (1 - m) / (total + 1)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended(sample_shape)
        g = factories._rng.gamma(np.broadcast_to(self.concentration.data, shape))
        return Tensor((g / g.sum(-1, keepdims=True)).astype(self.concentration.dtype))

    def _log_norm(self) -> Tensor:
        a = self.concentration
        return red.sum(pw.lgamma(a), -1) - pw.lgamma(red.sum(a, -1))

    def log_prob(self, value: Any) -> Tensor:
        v = _param(value, "value", self.concentration)
        return red.sum((self.concentration - 1) * ew.log(v), -1) - self._log_norm()

    def entropy(self) -> Tensor:
        a = self.concentration
        total = red.sum(a, -1)
        k = a.shape[-1]
        return (
            self._log_norm()
            + (total - k) * pw.digamma(total)
            - red.sum((a - 1) * pw.digamma(a), -1)
        )


class Beta(Distribution):
    """Density ``x^(α−1) (1−x)^(β−1) / B(α, β)`` on ``(0, 1)``. No ``rsample``."""

    def __init__(self, concentration1: Any, concentration0: Any, validate_args: bool = True):
        self.concentration1 = _positive(concentration1, "concentration1", "Beta")
        self.concentration0 = _positive(
            concentration0, "concentration0", "Beta", self.concentration1
        )
        self.batch_shape = np.broadcast_shapes(self.concentration1.shape, self.concentration0.shape)
        a = broadcast_to(self.concentration1, self.batch_shape)
        b = broadcast_to(self.concentration0, self.batch_shape)
        from tadiff.ops.shape import stack

        self._dirichlet = Dirichlet(stack([a, b], -1))

    @property
    def mean(self) -> Tensor:
        return self._dirichlet.mean[..., 0]

    @property
    def variance(self) -> Tensor:
        return self._dirichlet.variance[..., 0]

    def sample(self, sample_shape: Any = ()) -> Tensor:
        return self._dirichlet.sample(sample_shape)[..., 0]

    def log_prob(self, value: Any) -> Tensor:
        v = _param(value, "value", self.concentration1)
        from tadiff.ops.shape import stack

        return self._dirichlet.log_prob(stack([v, 1 - v], -1))

    def entropy(self) -> Tensor:
        return self._dirichlet.entropy()


class Poisson(Distribution):
    """Counts with mean ``rate`` (> 0)."""

    def __init__(self, rate: Any, validate_args: bool = True):
        self.rate = _positive(rate, "rate", "Poisson")
        self.batch_shape = self.rate.shape

    @property
    def mean(self) -> Tensor:
        return self.rate

    @property
    def variance(self) -> Tensor:
        return self.rate

    def sample(self, sample_shape: Any = ()) -> Tensor:
        draws = factories._rng.poisson(
            np.broadcast_to(self.rate.data, self._extended(sample_shape))
        )
        return Tensor(draws.astype(self.rate.dtype))

    def log_prob(self, value: Any) -> Tensor:
        v = _param(value, "value", self.rate)
        return v * ew.log(self.rate) - self.rate - pw.lgamma(v + 1)


class Binomial(Distribution):
    """Successes in ``total_count`` trials with success probability ``probs`` (or logits)."""

    def __init__(
        self,
        total_count: Any = 1,
        probs: Any = None,
        logits: Any = None,
        validate_args: bool = True,
    ):
        self.logits, self.probs = _logits_and_probs(probs, logits, "Binomial", binary=True)
        self.total_count = _param(total_count, "total_count", self.probs)
        if (self.total_count.data < 0).any():
            raise InputError("Binomial: total_count must be non-negative")
        self.batch_shape = np.broadcast_shapes(self.total_count.shape, self.probs.shape)

    @property
    def mean(self) -> Tensor:
        return broadcast_to(self.total_count * self.probs, self.batch_shape)

    @property
    def variance(self) -> Tensor:
        return broadcast_to(self.total_count * self.probs * (1 - self.probs), self.batch_shape)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended(sample_shape)
        n = np.broadcast_to(self.total_count.data, shape).astype(np.int64)
        draws = factories._rng.binomial(n, np.broadcast_to(self.probs.data, shape))
        return Tensor(draws.astype(self.probs.dtype))

    def log_prob(self, value: Any) -> Tensor:
        k = _param(value, "value", self.probs)
        n = self.total_count
        log_comb = pw.lgamma(n + 1) - pw.lgamma(k + 1) - pw.lgamma(n - k + 1)
        # k·l − n·softplus(l): stable in the logits
        softplus = ew.maximum(self.logits, 0) + ew.log1p(ew.exp(-ew.abs(self.logits)))
        return log_comb + k * self.logits - n * softplus


def _logits_and_probs(probs: Any, logits: Any, name: str, binary: bool) -> tuple[Tensor, Tensor]:
    if (probs is None) == (logits is None):
        raise InputError(f"{name}: give exactly one of probs or logits")
    if probs is not None:
        p = _param(probs, "probs")
        if (p.data < 0).any() or (binary and (p.data > 1).any()):
            raise InputError(
                f"{name}: probs must be in [0, 1]"
                if binary
                else f"{name}: probs must be non-negative"
            )
        if not binary:
            p = p / red.sum(p, -1, True)
        tiny = np.finfo(p.dtype).tiny
        clamped = ew.clamp(p, tiny, 1 - np.finfo(p.dtype).eps) if binary else ew.clamp(p, tiny)
        logit = ew.log(clamped) - ew.log1p(-clamped) if binary else ew.log(clamped)
        return logit, p
    lg = _param(logits, "logits")
    if binary:
        return lg, ew.sigmoid(lg)
    lg = lg - red.logsumexp(lg, -1, True)
    return lg, ew.exp(lg)


class Bernoulli(Distribution):
    """0/1 outcomes with success probability ``probs`` (or ``sigmoid(logits)``)."""

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool = True):
        self.logits, self.probs = _logits_and_probs(probs, logits, "Bernoulli", binary=True)
        self.batch_shape = self.probs.shape

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        u = factories._rng.random(self._extended(sample_shape))
        return Tensor((u < self.probs.data).astype(self.probs.dtype))

    def log_prob(self, value: Any) -> Tensor:
        v = _param(value, "value", self.logits)
        # -BCE with logits, computed stably: v·l − softplus(l)
        softplus = ew.maximum(self.logits, 0) + ew.log1p(ew.exp(-ew.abs(self.logits)))
        return v * self.logits - softplus

    def entropy(self) -> Tensor:
        softplus = ew.maximum(self.logits, 0) + ew.log1p(ew.exp(-ew.abs(self.logits)))
        return softplus - self.probs * self.logits


class Categorical(Distribution):
    """One of ``K`` categories (the last dim of ``probs`` or ``logits``)."""

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool = True):
        self.logits, self.probs = _logits_and_probs(probs, logits, "Categorical", binary=False)
        if self.probs.ndim < 1:
            raise ShapeError("Categorical: probs/logits need at least one dim (the categories)")
        self.batch_shape = self.probs.shape[:-1]

    @property
    def mean(self) -> Tensor:
        return Tensor(np.full(self.batch_shape, np.nan, self.probs.dtype))

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = _shape(sample_shape) + self.batch_shape
        cdf = np.cumsum(self.probs.data, axis=-1)
        u = factories._rng.random((*shape, 1)) * cdf[..., -1:]
        return Tensor((u > cdf).sum(-1).astype(np.int64))

    def log_prob(self, value: Any) -> Tensor:
        idx = value.data if isinstance(value, Tensor) else np.asarray(value)
        if idx.dtype.kind not in "iu":
            raise InputError(
                f"Categorical.log_prob: value must be integer categories, got {idx.dtype}"
            )
        k = self.logits.shape[-1]
        if idx.size and (idx.min() < 0 or idx.max() >= k):
            raise InputError(f"Categorical.log_prob: categories must be in [0, {k})")
        shape = np.broadcast_shapes(idx.shape, self.batch_shape)
        logits = broadcast_to(self.logits, (*shape, k))
        from tadiff.ops.indexing import gather

        picked = gather(logits, -1, np.broadcast_to(idx, shape)[..., None])
        return picked.reshape(shape)

    def entropy(self) -> Tensor:
        return -red.sum(self.probs * self.logits, -1)


class MultivariateNormal(Distribution):
    """Gaussian vectors with mean ``loc`` (..., n) and one of ``covariance_matrix``,
    ``precision_matrix`` or ``scale_tril`` (..., n, n)."""

    has_rsample = True

    def __init__(
        self,
        loc: Any,
        covariance_matrix: Any = None,
        precision_matrix: Any = None,
        scale_tril: Any = None,
        validate_args: bool = True,
    ):
        self.loc = _param(loc, "loc")
        given = [m is not None for m in (covariance_matrix, precision_matrix, scale_tril)]
        if sum(given) != 1:
            raise InputError(
                "MultivariateNormal: give exactly one of covariance_matrix, precision_matrix, "
                "scale_tril"
            )
        if self.loc.ndim < 1:
            raise ShapeError("MultivariateNormal: loc must have at least one dim")
        n = self.loc.shape[-1]
        if scale_tril is not None:
            self.scale_tril = _param(scale_tril, "scale_tril", self.loc)
        elif covariance_matrix is not None:
            self.scale_tril = la.cholesky(_param(covariance_matrix, "covariance_matrix", self.loc))
        else:
            precision = _param(precision_matrix, "precision_matrix", self.loc)
            self.scale_tril = la.cholesky(la.inv(precision))
        if self.scale_tril.shape[-2:] != (n, n):
            raise ShapeError(
                f"MultivariateNormal: the matrix must be (..., {n}, {n}) to match loc of shape "
                f"{self.loc.shape}, got {self.scale_tril.shape}"
            )
        self.batch_shape = np.broadcast_shapes(self.loc.shape[:-1], self.scale_tril.shape[:-2])
        self.event_shape = (n,)

    @property
    def covariance_matrix(self) -> Tensor:
        return self.scale_tril @ self.scale_tril.mT

    @property
    def mean(self) -> Tensor:
        return broadcast_to(self.loc, self.batch_shape + self.event_shape)

    @property
    def variance(self) -> Tensor:
        return broadcast_to(
            red.sum(self.scale_tril * self.scale_tril, -1), self.batch_shape + self.event_shape
        )

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        eps = _noise(self._extended(sample_shape), self.loc)
        return self.loc + (self.scale_tril @ eps[..., None])[..., 0]

    def _half_log_det(self) -> Tensor:
        from tadiff.ops.matrix import diagonal

        return red.sum(ew.log(diagonal(self.scale_tril, 0, -2, -1)), -1)

    def log_prob(self, value: Any) -> Tensor:
        diff = _param(value, "value", self.loc) - self.loc
        n = self.event_shape[0]
        shape = np.broadcast_shapes(diff.shape[:-1], self.batch_shape)
        tril = broadcast_to(self.scale_tril, (*shape, n, n))
        z = la.solve_triangular(tril, broadcast_to(diff, (*shape, n))[..., None], upper=False)
        maha = red.sum(z[..., 0] * z[..., 0], -1)
        return -0.5 * (n * _LOG_2PI + maha) - self._half_log_det()

    def entropy(self) -> Tensor:
        n = self.event_shape[0]
        return broadcast_to(0.5 * n * (1 + _LOG_2PI) + self._half_log_det(), self.batch_shape)


class Independent(Distribution):
    """Reinterprets the last ``reinterpreted_batch_ndims`` batch dims of ``base`` as event dims
    (``log_prob`` and ``entropy`` summed over them)."""

    def __init__(self, base_distribution: Distribution, reinterpreted_batch_ndims: int):
        k = int(reinterpreted_batch_ndims)
        shape = base_distribution.batch_shape
        if not 0 <= k <= len(shape):
            raise InputError(f"Independent: reinterpreted_batch_ndims must be in [0, {len(shape)}]")
        self.base, self.k = base_distribution, k
        self.batch_shape = shape[: len(shape) - k]
        self.event_shape = shape[len(shape) - k :] + base_distribution.event_shape
        self.has_rsample = base_distribution.has_rsample

    @property
    def mean(self) -> Tensor:
        return self.base.mean

    @property
    def variance(self) -> Tensor:
        return self.base.variance

    def sample(self, sample_shape: Any = ()) -> Tensor:
        return self.base.sample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self.base.rsample(sample_shape)

    def _sum(self, t: Tensor) -> Tensor:
        return red.sum(t, tuple(range(-self.k, 0))) if self.k else t

    def log_prob(self, value: Any) -> Tensor:
        return self._sum(self.base.log_prob(value))

    def entropy(self) -> Tensor:
        return self._sum(self.base.entropy())


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """``KL(p ‖ q)`` in closed form for pairs of the same family: Normal, Bernoulli,
    Categorical, MultivariateNormal, Laplace... as listed; Independent pairs of those.

    Raises:
        InputError: for a pair without a closed form here.
    """
    if type(p) is not type(q):
        raise InputError(
            f"kl_divergence: no closed form for {type(p).__name__} and {type(q).__name__}"
        )
    if isinstance(p, Independent):
        if p.k != q.k:
            raise InputError("kl_divergence: Independent pairs need the same reinterpreted dims")
        return p._sum(kl_divergence(p.base, q.base))
    if isinstance(p, Normal):
        r = p.scale / q.scale
        d = (p.loc - q.loc) / q.scale
        return 0.5 * (r * r + d * d - 1) - ew.log(r)
    if isinstance(p, Bernoulli):
        return p.probs * (
            ew.log(ew.clamp(p.probs, np.finfo(p.probs.dtype).tiny)) - _logsig(q.logits)
        ) + (1 - p.probs) * (
            ew.log(ew.clamp(1 - p.probs, np.finfo(p.probs.dtype).tiny)) - _logsig(-q.logits)
        )
    if isinstance(p, Categorical):
        return red.sum(p.probs * (p.logits - q.logits), -1)
    if isinstance(p, MultivariateNormal):
        n = p.event_shape[0]
        shape = np.broadcast_shapes(p.batch_shape, q.batch_shape)
        lq = broadcast_to(q.scale_tril, (*shape, n, n))
        m = la.solve_triangular(lq, broadcast_to(p.scale_tril, (*shape, n, n)), upper=False)
        diff = broadcast_to(q.loc - p.loc, (*shape, n))
        z = la.solve_triangular(lq, diff[..., None], upper=False)[..., 0]
        trace = red.sum(m * m, (-2, -1))
        return 0.5 * (trace + red.sum(z * z, -1) - n) + q._half_log_det() - p._half_log_det()
    if isinstance(p, Laplace):
        ratio = p.scale / q.scale
        t = ew.abs(p.loc - q.loc)
        return -ew.log(ratio) + t / q.scale + ratio * ew.exp(-t / p.scale) - 1
    if isinstance(p, Exponential):
        ratio = q.rate / p.rate
        return ratio - ew.log(ratio) - 1
    if isinstance(p, Gamma):
        a1, b1, a2, b2 = p.concentration, p.rate, q.concentration, q.rate
        return (
            (a1 - a2) * pw.digamma(a1) - pw.lgamma(a1) + pw.lgamma(a2)
            + a2 * (ew.log(b1) - ew.log(b2)) + a1 * (b2 - b1) / b1
        )  # fmt: skip
    if isinstance(p, Dirichlet):
        a, b = p.concentration, q.concentration
        total = red.sum(a, -1, True)
        return (
            -p._log_norm() + q._log_norm()
            + red.sum((a - b) * (pw.digamma(a) - pw.digamma(total)), -1)
        )  # fmt: skip
    if isinstance(p, Beta):
        return kl_divergence(p._dirichlet, q._dirichlet)
    if isinstance(p, Poisson):
        return p.rate * (ew.log(p.rate) - ew.log(q.rate)) - (p.rate - q.rate)
    raise InputError(f"kl_divergence: no closed form for {type(p).__name__} pairs")


def _logsig(x: Tensor) -> Tensor:
    return -(ew.maximum(-x, 0) + ew.log1p(ew.exp(-ew.abs(x))))
