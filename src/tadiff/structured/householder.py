"""FastH: products of Householder matrices applied to a mini-batch, with a blocked backward.

An orthogonal matrix is parameterised by ``k`` Householder vectors, the rows of ``V`` (``k × d``):

    U = H_1 H_2 ⋯ H_k,      H_i = I − 2 v_i v_iᵀ / ‖v_i‖².

The naive ("sequential") way to form ``U X`` applies one reflector at a time: ``k`` dependent
rank-one updates, each a matrix-vector product. FastH (Mathiasen et al., 2020) groups ``b``
consecutive reflectors into a block whose product has a compact WY form, builds all blocks at once
and applies the ``⌈k/b⌉`` blocks as matrix-matrix products.

This module uses the *compact* WY form (the "UT transform"): for the ``b`` rows ``V_j`` of a block,

    H_1 ⋯ H_b = I − V_jᵀ T_j⁻¹ V_j,    T_j = triu(V_j V_jᵀ, 1) + ½ diag(V_j V_jᵀ),

so a block needs one ``b × b`` Gram matrix and one small triangular inverse, computed for all blocks
in one batched call, instead of ``b`` sequential Householder products per block (the paper's
Lemma 1). Unnormalised vectors are used directly, which keeps the gradient formula short.

Forward (Algorithm 1), blocks from last to first, ``A ← A − V_jᵀ (T_j⁻¹ (V_j A))``.
Backward (Algorithm 2): one sequential sweep ``G ← P_jᵀ G = G − V_jᵀ (T_j⁻ᵀ (V_j G))`` gives the
gradient wrt ``X``; the gradient wrt every block's vectors then follows from the saved block inputs
``A_j``, output gradients ``G_j`` and the small ``K_j = T_j⁻¹ V_j A_j``, ``Q_j = T_j⁻ᵀ V_j G_j``,
in one batched product for all blocks at once:

    ∂L/∂V_j = (triu(E_j, 1) + triu(E_j, 1)ᵀ + diag(E_j)) V_j − K_j G_jᵀ − Q_j A_jᵀ,  E_j = Q_j K_jᵀ.

Every kernel is written against the array namespace of its inputs (``xp``), so the same code runs
on NumPy arrays (tadiff's engine) and on torch tensors (``tadiff.torch``, CPU or CUDA).

Public names:
    householder_apply, householder_vjp, householder_product, householder_sequential, default_block,
    autotune_block, orthogonal_forward, orthogonal_inverse, cached.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from tadiff._array import namespace
from tadiff.errors import DTypeError, InputError, ShapeError

__all__ = [
    "autotune_block",
    "cached",
    "default_block",
    "householder_apply",
    "householder_product",
    "householder_sequential",
    "householder_vjp",
    "orthogonal_forward",
    "orthogonal_inverse",
]

_FLOAT_DTYPES = ("float32", "float64")


# ----------------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------------


def _dtype_name(a: Any) -> str:
    return str(a.dtype).removeprefix("torch.")


def _check_inputs(
    V: Any, X: Any, block: int | None, *, backward: bool = True
) -> tuple[int, int, int]:
    """Validate ``V`` (k, d) and ``X`` (..., d, m); return ``(k, d, block)``.

    ``backward`` tells the block-size rule whether a gradient wrt ``V`` will be computed.
    """
    for name, a in (("V", V), ("X", X)):
        if not hasattr(a, "shape") or not hasattr(a, "dtype"):
            raise DTypeError(f"householder: {name} must be an array or tensor, got {type(a)!r}")
        if _dtype_name(a) not in _FLOAT_DTYPES:
            hint = (
                " (half precision cannot resolve FastH's triangular factors; under torch.autocast"
                " half-precision inputs are computed in float32)"
                if _dtype_name(a) in ("float16", "bfloat16")
                else ""
            )
            raise DTypeError(
                f"householder: {name} must be float32 or float64, got dtype {_dtype_name(a)}" + hint
            )
    if namespace(V) is not namespace(X):
        raise DTypeError(
            "householder: V and X must be the same kind of array, got "
            f"{type(V).__name__} and {type(X).__name__}"
        )
    if _dtype_name(V) != _dtype_name(X):
        raise DTypeError(
            f"householder: V has dtype {_dtype_name(V)} but X has dtype {_dtype_name(X)}; "
            "convert one explicitly (no silent promotion)"
        )
    if getattr(V, "device", None) != getattr(X, "device", None):
        raise InputError(f"householder: V is on {V.device} but X is on {X.device}")
    if len(V.shape) != 2:
        raise ShapeError(
            f"householder: V must have shape (k, d) (one Householder vector per row), "
            f"got shape {tuple(V.shape)}"
        )
    k, d = (int(s) for s in V.shape)
    if k == 0 or d == 0:
        raise ShapeError(f"householder: V of shape (k, d) needs k >= 1 and d >= 1, got ({k}, {d})")
    if len(X.shape) < 2 or int(X.shape[-2]) != d:
        raise ShapeError(
            f"householder: X must have shape (..., d, m) = (..., {d}, m) to match V of shape "
            f"({k}, {d}), got shape {tuple(X.shape)}"
        )
    return k, d, _check_block(block, k, int(math.prod(X.shape)) // d, backward)


def _check_block(block: int | None, k: int, n: int, backward: bool = True) -> int:
    if block is None:
        return default_block(k, n, backward=backward)
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise InputError(f"householder: block must be a positive int or None, got {block!r}")
    return min(int(block), k)


# ----------------------------------------------------------------------------------------------
# Block-size rule
# ----------------------------------------------------------------------------------------------


def default_block(k: int, n: int = 32, *, backward: bool = True) -> int:
    """The block size ``b`` used when ``block=None``: 32 for a forward; for forward+backward 32,
    64 or 128 as ``n ≤ 16``, ``n ≤ 32`` or ``n > 32`` (clipped to ``k``).

    Why: with ``b`` reflectors per block, the forward costs ``4kdn`` flops of block sweeps plus
    ``2kbd`` for the blocks' Gram matrices, over ``⌈k/b⌉`` sequential steps of three GEMM calls
    (each with a fixed cost: ~3 µs of dispatch in torch, ~1.5 µs in NumPy, plus the inefficiency
    of thin GEMMs). A gradient wrt ``V`` adds ``8kdn`` flops, another ``2kbd`` (the ``F_j V_j``
    term) and, above all, the saved block inputs and output gradients: ``2⌈k/b⌉ · d · n`` numbers
    written and read back, which dominate when ``n`` is large. Small ``b`` multiplies the steps
    and the saved memory, large ``b`` the ``b``-proportional Gram and ``F_j V_j`` work.

    Measured (interleaved runs of the kernels, 2-core x86 CPU, float32, NumPy and torch,
    ``k = d``; see ``docs/householder.md``). Forward alone: b = 32 fastest or within 10 % of the
    fastest for ``d ∈ [64, 2048]``, ``n ∈ [8, 128]`` (25 % ahead of 64 at ``d = 2048, n = 32``).
    Forward+backward: at ``n ≤ 16`` b = 32 (64 costs 4-11 % in torch; NumPy was mixed); at
    ``n = 32`` 32 and 64 tie up to ``d = 512`` and 64 is 3-20 % faster from ``d = 1024``; at
    ``n = 64 … 256`` b = 128 is 1.2-1.7× faster than 32. "Forward alone" covers NumPy arrays,
    ``no_grad`` and calls where only ``X`` needs a gradient (its backward is one transposed
    sweep). On a GPU a step's launch overhead weighs more, so larger blocks are expected to pay
    off (not measured): run :func:`autotune_block` there.

    Args:
        k: number of reflectors.
        n: number of columns the product is applied to (batch × m).
        backward: whether the gradient wrt ``V`` will be computed (Algorithm 2's step 2).

    Returns:
        The block size, ``1 <= b <= k``.

    Example:
        >>> default_block(512, 32), default_block(512, 8), default_block(512, 256)
        (64, 32, 128)
        >>> default_block(512, 32, backward=False), default_block(10)
        (32, 10)
    """
    if not backward:
        return min(k, 32)
    return min(k, 32 if n <= 16 else 64 if n <= 32 else 128)


def autotune_block(
    d: int,
    m: int = 32,
    *,
    k: int | None = None,
    candidates: Sequence[int] | None = None,
    dtype: str = "float32",
    backend: str = "numpy",
    backward: bool = True,
    repeats: int = 5,
    seed: int = 0,
) -> int:
    """Measure the fastest block size for ``(d, m)`` on this machine (paper section 3.2).

    Times the FastH kernels (forward, and backward when ``backward``) for each candidate block
    size on random data and returns the one with the smallest median time. The search is done once
    per shape and machine; pass the result as ``block=`` to :func:`householder_apply`.

    Args:
        d: dimension of the orthogonal matrix.
        m: number of columns of ``X``.
        k: number of reflectors (default ``d``).
        candidates: block sizes to try (default: powers of two and 3·2ⁱ from 8 to 256, ≤ k).
        dtype: ``"float32"`` or ``"float64"``.
        backend: ``"numpy"`` or ``"torch"`` (CPU).
        backward: time forward+backward (True) or forward only.
        repeats: timed repeats per candidate (median is used).
        seed: seed of the random test data.

    Returns:
        The fastest block size.

    Example:
        >>> b = autotune_block(128, 32, repeats=1)
        >>> 1 <= b <= 128
        True
    """
    k = d if k is None else k
    if candidates is None:
        candidates = sorted({c for c in (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256) if c <= k})
        candidates = candidates or [k]
    if dtype not in _FLOAT_DTYPES:
        raise DTypeError(f"autotune_block: dtype must be float32 or float64, got {dtype!r}")
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((k, d)).astype(dtype)
    X = rng.standard_normal((d, m)).astype(dtype)
    G = rng.standard_normal((d, m)).astype(dtype)
    if backend == "torch":
        import torch

        V, X, G = (torch.from_numpy(a) for a in (V, X, G))
    elif backend != "numpy":
        raise InputError(f"autotune_block: backend must be 'numpy' or 'torch', got {backend!r}")
    xp = namespace(V)
    best, best_time = candidates[0], math.inf
    for b in candidates:
        times = []
        for _ in range(repeats + 1):  # first run warms caches and allocators
            t0 = time.perf_counter()
            blocks = _build_blocks(xp, V, min(b, k))
            _, saved = _forward(xp, blocks, X, save=backward)
            if backward:
                _backward(xp, blocks, saved, G, need_v=True)
            times.append(time.perf_counter() - t0)
        t = float(np.median(times[1:]))
        if t < best_time:
            best, best_time = b, t
    return int(best)


# ----------------------------------------------------------------------------------------------
# Small namespace helpers (the few places NumPy and torch spell things differently)
# ----------------------------------------------------------------------------------------------


def _empty(xp: Any, shape: tuple[int, ...], like: Any) -> Any:
    if xp is np:
        return np.empty(shape, dtype=like.dtype)
    return xp.empty(shape, dtype=like.dtype, device=like.device)


def _zeros(xp: Any, shape: tuple[int, ...], like: Any) -> Any:
    if xp is np:
        return np.zeros(shape, dtype=like.dtype)
    return xp.zeros(shape, dtype=like.dtype, device=like.device)


def _eye(xp: Any, n: int, like: Any) -> Any:
    if xp is np:
        return np.eye(n, dtype=like.dtype)
    return xp.eye(n, dtype=like.dtype, device=like.device)


def _upper_mask(xp: Any, n: int, like: Any) -> Any:
    """(n, n) boolean mask of the upper triangle, diagonal included."""
    if xp is np:
        return np.triu(np.ones((n, n), dtype=bool))
    return xp.ones((n, n), dtype=xp.bool, device=like.device).triu_()


def _unbind(xp: Any, a: Any) -> tuple[Any, ...]:
    """Views ``a[0], a[1], …`` made in one call: indexing a torch tensor costs ~1 µs a view."""
    return tuple(a) if xp is np else a.unbind(0)


def _diagonal(M: Any) -> Any:
    """Writable view (nb, n) of the diagonals of a contiguous batch of (n, n) matrices."""
    n = int(M.shape[-1])
    return M.reshape(int(M.shape[0]), n * n)[:, :: n + 1]


def _triu_inverse(xp: Any, T: Any) -> Any:
    """Inverse of a batch of upper-triangular matrices with nonzero diagonal.

    Only the upper triangle of ``T`` is read; the result has exact zeros below the diagonal.
    """
    if xp is np:
        return _triu_inverse_numpy(T)
    return xp.linalg.solve_triangular(T, _eye(xp, int(T.shape[-1]), T), upper=True)


def _triu_inverse_numpy(T: np.ndarray) -> np.ndarray:
    """Batched (nb, n, n) upper-triangular inverse by 2×2 block recursion on matrix products.

    ``[[A, B], [0, D]]⁻¹ = [[A⁻¹, −A⁻¹ B D⁻¹], [0, D⁻¹]]``; the two diagonal halves of every
    matrix are inverted together as one batch of twice the size, so a level costs a few batched
    GEMMs. NumPy has no batched triangular solve, and its LU-based ``inv`` is several times slower.
    """
    nb, n = T.shape[0], T.shape[-1]
    if n <= 2:  # [[a, b], [0, c]]⁻¹ = [[1/a, −b/(ac)], [0, 1/c]]
        out = np.zeros_like(T)
        inv = _diagonal(out)
        np.divide(1.0, T.reshape(nb, n * n)[:, :: n + 1], out=inv)
        if n == 2:
            out[:, 0, 1] = -T[:, 0, 1] * inv[:, 0] * inv[:, 1]
        return out
    h = n // 2
    A, B, D = T[:, :h, :h], T[:, :h, h:], T[:, h:, h:]
    if n % 2 == 0:
        both = _triu_inverse_numpy(np.concatenate([A, D]))
        Ai, Di = both[:nb], both[nb:]
    else:
        Ai, Di = _triu_inverse_numpy(A), _triu_inverse_numpy(D)
    out = np.zeros_like(T)
    out[:, :h, :h] = Ai
    out[:, h:, h:] = Di
    np.matmul(-(Ai @ B), Di, out=out[:, :h, h:])
    return out


def _sub_matmul(xp: Any, A: Any, B: Any, C: Any, out: Any) -> Any:
    """``out = A − B @ C`` without a second temporary (torch fuses it into one GEMM call)."""
    if xp is np:
        np.subtract(A, B @ C, out=out)
    elif A is out:
        out.addmm_(B, C, alpha=-1)
    else:
        xp.addmm(A, B, C, alpha=-1, out=out)
    return out


def _moveaxis(xp: Any, a: Any, source: int, destination: int) -> Any:
    # torch's moveaxis alias has no torch.vmap batching rule; movedim has
    return np.moveaxis(a, source, destination) if xp is np else a.movedim(source, destination)


def _fold(xp: Any, X: Any, d: int) -> Any:
    """(..., d, m) -> (d, N): batch dimensions become extra columns, so one GEMM serves them all."""
    return X if X.ndim == 2 else _moveaxis(xp, X, -2, 0).reshape(d, -1)


def _unfold(xp: Any, Y: Any, shape: tuple[int, ...]) -> Any:
    if len(shape) == 2:
        return Y
    d = shape[-2]
    return _moveaxis(xp, Y.reshape((d, *shape[:-2], shape[-1])), 0, -2)


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


class _Blocks(NamedTuple):
    """Compact WY form of all blocks: ``P_j = I − V[j]ᵀ Tinv[j] V[j]``."""

    V: Any  # (nb, b, d) reflectors, zero rows pad the last block
    Tinv: Any  # (nb, b, b) upper-triangular inverse of T_j
    k: int  # number of real reflectors
    views: tuple  # per block j: (V_j, V_jᵀ, T_j⁻¹, T_j⁻ᵀ), bound once for both sweeps


def _build_blocks(xp: Any, V: Any, b: int, *, check: bool = True) -> _Blocks:
    """Group the rows of ``V`` (k, d) into blocks of ``b`` and form every block's factor at once.

    The last block is padded with zero rows and unit diagonal entries of ``T``: since ``T`` is
    upper triangular and the padding comes last, the padded entries neither touch the real ones
    nor contribute to ``V_jᵀ T_j⁻¹ V_j``, so every block has the same shape and the whole
    construction is three batched calls (Gram, triangular factor, inverse).
    """
    k, d = (int(s) for s in V.shape)
    nb = -(-k // b)
    pad = nb * b - k
    Vp = V if pad == 0 else xp.concatenate([V, _zeros(xp, (pad, d), V)])
    Vb = Vp.reshape(nb, b, d)
    # T_j: the Gram matrix with its diagonal halved. Its strict lower triangle is left as is: the
    # triangular inverse reads only the upper one (and returns zeros below the diagonal).
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing row is refused below
        T = Vb @ Vb.mT
    half = _diagonal(T)  # ‖v_i‖², halved below
    if pad:
        half[-1, b - pad :] = 1  # any nonzero value: padded rows of V are zero
    # A zero row has no reflection; a NaN or inf entry would make every output entry NaN. One
    # test of the squared norms finds both (one device synchronisation). check=False where the
    # forward has checked the same V: a data-dependent branch is not allowed under torch.vmap.
    if check and bool(((half <= 0) | ~xp.isfinite(half)).any()):
        raise _bad_reflector(xp, V, half.reshape(nb * b)[:k])
    half *= 0.5
    Tinv = _triu_inverse(xp, T)
    parts = (Vb, Vb.mT, Tinv, Tinv.mT)
    views = tuple(zip(*(_unbind(xp, a) for a in parts), strict=True))
    return _Blocks(Vb, Tinv, k, views)


def _bad_reflector(xp: Any, V: Any, norms: Any) -> InputError:
    """The error for a ``V`` whose squared row ``norms`` are not all positive and finite."""
    finite = xp.isfinite(V)
    if not bool(finite.all()):
        i, j = (int(v) for v in xp.argwhere(~finite)[0])
        return InputError(
            f"householder: V[{i}, {j}] = {float(V[i, j])}; every entry of V must be finite (a "
            "non-finite reflector would make every output entry NaN)"
        )
    row = int(xp.argwhere(~xp.isfinite(norms) | (norms <= 0))[0][0])
    if bool(norms[row] <= 0):
        return InputError(
            f"householder: row {row} of V is zero; a Householder vector must be nonzero"
        )
    return InputError(
        f"householder: the squared norm of row {row} of V overflows {_dtype_name(V)}; rescale the "
        "row (a reflection does not depend on the length of its vector)"
    )


# ----------------------------------------------------------------------------------------------
# Reusing the blocks of one V across calls
# ----------------------------------------------------------------------------------------------

_CACHE: contextvars.ContextVar[dict | None] = contextvars.ContextVar("fasth_cache", default=None)


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """Build each ``V``'s blocks once for the duration of the context, and reuse them.

    Every FastH call starts by building the blocks of ``V`` (the Gram matrices and triangular
    inverses: about half of a forward at d = 512, m = 32). When one ``V`` is applied many times
    with nothing changing it in between — the time steps of an orthogonal RNN, the forward and
    inverse passes of a flow, several inputs through one ``Orthogonal`` layer — wrap those calls
    in ``cached()``: the first call with a given ``V`` builds its blocks and the later ones reuse
    them, forward and backward. Gradients are unchanged (each call still returns its own
    gradient wrt ``V``; only the forward's block build is skipped). This is the FastH analogue of
    ``torch.nn.utils.parametrize.cached()``.

    A cached entry is found again only for the same array object, with the same data pointer and,
    for torch tensors and tadiff Tensors, the same version counter: an in-place update of ``V``
    inside the context (``optimizer.step()``, ``V.add_(…)``) is noticed and the blocks are
    rebuilt. NumPy arrays have no version counter: do not modify a NumPy ``V`` in place inside the
    context. Writes through torch's ``.data`` (which bypass the version counter, as they do for
    autograd's own checks) are not noticed either. Pass the same object every time: a fresh view
    or copy of ``V`` per call (``V[:k]``, ``V.float()``) is a new entry, and the context keeps
    each entry until it ends. Contexts nest (an inner one shares the outer cache), are per
    thread, and free their blocks on exit. The ``torch.library`` op
    (``tadiff.torch.library.householder_apply``, for ``torch.compile``) does not use the cache.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> V, h = rng.standard_normal((8, 8)), rng.standard_normal((8, 2))
        >>> with cached():
        ...     for _ in range(3):  # three time steps, one block build
        ...         h = np.tanh(householder_apply(V, h))
        >>> h.shape
        (8, 2)
    """
    outer = _CACHE.get()
    token = _CACHE.set({} if outer is None else outer)
    try:
        yield
    finally:
        _CACHE.reset(token)


def _identity(owner: Any, array: Any) -> tuple:
    """What must stay the same for the cached blocks of ``owner`` (data ``array``) to be valid."""
    if hasattr(array, "data_ptr"):  # torch
        pointer = array.data_ptr()
    elif isinstance(array, np.ndarray):
        pointer = array.__array_interface__["data"][0]
    else:
        pointer = id(array)
    return (id(owner), getattr(owner, "_version", None), pointer, tuple(array.shape))


def _blocks_of(xp: Any, V: Any, b: int, transpose: bool, owner: Any = None) -> _Blocks:
    """``_build_blocks`` of ``V`` (rows reversed for ``transpose``), reused inside :func:`cached`.

    ``owner`` is the object whose identity and version key the cache (a tadiff Tensor whose
    ``.data`` is ``V``); by default ``V`` itself.
    """
    cache = _CACHE.get()
    owner = V if owner is None else owner
    key = None if cache is None else (*_identity(owner, V), b, transpose)
    hit = None if cache is None else cache.get(key)
    if hit is not None and hit[0] is owner:  # the entry keeps owner alive, so ids are not reused
        return hit[1]
    blocks = _build_blocks(xp, xp.flip(V, (0,)) if transpose else V, b)
    if cache is not None:
        cache[key] = (owner, blocks)
    return blocks


class _Saved(NamedTuple):
    A: Any  # (nb, d, N) input of every block
    K: Any  # (nb, b, N) T_j⁻¹ V_j A_j


def _forward(xp: Any, blocks: _Blocks, X: Any, *, save: bool) -> tuple[Any, _Saved | None]:
    """Algorithm 1 on folded ``X`` (d, N): apply blocks last to first. Returns (U X, saved)."""
    views = blocks.views
    nb, b, d = (int(s) for s in blocks.V.shape)
    n = int(X.shape[-1])
    out = _empty(xp, (d, n), X)
    if not save:
        K = _empty(xp, (b, n), X)
        A = X
        for V, VT, Ti, _ in reversed(views):
            A = _sub_matmul(xp, A, VT, xp.matmul(Ti, V @ A, out=K), out)
        return out, None
    As, Ks = _empty(xp, (nb, d, n), X), _empty(xp, (nb, b, n), X)
    A, K = _unbind(xp, As), _unbind(xp, Ks)
    A[-1][...] = X
    for j in reversed(range(nb)):
        V, VT, Ti, _ = views[j]
        _sub_matmul(xp, A[j], VT, xp.matmul(Ti, V @ A[j], out=K[j]), A[j - 1] if j else out)
    return out, _Saved(As, Ks)


def _backward(
    xp: Any, blocks: _Blocks, saved: _Saved | None, G: Any, *, need_v: bool
) -> tuple[Any, Any]:
    """Algorithm 2 on folded arrays: returns (∂L/∂V (k, d) or None, ∂L/∂X (d, N))."""
    if not need_v:
        _, b, d = (int(s) for s in blocks.V.shape)
        n = int(G.shape[-1])
        gX, Q = _empty(xp, (d, n), G), _empty(xp, (b, n), G)
        for V, VT, _, TiT in blocks.views:
            G = _sub_matmul(xp, G, VT, xp.matmul(TiT, V @ G, out=Q), gX)
        return None, gX
    assert saved is not None
    Gs, Qs, gX = _backward_sweep(xp, blocks, G)
    return _vector_gradient(xp, blocks, saved, Gs, Qs), gX


def _backward_sweep(xp: Any, blocks: _Blocks, G: Any) -> tuple[Any, Any, Any]:
    """Step 1 of Algorithm 2 (sequential, first block to last): ``Q_j = T_j⁻ᵀ V_j G_j`` and
    ``G_{j+1} = G_j − V_jᵀ Q_j``. Returns ``(G_j (nb, d, N), Q_j (nb, b, N), ∂L/∂X (d, N))``."""
    nb, b, d = (int(s) for s in blocks.V.shape)
    n = int(G.shape[-1])
    Gs, Qs, gX = _empty(xp, (nb, d, n), G), _empty(xp, (nb, b, n), G), _empty(xp, (d, n), G)
    Gj, Q = _unbind(xp, Gs), _unbind(xp, Qs)
    Gj[0][...] = G
    for j, (V, VT, _, TiT) in enumerate(blocks.views):
        out = Gj[j + 1] if j + 1 < nb else gX
        _sub_matmul(xp, Gj[j], VT, xp.matmul(TiT, V @ Gj[j], out=Q[j]), out)
    return Gs, Qs, gX


def _vector_gradient(
    xp: Any, blocks: _Blocks, saved: _Saved, Gs: Any, Qs: Any, *, in_place: bool = True
) -> Any:
    """Step 2 of Algorithm 2, all blocks at once: ∂L/∂V (k, d) from batched products,

        ∂L/∂V_j = F_j V_j − K_j G_jᵀ − Q_j A_jᵀ,   F_j = triu(E_j) + triu(E_j, 1)ᵀ,  E_j = Q_j K_jᵀ

    (``F_j`` is ∂L/∂S_j made symmetric: the ½ on T's diagonal meets the 2 of dS = dV Vᵀ + V dVᵀ).
    ``in_place=False`` (torch) makes it one product ``[F, −K, −Q] [V; Gᵀ; Aᵀ]`` without in-place
    accumulation, which ``torch.vmap`` has no rule for.
    """
    Vb, _, k, _ = blocks
    nb, b, d = (int(s) for s in Vb.shape)
    As, Ks = saved
    E = Qs @ Ks.mT
    F = xp.where(_upper_mask(xp, b, E), E, E.mT)
    if not in_place:  # one product: [F, −K, −Q] [V; Gᵀ; Aᵀ]
        gV = xp.concatenate([F, -Ks, -Qs], -1) @ xp.concatenate([Vb, Gs.mT, As.mT], -2)
        return gV.reshape(nb * b, d)[:k]
    gV = F @ Vb
    if xp is np:
        tmp = np.matmul(Ks, Gs.mT)
        gV -= tmp
        gV -= np.matmul(Qs, As.mT, out=tmp)
    else:  # torch accumulates into gV inside the GEMM (no temporaries of size k × d)
        gV.baddbmm_(Ks, Gs.mT, alpha=-1).baddbmm_(Qs, As.mT, alpha=-1)
    return gV.reshape(nb * b, d)[:k]


def _sweep_differentiable(
    xp: Any, blocks: _Blocks, A: Any, *, transpose_factor: bool = False
) -> tuple[Any, list, list]:
    """One sweep with out-of-place operations only, so autograd can differentiate it (any order).

    Forward (``transpose_factor=False``, blocks last to first): ``K_j = T_j⁻¹ V_j A_j``,
    ``A ← A − V_jᵀ K_j``. Backward sweep (``True``, first to last): ``T_j⁻ᵀ`` in place of
    ``T_j⁻¹``. Returns the final ``A`` and, in block order, every block's input and ``K_j``.
    """
    Vb, Tinv = blocks.V, blocks.Tinv
    nb = int(Vb.shape[0])
    inputs, factors = [None] * nb, [None] * nb
    for j in range(nb) if transpose_factor else reversed(range(nb)):
        Ti = Tinv[j].mT if transpose_factor else Tinv[j]
        inputs[j], factors[j] = A, Ti @ (Vb[j] @ A)
        A = A - Vb[j].mT @ factors[j]
    return A, inputs, factors


def _apply_differentiable(xp: Any, V: Any, X: Any, b: int, transpose: bool) -> Any:
    """Algorithm 1 with out-of-place operations only, so autograd can differentiate it (any order).

    Used for forward-mode derivatives under ``torch.func`` (tangents pushed through it); second
    derivatives use :func:`_vjp_differentiable`. Needs a namespace with a differentiable
    ``linalg.solve_triangular`` (torch).
    """
    d = int(V.shape[1])
    blocks = _build_blocks(xp, xp.flip(V, (0,)) if transpose else V, b, check=False)
    A, _, _ = _sweep_differentiable(xp, blocks, _fold(xp, X, d))
    return _unfold(xp, A, tuple(X.shape))


def _vjp_differentiable(
    xp: Any, V: Any, X: Any, G: Any, b: int, transpose: bool
) -> tuple[Any, Any]:
    """``(∂L/∂V, ∂L/∂X)`` by Algorithm 1 + 2 written with differentiable operations only.

    The same blocked algorithm as :func:`_forward` + :func:`_backward`, without their
    preallocated buffers and ``out=`` products, so that an outer autodiff (``torch.func``
    transforms nest by differentiating a backward) can differentiate the gradient again. Torch.
    """
    d = int(V.shape[1])
    blocks = _build_blocks(xp, xp.flip(V, (0,)) if transpose else V, b, check=False)
    _, As, Ks = _sweep_differentiable(xp, blocks, _fold(xp, X, d))
    gX, Gs, Qs = _sweep_differentiable(xp, blocks, _fold(xp, G, d), transpose_factor=True)
    saved = _Saved(xp.stack(As), xp.stack(Ks))
    gV = _vector_gradient(xp, blocks, saved, xp.stack(Gs), xp.stack(Qs), in_place=False)
    return (xp.flip(gV, (0,)) if transpose else gV), _unfold(xp, gX, tuple(X.shape))


def _sequential_backward(V: Any, Y: Any, G: Any, *, transpose: bool = False) -> tuple[Any, Any]:
    """Hand-written backward of the sequential method (the paper's baseline, its eq. 6).

    Visits the reflectors in the reverse of the order the forward applied them, recovering each
    reflector's input from its output (a reflection is its own inverse) instead of storing ``k``
    intermediate arrays. ``Y`` is the forward output (d, N), ``G`` its gradient.

    Returns:
        ``(∂L/∂V, ∂L/∂X)``.
    """
    xp = namespace(V, Y)
    k = int(V.shape[0])
    gV = _zeros(xp, tuple(V.shape), V)
    order = reversed(range(k)) if transpose else range(k)
    for i in order:
        v = V[i]
        c = 2.0 / (v @ v)
        cv = (c * v)[:, None]
        Y = Y - cv * (v @ Y)[None, :]  # input of reflector i
        u, r = v @ Y, v @ G
        gV[i] = (c * (r @ u)) * cv[:, 0] - c * (G @ u + Y @ r)
        G = G - cv * r[None, :]
    return gV, G


# ----------------------------------------------------------------------------------------------
# Public functions
# ----------------------------------------------------------------------------------------------


def householder_sequential(V: Any, X: Any, *, transpose: bool = False) -> Any:
    """``U X`` (or ``Uᵀ X``) by applying one reflector at a time: the slow reference.

    Uses only differentiable array operations, so under torch autograd (or tadiff's engine) its
    gradient is the oracle FastH is tested against.

    Args:
        V: (k, d) Householder vectors, one per row (nonzero).
        X: (..., d, m) input.
        transpose: compute ``Uᵀ X = H_k ⋯ H_1 X`` instead of ``U X``.

    Returns:
        (..., d, m), same dtype as ``X``.

    Example:
        >>> V = np.array([[1.0, 0.0]]); X = np.eye(2)
        >>> householder_sequential(V, X)
        array([[-1.,  0.],
               [ 0.,  1.]])
    """
    _check_inputs(V, X, 1)
    xp = namespace(V, X)
    # unbind (one node) rather than V[i] per step: under autograd each V[i] would scatter its
    # gradient into a fresh k × d zero tensor, an O(k²d) backward that is not the method's cost.
    rows = list(xp.unbind(V, 0)) if hasattr(xp, "unbind") else list(V)
    Y = X
    for v in rows if transpose else reversed(rows):
        Y = Y - ((2.0 / (v @ v)) * v)[:, None] * (v @ Y)[..., None, :]
    return Y


def householder_apply(V: Any, X: Any, *, block: int | None = None, transpose: bool = False) -> Any:
    """FastH: ``U X`` (or ``Uᵀ X``) for ``U = H_1 ⋯ H_k``, ``H_i = I − 2 v_i v_iᵀ/‖v_i‖²``.

    Dispatches on the inputs: NumPy arrays give a NumPy array (no gradient); torch tensors go
    through :func:`tadiff.torch.householder_apply` (``torch.autograd.Function`` with the FastH
    backward); tadiff Tensors through the engine Function of the same kernels.

    Args:
        V: (k, d) Householder vectors, one per row, nonzero; any ``k >= 1`` (``k < d`` gives a
            product of fewer reflectors).
        X: (..., d, m) input; leading dimensions are a batch. Same dtype as ``V`` (float32 or
            float64; it is preserved).
        block: reflectors per block (any positive int, clipped to ``k``; ``k`` need not be a
            multiple). ``None`` uses :func:`default_block`.
        transpose: compute ``Uᵀ X = H_k ⋯ H_1 X`` (the inverse, since ``U`` is orthogonal).

    Returns:
        (..., d, m) array of the same kind and dtype as ``X``.

    Raises:
        ShapeError, DTypeError, InputError: naming the argument and the expected shape or dtype.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> V, X = rng.standard_normal((6, 6)), rng.standard_normal((6, 3))
        >>> Y = householder_apply(V, X, block=4)
        >>> bool(np.allclose(householder_apply(V, Y, transpose=True), X))
        True
    """
    xp = namespace(V, X)
    if xp is not np:
        if getattr(xp, "__name__", "") == "torch":
            from tadiff.torch.householder import householder_apply as torch_apply

            return torch_apply(V, X, block=block, transpose=transpose)
        return _engine_apply(V, X, block=block, transpose=transpose)
    _, d, b = _check_inputs(V, X, block, backward=False)
    Y, _ = _forward(np, _blocks_of(np, V, b, transpose), _fold(np, X, d), save=False)
    return _unfold(np, Y, tuple(X.shape))


def householder_vjp(
    V: Any, X: Any, grad: Any, *, block: int | None = None, transpose: bool = False
) -> tuple[Any, Any]:
    """FastH forward and backward (Algorithms 1 and 2) for plain arrays, without an autograd engine.

    Returns the gradients of ``L = Σ grad ⊙ (U X)`` (or of ``Uᵀ X`` with ``transpose``).

    Args:
        V: (k, d) Householder vectors (NumPy array or torch tensor).
        X: (..., d, m) input.
        grad: (..., d, m) gradient of the loss wrt the output.
        block: block size (see :func:`householder_apply`).
        transpose: differentiate ``Uᵀ X`` instead.

    Returns:
        ``(dV, dX)`` with the shapes of ``V`` and ``X``.

    Example:
        >>> V, X = np.array([[1.0, 0.0]]), np.array([[2.0], [3.0]])
        >>> dV, dX = householder_vjp(V, X, np.ones((2, 1)))
        >>> dX.ravel()
        array([-1.,  1.])
    """
    xp = namespace(V, X)
    _, d, b = _check_inputs(V, X, block)
    if tuple(grad.shape) != tuple(X.shape) or _dtype_name(grad) != _dtype_name(X):
        raise ShapeError(
            f"householder_vjp: grad must have the shape {tuple(X.shape)} and dtype "
            f"{_dtype_name(X)} of X, got {tuple(grad.shape)} {_dtype_name(grad)}"
        )
    blocks = _blocks_of(xp, V, b, transpose)
    _, saved = _forward(xp, blocks, _fold(xp, X, d), save=True)
    dV, dX = _backward(xp, blocks, saved, _fold(xp, grad, d), need_v=True)
    if transpose:
        dV = xp.flip(dV, (0,))
    return dV, _unfold(xp, dX, tuple(X.shape))


def householder_product(V: Any, *, block: int | None = None, transpose: bool = False) -> Any:
    """Materialise ``U = H_1 ⋯ H_k`` (or ``Uᵀ``) as a dense (d, d) matrix, by FastH on ``I``.

    Args:
        V: (k, d) Householder vectors (NumPy array, torch tensor or tadiff Tensor).
        block: block size (see :func:`householder_apply`).
        transpose: return ``Uᵀ``.

    Returns:
        (d, d) orthogonal matrix, same kind and dtype as ``V``; differentiable wrt ``V`` for
        torch tensors and tadiff Tensors.

    Example:
        >>> U = householder_product(np.array([[1.0, 1.0]]))
        >>> np.round(U, 12) + 0.0
        array([[ 0., -1.],
               [-1.,  0.]])
    """
    if not hasattr(V, "shape") or len(V.shape) != 2:
        raise ShapeError(
            f"householder_product: V must have shape (k, d), got {getattr(V, 'shape', type(V))}"
        )
    xp = namespace(V)
    d = int(V.shape[1])
    if xp is np:
        eye = np.eye(d, dtype=V.dtype)
    elif getattr(xp, "__name__", "") == "torch":
        eye = xp.eye(d, dtype=V.dtype, device=V.device)
    else:
        eye = xp.tensor(np.eye(d, dtype=V.dtype))
    return householder_apply(V, eye, block=block, transpose=transpose)


def orthogonal_forward(V: Any, x: Any, *, block: int | None = None) -> Any:
    """Orthogonal layer on row vectors: ``y = x Uᵀ`` (each row ``x_r`` mapped to ``U x_r``).

    Args:
        V: (k, d) Householder vectors.
        x: (..., d) batch of row vectors.
        block: block size (see :func:`householder_apply`).

    Returns:
        (..., d), with ``orthogonal_inverse(V, orthogonal_forward(V, x)) == x``; the log absolute
        Jacobian determinant is 0.

    Example:
        >>> V = np.random.default_rng(1).standard_normal((3, 4))
        >>> x = np.ones((2, 4))
        >>> bool(np.allclose(orthogonal_inverse(V, orthogonal_forward(V, x)), x))
        True
    """
    return _rows(V, x, block=block, transpose=False)


def orthogonal_inverse(V: Any, y: Any, *, block: int | None = None) -> Any:
    """Inverse of :func:`orthogonal_forward`: ``x = y U`` (each row mapped to ``Uᵀ y_r``).

    Args:
        V: (k, d) Householder vectors.
        y: (..., d) batch of row vectors.
        block: block size.

    Returns:
        (..., d).
    """
    return _rows(V, y, block=block, transpose=True)


def _rows(V: Any, x: Any, *, block: int | None, transpose: bool) -> Any:
    if not hasattr(x, "shape") or len(x.shape) < 1:
        raise ShapeError(f"orthogonal layer: x must have shape (..., d), got {type(x)!r}")
    d = int(x.shape[-1])
    if len(getattr(V, "shape", ())) == 2 and int(V.shape[1]) != d:
        raise ShapeError(
            f"orthogonal layer: x must have shape (..., {int(V.shape[1])}) to match V of shape "
            f"{tuple(V.shape)}, got shape {tuple(x.shape)}"
        )
    cols = x.reshape(-1, d).mT  # (d, N): columns are the samples
    y = householder_apply(V, cols, block=block, transpose=transpose)
    return y.mT.reshape(x.shape)


def _engine_apply(V: Any, X: Any, *, block: int | None, transpose: bool) -> Any:
    """tadiff-engine path: arrays are wrapped as Tensors, the FastH Function does the rest."""
    from tadiff.autograd import is_grad_enabled
    from tadiff.autograd.tensor import Tensor

    V, X = (a if isinstance(a, Tensor) else Tensor(np.asarray(a)) for a in (V, X))
    recording = is_grad_enabled()
    backward = recording and V.requires_grad
    _, _, b = _check_inputs(V.data, X.data, block, backward=backward)
    return _engine_function().apply(V, X, b, bool(transpose), recording)


@functools.cache
def _engine_function() -> type:
    """The engine Function, defined on first use so that importing this module needs no engine."""
    from tadiff.autograd import Function, is_grad_enabled
    from tadiff.autograd import grad as grad_fn

    class HouseholderApply(Function):
        """``U X`` by FastH with the Algorithm 2 backward.

        Under ``create_graph`` the backward instead differentiates the sequential loop with
        engine ops, so second derivatives are exact (and slower); first order stays FastH.
        """

        @staticmethod
        def forward(ctx, V, X, block, transpose, recording):
            v, x = V.data, X.data
            d = int(v.shape[1])
            blocks = _blocks_of(np, v, block, transpose, owner=V)
            save = ctx.needs_input_grad[0] and recording  # nothing to save under no_grad
            Y, saved = _forward(np, blocks, _fold(np, x, d), save=save)
            ctx.save_for_backward(V, X)  # for create_graph, and in-place-modification checks
            ctx.blocks, ctx.saved, ctx.transpose, ctx.x_shape = blocks, saved, transpose, x.shape
            return _unfold(np, Y, tuple(x.shape))

        @staticmethod
        def backward(ctx, grad):
            V, X = ctx.saved_tensors
            need = ctx.needs_input_grad[:2]
            if is_grad_enabled():  # create_graph: build a differentiable graph for the gradient
                Y = householder_sequential(V, X, transpose=ctx.transpose)
                inputs = [t for t, n in zip((V, X), need, strict=True) if n]
                grads = iter(grad_fn(Y, inputs, grad, create_graph=True))
                return (*(next(grads) if n else None for n in need), None, None, None)
            d = int(ctx.x_shape[-2])
            g = _fold(np, np.asarray(grad.data), d)
            gV, gX = _backward(np, ctx.blocks, ctx.saved, g, need_v=need[0])
            if gV is not None and ctx.transpose:
                gV = np.ascontiguousarray(np.flip(gV, 0))
            gX = _unfold(np, gX, tuple(ctx.x_shape)) if need[1] else None
            return gV, gX, None, None, None

    return HouseholderApply
