"""musa.linalg against torch.linalg: values on random well-conditioned
float64 inputs (batched, transposed), gradients against torch's and by
gradcheck, float32, the named tuples, the errors, and one compiled
function that must not fall back to eager."""
import math
import warnings

import numpy as np
import pytest
import torch

import musa
import musa.linalg as LA


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def M(a, requires_grad=False, dtype=None):
    return musa.tensor(np.asarray(a), dtype=dtype or musa.float64, requires_grad=requires_grad)


def T(a, requires_grad=False):
    return torch.tensor(np.asarray(a), dtype=torch.float64, requires_grad=requires_grad)


def arr(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def close(a, b, tol=1e-9):
    np.testing.assert_allclose(arr(a), arr(b), rtol=tol, atol=tol)


def square(rng, *shape, shift=None):
    """Random (.., n, n) with a diagonal shift (well conditioned)."""
    n = shape[-1]
    return rng.uniform(-1, 1, shape) + (n if shift is None else shift) * np.eye(n)


def spd(rng, *shape):
    x = rng.uniform(-1, 1, shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def sym(rng, *shape):
    x = rng.uniform(-1, 1, shape)
    return x + np.swapaxes(x, -1, -2)


def both(fn, *arrays, transposed=False):
    """fn applied to musa and to torch tensors of the same arrays (given as
    transposed views when asked: non-contiguous inputs)."""
    def conv(make, a):
        if transposed and a.ndim >= 2:
            return make(np.ascontiguousarray(np.swapaxes(a, -1, -2))).transpose(-2, -1)
        return make(a)
    return fn(musa, *[conv(M, a) for a in arrays]), fn(torch, *[conv(T, a) for a in arrays])


# ---- values ----

@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 4, 4)])
def test_solve_inv_det_slogdet_values(rng, shape, transposed):
    A = square(rng, *shape, shift=0.5)
    B = rng.uniform(-1, 1, shape[:-1] + (3,))
    close(*both(lambda m, a, b: m.linalg.solve(a, b), A, B, transposed=transposed))
    close(*both(lambda m, a: m.linalg.inv(a), A, transposed=transposed))
    close(*both(lambda m, a: m.linalg.det(a), A, transposed=transposed))
    s, st = both(lambda m, a: m.linalg.slogdet(a), A, transposed=transposed)
    close(s.sign, st.sign), close(s.logabsdet, st.logabsdet)
    close(*both(lambda m, a: m.det(a), A)), close(*both(lambda m, a: m.inverse(a), A))
    close(*both(lambda m, a: m.logdet(a), spd(rng, *shape)))


def test_solve_broadcasting_vectors_and_left(rng):
    A, b = square(rng, 2, 3, 3), rng.uniform(-1, 1, 3)
    close(*both(lambda m, a, v: m.linalg.solve(a, v), A, b))           # (n,) against a batch
    close(*both(lambda m, a, v: m.linalg.solve(a, v), A, A[..., 0]))    # (.., n): vectors
    close(*both(lambda m, a, v: m.linalg.solve(a, v), A[0], rng.uniform(-1, 1, (4, 3, 2))))
    close(*both(lambda m, a, v: m.linalg.solve(a, v, left=False), A, rng.uniform(-1, 1, (2, 5, 3))))


@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
@pytest.mark.parametrize("transposed", [False, True])
def test_cholesky_eigh_values(rng, transposed):
    P = spd(rng, 2, 5, 5)
    close(*both(lambda m, a: m.linalg.cholesky(a), P, transposed=transposed))
    close(*both(lambda m, a: m.linalg.cholesky(a, upper=True), P, transposed=transposed))
    close(*both(lambda m, a: m.cholesky(a), P))
    S = sym(rng, 2, 5, 5)
    for uplo in ("L", "U"):
        (w, V), (wt, Vt) = both(lambda m, a: m.linalg.eigh(a, UPLO=uplo), S, transposed=transposed)
        close(w, wt)
        close(abs(arr(V)), abs(arr(Vt)))  # columns agree up to sign
        close(*both(lambda m, a: m.linalg.eigvalsh(a, uplo), S))


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_svd_qr_values(rng, shape):
    A = rng.uniform(-1, 1, shape)
    for full in (False, True):
        (U, S, Vh), (Ut, St, Vht) = both(lambda m, a: m.linalg.svd(a, full_matrices=full), A)
        assert U.shape == tuple(Ut.shape) and Vh.shape == tuple(Vht.shape)
        close(S, St)
        k = S.shape[-1]
        close(arr(U)[..., :k] * arr(S)[..., None, :] @ arr(Vh)[..., :k, :], A)
        close(abs(arr(U)[..., :k]), abs(arr(Ut)[..., :k]))
    close(*both(lambda m, a: m.linalg.svdvals(a), A, transposed=True))
    for mode in ("reduced", "complete", "r"):
        (Q, R), (Qt, Rt) = both(lambda m, a: m.linalg.qr(a, mode=mode), A)
        assert Q.shape == tuple(Qt.shape)
        close(Q, Qt), close(R, Rt)  # the same Householder convention as LAPACK's
    close(*both(lambda m, a: m.linalg.qr(a).Q, A, transposed=True))


def test_lstsq_pinv_rank_values(rng):
    A, B = rng.uniform(-1, 1, (2, 6, 3)), rng.uniform(-1, 1, (2, 6, 2))
    r, rt = both(lambda m, a, b: m.linalg.lstsq(a, b), A, B)
    close(r.solution, rt.solution)
    assert r.residuals.shape == (0,) and r.singular_values.shape == (0,)
    assert r.rank.tolist() == rt.rank.tolist() == [3, 3] and r.rank.dtype == musa.int64
    Aw = rng.uniform(-1, 1, (3, 5))  # underdetermined: the least-norm solution
    close(*both(lambda m, a, b: m.linalg.lstsq(a, b).solution, Aw, rng.uniform(-1, 1, (3, 2))))
    close(*both(lambda m, a, b: m.linalg.lstsq(a, b).solution, A[0], B[0, :, 0]))  # vector B
    r, rt = both(lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd"), A, B)
    close(r.residuals, rt.residuals), close(r.singular_values, rt.singular_values)
    close(*both(lambda m, a: m.linalg.pinv(a), A, transposed=True))
    close(*both(lambda m, a: m.linalg.pinv(a, hermitian=True), sym(rng, 4, 4)))
    low = rng.uniform(-1, 1, (5, 2)) @ rng.uniform(-1, 1, (2, 4))  # rank 2
    close(*both(lambda m, a: m.linalg.pinv(a), low))
    assert LA.matrix_rank(M(low)).item() == torch.linalg.matrix_rank(T(low)).item() == 2
    assert LA.matrix_rank(M(low), atol=1e9).item() == 0
    assert LA.matrix_rank(M(sym(rng, 4, 4)), hermitian=True).item() == 4


@pytest.mark.parametrize("ord", ["fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2])
def test_matrix_norm(rng, ord):
    A = rng.uniform(-1, 1, (2, 4, 3))
    close(*both(lambda m, a: m.linalg.matrix_norm(a, ord), A))
    close(*both(lambda m, a: m.linalg.matrix_norm(a, ord, dim=(0, 2), keepdim=True), A))
    close(*both(lambda m, a: m.linalg.norm(a, ord), A[0]))


@pytest.mark.parametrize("ord", [2, 1, 3.5, 0, math.inf, -math.inf, -1])
def test_vector_norm(rng, ord):
    x = rng.uniform(-1, 1, (3, 4))
    close(*both(lambda m, a: m.linalg.vector_norm(a, ord), x))
    close(*both(lambda m, a: m.linalg.vector_norm(a, ord, dim=1, keepdim=True), x))
    close(*both(lambda m, a: m.linalg.norm(a, ord, dim=0), x))
    close(*both(lambda m, a: m.linalg.norm(a), x))
    close(*both(lambda m, a: m.linalg.norm(a, keepdim=True), x))
    assert LA.vector_norm(M(x), dtype=musa.float32).dtype == musa.float32


def test_small_helpers(rng):
    A = square(rng, 3, 3)
    close(*both(lambda m, a: m.linalg.matrix_power(a, 5), A))
    close(*both(lambda m, a: m.linalg.matrix_power(a, -2), A))
    close(*both(lambda m, a: m.linalg.matrix_power(a, 0), A))
    close(*both(lambda m, a: m.linalg.matrix_power(a, m.tensor(2)), A))  # a 0-d integer tensor
    for n in (2.5, math.inf):  # torch: "argument 'n' must be int, not float"
        with pytest.raises(TypeError, match=r"\[linalg.matrix_power\] n must be an int, not float"):
            musa.linalg.matrix_power(M(A), n)
    close(*both(lambda m, a: m.linalg.multi_dot([a, a, a]), A))
    close(*both(lambda m, a: m.linalg.vecdot(a, a), A))


# ---- named tuples, methods, empty inputs ----

def test_named_tuples_and_methods(rng):
    A = M(square(rng, 3, 3))
    s = LA.slogdet(A)
    assert type(s).__name__ == "linalg_slogdet" and type(s).__module__ == "musa.return_types"
    assert s._fields == ("sign", "logabsdet") and s[0] is s.sign
    assert LA.eigh(A)._fields == ("eigenvalues", "eigenvectors")
    assert LA.svd(A)._fields == ("U", "S", "Vh")
    assert LA.qr(A)._fields == ("Q", "R")
    assert LA.lstsq(A, A)._fields == ("solution", "residuals", "rank", "singular_values")
    close(A.det(), LA.det(A)), close(A.inverse(), LA.inv(A))
    close(A.slogdet().logabsdet, s.logabsdet), close(A.logdet(), musa.logdet(A))
    P = M(spd(rng, 3, 3))
    close(P.cholesky(), LA.cholesky(P)), close(P.cholesky(True), LA.cholesky(P, upper=True))
    assert musa.slogdet(A).sign.item() == s.sign.item()
    assert math.isnan(musa.logdet(M(-np.eye(3))).item())


def test_import_forms():
    import importlib
    mod = importlib.import_module("musa.linalg")
    assert musa.linalg is mod and mod.inv is LA.inv


def test_empty_matrices_and_batches():
    assert LA.det(musa.zeros(0, 0, dtype=musa.float64)).item() == 1
    assert LA.det(musa.zeros(2, 0, 0)).tolist() == [1, 1]
    s = LA.slogdet(musa.zeros(0, 0))
    assert (s.sign.item(), s.logabsdet.item()) == (1, 0)
    assert LA.inv(musa.zeros(0, 3, 3)).shape == (0, 3, 3)
    assert LA.solve(musa.zeros(0, 3, 3), musa.zeros(0, 3, 2)).shape == (0, 3, 2)
    assert LA.cholesky(musa.zeros(0, 0)).shape == (0, 0)
    w, V = LA.eigh(musa.zeros(4, 0, 0))
    assert w.shape == (4, 0) and V.shape == (4, 0, 0)
    U, S, Vh = LA.svd(musa.zeros(0, 3))
    tU, tS, tVh = torch.linalg.svd(torch.zeros(0, 3))
    assert U.shape == tuple(tU.shape) and Vh.tolist() == tVh.tolist()
    assert LA.qr(musa.zeros(3, 0), mode="complete").Q.tolist() == np.eye(3).tolist()
    slog = LA.slogdet(M(np.zeros((2, 2))))
    assert slog.sign.item() == 0 and slog.logabsdet.item() == -math.inf


# ---- gradients ----

def grads_vs_torch(fn, *arrays, tol=1e-8):
    xs = [M(a, requires_grad=True) for a in arrays]
    ts = [T(a, requires_grad=True) for a in arrays]
    fn(musa, *xs).backward()
    fn(torch, *ts).backward()
    for x, t in zip(xs, ts):
        close(x.grad, t.grad, tol)


def weighted(m, y, seed=1):
    """A sum of y weighted by fixed random values (the same for both)."""
    w = np.random.default_rng(seed).uniform(-1, 1, tuple(y.shape))
    return (y * (M(w) if m is musa else T(w))).sum()


def test_gradients_of_solve_inv_det_slogdet(rng):
    A, B = square(rng, 2, 3, 3, shift=1), rng.uniform(-1, 1, (2, 3, 2))
    grads_vs_torch(lambda m, a, b: weighted(m, m.linalg.solve(a, b)), A, B)
    grads_vs_torch(lambda m, a, b: weighted(m, m.linalg.solve(a, b)), A, B[0])  # broadcast B
    grads_vs_torch(lambda m, a: weighted(m, m.linalg.inv(a)), A)
    grads_vs_torch(lambda m, a: weighted(m, m.linalg.det(a)), A)
    grads_vs_torch(lambda m, a: weighted(m, m.linalg.slogdet(a).logabsdet), A)
    grads_vs_torch(lambda m, a: weighted(m, m.linalg.slogdet(a).logabsdet), square(rng, 3, 3, shift=0))


def test_gradients_of_cholesky_eigh(rng):
    X = rng.uniform(-1, 1, (2, 4, 4))

    def chol(m, x, upper=False):
        a = x @ x.transpose(-2, -1) + 4 * (M(np.eye(4)) if m is musa else T(np.eye(4)))
        return weighted(m, m.linalg.cholesky(a, upper=upper))
    grads_vs_torch(chol, X)
    grads_vs_torch(lambda m, x: chol(m, x, True), X)

    def eigh_loss(m, x):  # eigenvalues, and functions of V invariant to sign flips
        w, V = m.linalg.eigh(x + x.transpose(-2, -1))
        return weighted(m, w) + weighted(m, V * V, 2) + weighted(m, (V * w.unsqueeze(-2)) @ V.transpose(-2, -1), 3)
    grads_vs_torch(eigh_loss, X)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_gradients_of_svd_qr(rng, shape):
    A = rng.uniform(-1, 1, shape)

    def svd_loss(m, a, full=False):
        U, S, Vh = m.linalg.svd(a, full_matrices=full)
        k = S.shape[-1]
        U, Vh = U[..., :k], Vh[..., :k, :]
        return weighted(m, S) + weighted(m, U * U, 2) + weighted(m, Vh * Vh, 3) + \
            weighted(m, U[..., :1] * Vh[..., :1, :], 4)
    grads_vs_torch(svd_loss, A)
    grads_vs_torch(lambda m, a: svd_loss(m, a, True), A)
    grads_vs_torch(lambda m, a: weighted(m, m.linalg.svdvals(a)), A)
    grads_vs_torch(lambda m, a: weighted(m, m.linalg.matrix_norm(a, "nuc")), A)

    def qr_loss(m, a):
        Q, R = m.linalg.qr(a)
        return weighted(m, Q) + weighted(m, R, 2)
    grads_vs_torch(qr_loss, A)
    grads_vs_torch(lambda m, a: weighted(m, m.linalg.qr(a).R), A)


def test_gradients_of_compositions(rng):
    A, B = rng.uniform(-1, 1, (6, 3)), rng.uniform(-1, 1, (6, 2))
    grads_vs_torch(lambda m, a, b: weighted(m, m.linalg.lstsq(a, b).solution), A, B)
    grads_vs_torch(lambda m, a, b: weighted(m, m.linalg.lstsq(a, b).solution), A.T.copy(), B[:3])
    grads_vs_torch(lambda m, a: weighted(m, m.linalg.pinv(a)), A)
    grads_vs_torch(lambda m, a: weighted(m, m.linalg.matrix_norm(a, 2)), A)
    grads_vs_torch(lambda m, a: weighted(m, m.linalg.norm(a)), A)


@pytest.mark.parametrize("name", ["solve", "inv", "det", "slogdet", "cholesky", "eigh", "svd",
                                  "qr", "lstsq"])
def test_gradcheck_and_gradgradcheck(rng, name):
    eye = M(np.eye(3))
    fns = {
        "solve": lambda a, b: LA.solve(a + 3 * eye, b),
        "inv": lambda a, b: LA.inv(a + 3 * eye),
        "det": lambda a, b: LA.det(a + 2 * eye),
        "slogdet": lambda a, b: LA.slogdet(a + eye).logabsdet,
        "cholesky": lambda a, b: LA.cholesky(a @ a.mT + 3 * eye),
        "eigh": lambda a, b: (lambda r: (r.eigenvalues, r.eigenvectors ** 2))(LA.eigh(a + a.mT)),
        "svd": lambda a, b: (lambda r: (r.S, r.U ** 2, r.Vh ** 2))(LA.svd(a @ b.mT, full_matrices=False)),
        "qr": lambda a, b: LA.qr(a @ b.mT),
        "lstsq": lambda a, b: LA.lstsq(b, a).solution,
    }
    inputs = (M(rng.uniform(-1, 1, (2, 3, 3)), True), M(rng.uniform(-1, 1, (2, 3, 3)), True).mT)
    assert musa.autograd.gradcheck(fns[name], inputs)
    assert musa.autograd.gradgradcheck(fns[name], inputs)


def test_gradient_failures_are_clear(rng):
    x = M(np.ones((3, 3)), True)
    with pytest.raises(RuntimeError, match="singular"):
        LA.slogdet(x).logabsdet.backward()
    a = M(rng.uniform(-1, 1, (4, 3)), True)
    with pytest.raises(NotImplementedError, match="mode 'r' does not compute"):
        LA.qr(a, mode="r").R.sum().backward()
    with pytest.raises(NotImplementedError, match="'complete' and m > n"):
        LA.qr(a, mode="complete").Q.sum().backward()
    assert LA.slogdet(a[:3]).sign.grad_fn is not None  # sign: differentiable output, zero gradient


# ---- float32 ----

def test_float32(rng):
    A, B = square(rng, 2, 4, 4), rng.uniform(-1, 1, (2, 4, 2))
    f32 = lambda a: M(a, dtype=musa.float32)  # noqa: E731
    for fn in (lambda a: LA.inv(a), lambda a: LA.det(a), lambda a: LA.slogdet(a).logabsdet,
               lambda a: LA.cholesky(a @ a.mT), lambda a: LA.eigh(a + a.mT).eigenvalues,
               lambda a: LA.svd(a).S, lambda a: LA.qr(a).R, lambda a: LA.solve(a, a)):
        y32, y64 = fn(f32(A)), fn(M(A))
        assert y32.dtype == musa.float32
        np.testing.assert_allclose(arr(y32), arr(y64), rtol=1e-4, atol=1e-4)
    with musa.autocast("cpu"):  # float64 factorizations are never narrowed
        assert LA.inv(M(A)).dtype == musa.float64 and LA.svd(M(A)).S.dtype == musa.float64
        low = M(A, dtype=musa.bfloat16)  # low precision runs in float32, as in PyTorch
        assert LA.svd(low).S.dtype == musa.float32 and LA.solve(low, low).dtype == musa.float32
    x = f32(A).requires_grad_()
    LA.solve(x, f32(B)).sum().backward()
    assert x.grad.dtype == musa.float32


# ---- errors ----

def test_errors_name_the_function_and_shapes():
    rect, sq = musa.zeros(2, 3, dtype=musa.float64), musa.eye(3, dtype=musa.float64)
    for fn, name in [(LA.inv, "linalg_inv"), (LA.det, "linalg_det"), (LA.slogdet, "linalg_slogdet"),
                     (LA.cholesky, "linalg_cholesky"), (LA.eigh, "linalg_eigh")]:
        with pytest.raises(musa.InvalidArgumentError,
                           match=rf"\[{name}\] A must be batches of square matrices, but they are "
                                 r"2 by 3 matrices"):
            fn(rect)
        with pytest.raises(musa.InvalidArgumentError, match="at least 2 dimensions, got 1"):
            fn(musa.ones(3, dtype=musa.float64))
        with pytest.raises(musa.InvalidArgumentError, match="at least 2 dimensions, got 0"):
            fn(musa.tensor(1.0))
        with pytest.raises(musa.InvalidTypeError, match="expected a float32 or float64 tensor"):
            fn(musa.ones(3, 3, dtype=musa.int64))
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg_solve\] A must be batches of square"):
        LA.solve(rect, rect)
    with pytest.raises(musa.InvalidArgumentError,
                       match=r"incompatible shapes of A and B for the equation A X = B: \(3, 3\) "
                             r"and \(4, 2\)"):
        LA.solve(sq, musa.zeros(4, 2, dtype=musa.float64))
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg_solve\] the matrix A is singular"):
        LA.solve(musa.zeros(3, 3, dtype=musa.float64), sq)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg_inv\] the matrix A is singular "
                                                        r"\(batch element 1\)"):
        LA.inv(musa.stack([sq, musa.zeros(3, 3, dtype=musa.float64)]))
    with pytest.raises(musa.InvalidArgumentError, match=r"the leading minor of order 2 is not "
                                                        r"positive-definite"):
        LA.cholesky(M(np.diag([1.0, -1.0, 1.0])))
    bad = M(np.array([[1, 1, 1], [1, 1, 1], [-np.inf, 1, 1]]), dtype=musa.float32)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg_svd\] .* non-finite values"):
        LA.svd(bad)  # gesdd would never return on this one
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg_eigh\] .* non-finite values"):
        LA.eigh(M(np.full((2, 2), np.nan)))
    with pytest.raises(RuntimeError):  # musa's errors are RuntimeErrors, as torch's
        LA.inv(rect)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg.qr\] mode must be"):
        LA.qr(sq, mode="full")
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg.eigh\] UPLO must be 'L' or 'U'"):
        LA.eigh(sq, UPLO="X")
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg.matrix_norm\] ord must be"):
        LA.matrix_norm(sq, 3)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg.norm\] A must be 1-D or 2-D"):
        LA.norm(musa.zeros(2, 2, 2), 2)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg.lstsq\] A and B must have the "
                                                        r"same number of rows"):
        LA.lstsq(rect, musa.zeros(3, 1, dtype=musa.float64))


# ---- compiled ----

def test_compiled_matches_eager_without_falling_back(rng):
    A, X = M(square(rng, 2, 4, 4)), M(rng.uniform(-1, 1, (2, 4, 3)))

    def f(a, x):
        p = a @ a.mT
        L = LA.cholesky(p)
        sol = LA.solve(a, x)
        U, S, Vh = LA.svd(x, full_matrices=False)
        Q, R = LA.qr(x)
        w, V = LA.eigh(p)
        sign, logabs = LA.slogdet(a)
        return (L.sum() + sol.sum() + S.sum() + (R * R).sum() + w.sum() + (V * V).sum()
                + logabs.sum() + sign.sum() + LA.det(a).sum() + LA.inv(a).sum()
                + LA.lstsq(x, a).solution.sum() + LA.matrix_norm(x, "nuc").sum())

    g = musa.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback warns "runs eagerly"
        for _ in range(2):
            close(g(A, X), f(A, X))
    assert g.compiles == 1
    graph = g.get_graph()
    for row in ("linalg_cholesky", "linalg_solve", "linalg_svd", "linalg_qr", "linalg_eigh",
                "linalg_slogdet"):
        assert row in graph


def test_compiled_forward_backpropagates(rng):
    A0 = square(rng, 3, 3)
    a = M(A0, True)
    g = musa.jit(lambda a: LA.slogdet(a).logabsdet + LA.inv(a).sum() + LA.eigh(a @ a.mT)[0].sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g(a).backward()
    t = T(A0, True)
    (torch.linalg.slogdet(t).logabsdet + torch.linalg.inv(t).sum()
     + torch.linalg.eigh(t @ t.mT)[0].sum()).backward()
    close(a.grad, t.grad)
    assert g.compiles == 1


# ---- triangular solves and what is built on them ----

@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular_values_and_gradients_equal_torchs(rng, left, upper, unit):
    # both triangles and the diagonal hold values: only the one asked for may be read
    A0 = square(rng, 3, 4, 4)
    B0 = rng.uniform(-1, 1, (3, 4, 2) if left else (3, 2, 4))
    G0 = rng.uniform(-1, 1, B0.shape)
    for transposed in (False, True):
        (a, b), (ta, tb) = both(lambda lib, a, b: (a.requires_grad_(), b.requires_grad_()),
                                A0, B0, transposed=transposed)
        x = LA.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit)
        tx = torch.linalg.solve_triangular(ta, tb, upper=upper, left=left, unitriangular=unit)
        close(x, tx)
        ga, gb = musa.autograd.grad(x, (a, b), M(G0))
        tga, tgb = torch.autograd.grad(tx, (ta, tb), T(G0))
        close(ga, tga), close(gb, tgb)
    # second derivatives through the formula's own triangular solves
    a, b = M(A0[0], True), M(B0[0], True)
    assert musa.autograd.gradcheck(
        lambda a, b: LA.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit),
        (a, b))
    assert musa.autograd.gradgradcheck(
        lambda a, b: LA.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit),
        (a, b))


def test_solve_triangular_broadcasts_batches_and_handles_empty_and_float32(rng):
    A0, B0 = square(rng, 2, 1, 3, 3), rng.uniform(-1, 1, (4, 3, 5))
    close(LA.solve_triangular(M(A0), M(B0), upper=False),
          torch.linalg.solve_triangular(T(A0), T(B0), upper=False))
    assert LA.solve_triangular(M(A0), M(B0), upper=True).shape == (2, 4, 3, 5)
    e = LA.solve_triangular(musa.zeros(0, 0, dtype=musa.float64),
                            musa.zeros(0, 4, dtype=musa.float64), upper=True)
    assert e.shape == (0, 4)
    assert LA.solve_triangular(M(A0[0, 0]), musa.zeros(3, 0, dtype=musa.float64),
                               upper=True).shape == (3, 0)
    x32 = LA.solve_triangular(M(A0, dtype=musa.float32), M(B0, dtype=musa.float32), upper=True)
    assert x32.dtype == musa.float32
    close(x32, torch.linalg.solve_triangular(T(A0).float(), T(B0).float(), upper=True), 1e-5)
    # a zero on the diagonal is not checked: infinities, as in torch
    z = M(np.triu(np.ones((2, 2))) - np.diag([0.0, 1.0]))
    assert not np.isfinite(arr(LA.solve_triangular(z, M(np.ones((2, 1))), upper=True))).all()


def test_solve_triangular_errors_name_the_function_and_values():
    sq = musa.eye(3, dtype=musa.float64)
    with pytest.raises(musa.InvalidArgumentError,
                       match=r"\[linalg_solve_triangular\] incompatible shapes of A and B for the "
                             r"equation X A = B: \(3, 3\) and \(3, 2\)"):
        LA.solve_triangular(sq, musa.zeros(3, 2, dtype=musa.float64), upper=True, left=False)
    with pytest.raises(musa.InvalidArgumentError,
                       match=r"\[linalg_solve_triangular\] A must be batches of square matrices"):
        LA.solve_triangular(musa.zeros(2, 3, dtype=musa.float64), sq, upper=True)
    with pytest.raises(musa.InvalidTypeError, match=r"\[linalg_solve_triangular\] expected a "
                                                    r"float32 or float64 tensor"):
        LA.solve_triangular(musa.eye(3, dtype=musa.int64), musa.eye(3, dtype=musa.int64),
                            upper=True)
    with pytest.raises(musa.InvalidArgumentError, match=r"B must have at least 2 dimensions"):
        LA.solve_triangular(sq, musa.ones(3, dtype=musa.float64), upper=True)
    with pytest.raises(TypeError, match="upper"):
        LA.solve_triangular(sq, sq)  # upper is required, as in torch


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse_equal_torchs(rng, upper):
    A0 = spd(rng, 2, 4, 4)
    L0 = np.linalg.cholesky(A0)
    F0 = np.swapaxes(L0, -1, -2) if upper else L0
    B0, G0 = rng.uniform(-1, 1, (2, 4, 3)), rng.uniform(-1, 1, (2, 4, 3))
    (b, f), (tb, tf) = both(lambda lib, b, f: (b.requires_grad_(), f.requires_grad_()), B0, F0)
    x, tx = musa.cholesky_solve(b, f, upper), torch.cholesky_solve(tb, tf, upper)
    close(x, tx)
    close(b.cholesky_solve(f, upper), tx)
    gb, gf = musa.autograd.grad(x, (b, f), M(G0))
    tgb, tgf = torch.autograd.grad(tx, (tb, tf), T(G0))
    close(gb, tgb)
    # torch differentiates as if all of the factor were read; only its triangle is
    close(gf, tgf.triu() if upper else tgf.tril())
    close(musa.cholesky_inverse(M(F0), upper), torch.cholesky_inverse(T(F0), upper))
    close(M(F0[0]).cholesky_inverse(upper), np.linalg.inv(A0[0]))


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_triangular_solve_equals_torchs_older_spelling(rng, upper, transpose):
    A0, B0 = square(rng, 2, 4, 4), rng.uniform(-1, 1, (2, 4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: deprecated
        want = torch.triangular_solve(T(B0), T(A0), upper=upper, transpose=transpose)
    got = musa.triangular_solve(M(B0), M(A0), upper=upper, transpose=transpose)
    close(got.solution, want.solution), close(got.cloned_coefficient, want.cloned_coefficient)
    x, coef = M(B0).triangular_solve(M(A0), upper, transpose)
    close(x, want.solution)
    assert type(got).__name__ == "triangular_solve" and coef.data_ptr() != M(A0).data_ptr()


def test_cholesky_ex_reports_the_failing_minor_per_matrix(rng):
    A0 = spd(rng, 3, 4, 4)
    A0[1] = -A0[1]             # not positive-definite from the first minor
    A0[2][2, 2] = -100.0       # ... from the third
    got, want = LA.cholesky_ex(M(A0)), torch.linalg.cholesky_ex(T(A0))
    assert arr(got.info).tolist() == arr(want.info).tolist() == [0, 1, 3]
    assert got.info.dtype == musa.int32
    close(got.L[0], want.L[0])
    assert np.isnan(arr(got.L[1])).all()
    ok = LA.cholesky_ex(M(A0[0]), upper=True)
    close(ok.L, np.linalg.cholesky(A0[0]).T)
    assert int(ok.info) == 0
    with pytest.raises(musa.InvalidArgumentError, match="leading minor of order 1"):
        LA.cholesky_ex(M(A0), check_errors=True)


def test_compiled_solve_triangular_and_cholesky_solve_match_eager(rng):
    A0, B0 = spd(rng, 4, 4), rng.uniform(-1, 1, (4, 2))

    def f(a, b):
        L = LA.cholesky(a)
        return (LA.solve_triangular(L, b, upper=False).sum() + musa.cholesky_solve(b, L).sum()
                + LA.solve_triangular(L.mT, b.mT, upper=True, left=False).sum())

    g = musa.jit(f)
    a, b = M(A0), M(B0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback warns "runs eagerly"
        for _ in range(2):
            close(g(a, b), f(a, b))
    assert g.compiles == 1 and "linalg_solve_triangular" in g.get_graph()


# ---- LU ----

@pytest.mark.parametrize("shape", [(3, 4, 4), (2, 3, 5), (2, 5, 3)])
def test_lu_factor_values_pivots_and_gradient_equal_torchs(rng, shape):
    A0 = rng.uniform(-1, 1, shape)
    G0 = rng.uniform(-1, 1, shape)
    for transposed in (False, True):
        (a,), (ta,) = both(lambda lib, a: (a.requires_grad_(),), A0, transposed=transposed)
        LU, piv = LA.lu_factor(a)
        tLU, tpiv = torch.linalg.lu_factor(ta)
        close(LU, tLU)
        assert piv.dtype == musa.int32 and arr(piv).tolist() == tpiv.numpy().tolist()
        close(musa.autograd.grad(LU, a, M(G0))[0], torch.autograd.grad(tLU, ta, T(G0))[0])
        P, L, U = LA.lu(a)
        tP, tL, tU = torch.linalg.lu(ta)
        close(P, tP), close(L, tL), close(U, tU)
        gl, gu = rng.uniform(-1, 1, tuple(tL.shape)), rng.uniform(-1, 1, tuple(tU.shape))
        got = musa.autograd.grad((L * M(gl)).sum() + (U * M(gu)).sum(), a)[0]
        close(got, torch.autograd.grad((tL * T(gl)).sum() + (tU * T(gu)).sum(), ta)[0])
    a = M(A0[0], True)
    assert musa.autograd.gradcheck(lambda a: LA.lu_factor(a).LU, (a,))
    assert musa.autograd.gradgradcheck(lambda a: LA.lu_factor(a).LU, (a,))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
def test_lu_solve_values_and_gradients_equal_torchs(rng, left, adjoint):
    A0 = square(rng, 2, 4, 4)
    B0 = rng.uniform(-1, 1, (2, 4, 3) if left else (2, 3, 4))
    G0 = rng.uniform(-1, 1, B0.shape)
    a, b = M(A0, True), M(B0, True)
    ta, tb = T(A0, True), T(B0, True)
    LU, piv = LA.lu_factor(a)
    tLU, tpiv = torch.linalg.lu_factor(ta)
    x = LA.lu_solve(LU, piv, b, left=left, adjoint=adjoint)
    tx = torch.linalg.lu_solve(tLU, tpiv, tb, left=left, adjoint=adjoint)
    close(x, tx)
    got_grads = musa.autograd.grad(x, (a, b), M(G0))
    for g, tg in zip(got_grads, torch.autograd.grad(tx, (ta, tb), T(G0))):
        close(g, tg)
    if left and not adjoint:  # torch's older spellings
        close(musa.lu_solve(b, LU, piv), tx)
        close(b.lu_solve(LU, piv), tx)


def test_lu_unpack_wants_the_pivots_batched_like_the_factors():
    # found by fuzz_py (seed 22509): pivots (1, 1) for a 2-d LU made a (1, 1, 1)
    # P, where torch gives (1, 1) and, for pivots of another batch, reads past them
    LU, piv = musa.linalg.lu_factor(musa.randn(3, 2, 2))
    for bad in (piv[0:1], piv[:, None], piv.reshape(-1)):
        with pytest.raises(ValueError, match=r"\[lu_unpack\] LU_pivots must have LU_data's "
                                             r"batch shape \(3,\)"):
            musa.lu_unpack(LU, bad)
    with pytest.raises(ValueError, match=r"batch shape \(\) before its last dim, got shape "
                                         r"\(1, 1\)"):
        musa.lu_unpack(musa.tensor([[1.7]]), musa.tensor([[1]], dtype=musa.int32))
    assert musa.lu_unpack(LU, piv, unpack_pivots=False).P.numel() == 0
    P, L, U = musa.lu_unpack(LU, piv)
    assert P.shape == (3, 2, 2) and L.shape == (3, 2, 2) and U.shape == (3, 2, 2)


def test_lu_unpack_older_spellings_and_singular_matrices(rng):
    A0 = rng.uniform(-1, 1, (2, 5, 3))
    LU, piv = LA.lu_factor(M(A0))
    tLU, tpiv = torch.linalg.lu_factor(T(A0))
    for got, want in zip(musa.lu_unpack(LU, piv), torch.lu_unpack(tLU, tpiv)):
        close(got, want)
    P, L, U = musa.lu_unpack(LU, piv, unpack_data=False)
    assert L.numel() == 0 and U.numel() == 0 and P.shape == (2, 5, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: deprecated
        want = torch.lu(T(A0), get_infos=True)
    got = musa.lu(M(A0), get_infos=True)
    close(got[0], want[0])
    assert arr(got[1]).tolist() == want[1].tolist() and arr(got[2]).tolist() == [0, 0]
    close(M(A0).lu()[0], want[0])
    # singular: lu_factor_ex and lu report it, lu_factor raises as torch does
    S = M(np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]]]))
    ex = LA.lu_factor_ex(S)
    assert arr(ex.info).tolist() == torch.linalg.lu_factor_ex(T(arr(S))).info.tolist() == [2, 0]
    assert type(ex).__name__ == "linalg_lu_factor_ex"
    with pytest.raises(musa.InvalidArgumentError,
                       match=r"\[linalg.lu_factor\] U\[2,2\] is zero \(batch element 0\), and "
                             r"using it on lu_solve would result in a division by zero"):
        LA.lu_factor(S)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg.lu_factor_ex\] U\[2,2\]"):
        LA.lu_factor_ex(S, check_errors=True)
    close(LA.lu(S).P @ LA.lu(S).L @ LA.lu(S).U, S)
    # empty matrices and batches
    e = LA.lu_factor_ex(musa.zeros(0, 3, dtype=musa.float64))
    assert e.LU.shape == (0, 3) and e.pivots.shape == (0,)
    assert LA.lu(musa.zeros(2, 0, 0, dtype=musa.float64)).P.shape == (2, 0, 0)


def test_lu_errors_name_the_function_and_values():
    sq = musa.eye(3, dtype=musa.float64)
    LU, piv = LA.lu_factor(sq)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg.lu_factor\] LU without "
                                                        r"pivoting is not implemented on the CPU"):
        LA.lu_factor(sq, pivot=False)
    with pytest.raises(musa.InvalidTypeError, match=r"\[linalg_lu_factor\] expected a float32 or "
                                                    r"float64 tensor"):
        LA.lu_factor(musa.eye(3, dtype=musa.int64))
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg.lu_solve\] pivots must be "
                                                        r"between 1 and 3, got 7"):
        LA.lu_solve(LU, musa.tensor([1, 7, 3], dtype=musa.int32), sq)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg.lu_solve\] pivots must be an "
                                                        r"int32 tensor"):
        LA.lu_solve(LU, musa.ones(3), sq)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg.lu_solve\] pivots of shape "
                                                        r"\(2, 3\) do not match LU of shape"):
        LA.lu_solve(LU, musa.ones(2, 3, dtype=musa.int32), sq)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg.lu_solve\] A must be batches "
                                                        r"of square"):
        LA.lu_solve(musa.zeros(2, 3, dtype=musa.float64), piv, sq)


def test_compiled_lu_matches_eager_without_falling_back(rng):
    A0 = square(rng, 2, 4, 4)

    def f(a):
        P, L, U = LA.lu(a)
        LU, piv, info = LA.lu_factor_ex(a)
        return (P @ L @ U).sum() + (LU * LU).sum() + info.sum()

    g = musa.jit(f)
    a = M(A0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback warns "runs eagerly"
        for _ in range(2):
            close(g(a), f(a))
    assert g.compiles == 1 and "linalg_lu_factor" in g.get_graph()


def test_numerical_failures_raise_linalg_error_as_torch_does():
    assert issubclass(LA.LinAlgError, musa.InvalidArgumentError)
    assert issubclass(LA.LinAlgError, RuntimeError) and issubclass(LA.LinAlgError, ValueError)
    sing = musa.zeros(3, 3, dtype=musa.float64)
    for fn in (lambda: LA.solve(sing, sing), lambda: LA.inv(sing), lambda: LA.lu_factor(sing),
               lambda: LA.cholesky(-musa.eye(2, dtype=musa.float64)),
               lambda: LA.svd(musa.full((2, 2), float("nan"), dtype=musa.float64))):
        with pytest.raises(LA.LinAlgError):
            fn()
        with pytest.raises(RuntimeError):  # what torch.linalg.LinAlgError is
            fn()
    # a bad shape is not a numerical failure
    with pytest.raises(musa.InvalidArgumentError) as e:
        LA.solve(musa.zeros(2, 3, dtype=musa.float64), sing)
    assert not isinstance(e.value, LA.LinAlgError)


# ---- solve_ex, cond, vander, tensorinv, tensorsolve, matrix_exp ----

@pytest.mark.parametrize("scale", [0.01, 0.5, 3.0, 20.0, 100.0])
def test_matrix_exp_equals_torchs_at_every_scale(rng, scale):
    A0 = rng.normal(size=(3, 5, 5)) * scale / 5  # 1-norms below and far above 5.37
    want = torch.linalg.matrix_exp(T(A0)).numpy()
    got = LA.matrix_exp(M(A0)).numpy()
    assert np.abs(got - want).max() <= 1e-13 * np.abs(want).max()
    close(musa.matrix_exp(M(A0[0])), want[0], 1e-13 * np.abs(want[0]).max())
    close(M(A0[1]).matrix_exp(), want[1], 1e-13 * np.abs(want[1]).max())


def test_matrix_exp_gradient_float32_and_special_matrices(rng):
    A0, G0 = rng.normal(size=(4, 4)) * 0.7, rng.normal(size=(4, 4))
    a, ta = M(A0, True), T(A0, True)
    g = musa.autograd.grad((LA.matrix_exp(a) * M(G0)).sum(), a)[0]
    close(g, torch.autograd.grad((torch.linalg.matrix_exp(ta) * T(G0)).sum(), ta)[0], 1e-12)
    A32 = rng.normal(size=(5, 5))
    close(LA.matrix_exp(M(A32, dtype=musa.float32)),
          torch.linalg.matrix_exp(T(A32).float()), 2e-6)
    close(LA.matrix_exp(musa.zeros(2, 3, 3, dtype=musa.float64)), np.broadcast_to(np.eye(3),
                                                                                 (2, 3, 3)))
    d = np.diag([1.0, -2.0, 0.5])
    close(LA.matrix_exp(M(d)), np.diag(np.exp([1.0, -2.0, 0.5])))
    assert LA.matrix_exp(musa.zeros(0, 0, dtype=musa.float64)).shape == (0, 0)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[matrix_exp\] A must be batches of "
                                                        r"square"):
        LA.matrix_exp(musa.zeros(2, 3, dtype=musa.float64))


def test_matrix_exp_float32_of_a_large_norm_is_float64_rounded_once():
    # fuzz-py seed 17272: a 1-norm of 65,000 took 14 squarings in float32, and came out 30% low
    A = np.array([[-1.004, -2.816, -2.263, 1.052], [2.61, 0.277, 0.0, 0.0],
                  [-2.464, -0.846, 3.84, -2.513], [-2.22, 65504.0, 3.717, 3.14]], dtype=np.float32)
    want = torch.linalg.matrix_exp(torch.tensor(A, dtype=torch.float64)).numpy()
    a = musa.tensor(A, requires_grad=True)
    got = LA.matrix_exp(a)
    assert got.dtype == musa.float32
    np.testing.assert_allclose(got.detach().numpy(), want.astype(np.float32), rtol=2e-6)
    got.sum().backward()  # differentiable through the float64 work
    assert a.grad.dtype == musa.float32 and np.isfinite(a.grad.numpy()).all()


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1])
def test_cond_equals_torchs_including_singular_matrices(rng, p):
    A0 = rng.normal(size=(2, 4, 4))
    close(LA.cond(M(A0), p), torch.linalg.cond(T(A0), p), 1e-12)
    S = np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]]])
    got, want = arr(LA.cond(M(S), p)), torch.linalg.cond(T(S), p).numpy()
    assert got[1] == pytest.approx(want[1])
    assert got[0] < 1e-15 if p == -2 else (got[0] > 1e15 or np.isinf(got[0]))


def test_solve_ex_reports_singular_matrices_and_vander_tensor_functions(rng):
    S = np.array([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 0.0], [1.0, 1.0]]])
    B = rng.normal(size=(2, 2, 3))
    got, want = LA.solve_ex(M(S), M(B)), torch.linalg.solve_ex(T(S), T(B))
    assert arr(got.info).tolist() == want.info.tolist() == [2, 0]
    close(got.result[1], want.result[1])
    ok = LA.solve_ex(M(S[1]), M(B[1][:, 0]))
    close(ok.result, np.linalg.solve(S[1], B[1][:, 0]))
    assert int(ok.info) == 0
    with pytest.raises(LA.LinAlgError):
        LA.solve_ex(M(S), M(B), check_errors=True)
    x = rng.normal(size=(2, 4))
    close(LA.vander(M(x)), torch.linalg.vander(T(x)))
    close(LA.vander(M(x), N=6), torch.linalg.vander(T(x), N=6))
    close(musa.vander(M(x[0]), 3), torch.vander(T(x[0]), 3))
    close(musa.vander(M(x[0]), increasing=True), torch.vander(T(x[0]), increasing=True))
    A = rng.normal(size=(4, 6, 8, 3))
    close(LA.tensorinv(M(A), 2), torch.linalg.tensorinv(T(A), 2), 1e-12)
    A2, B2 = rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 3))
    close(LA.tensorsolve(M(A2), M(B2)), torch.linalg.tensorsolve(T(A2), T(B2)), 1e-12)
    A3 = np.moveaxis(A2, 2, 0)
    close(LA.tensorsolve(M(A3), M(B2), dims=(0,)),
          torch.linalg.tensorsolve(T(A3), T(B2), dims=(0,)), 1e-12)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[linalg.tensorinv\] the product of "
                                                        r"the first 1 dims \(4\) must equal"):
        LA.tensorinv(M(A), 1)


def test_linalg_functions_write_into_out():
    A = musa.tensor([[4.0, 1.0], [1.0, 3.0]])
    o = musa.empty(0)
    assert musa.linalg.cholesky(A, out=o) is o
    assert musa.allclose(o, musa.linalg.cholesky(A))
    sign, logabs = musa.empty(()), musa.empty(())
    r = musa.linalg.slogdet(A, out=(sign, logabs))
    assert r.sign is sign and r.logabsdet is logabs and sign.item() == 1.0
    assert abs(logabs.item() - math.log(11.0)) < 1e-6
    x, info = musa.empty(2), musa.empty((), dtype=musa.int32)
    musa.linalg.solve_ex(A, musa.tensor([1.0, 2.0]), out=(x, info))
    assert musa.allclose(A @ x, musa.tensor([1.0, 2.0])) and info.item() == 0
    U, S, V = musa.empty(0), musa.empty(0), musa.empty(0)
    musa.svd(A, out=(U, S, V))  # torch.svd's (U, S, V), and musa.special's polynomials
    assert musa.allclose(U @ musa.diag(S) @ V.T, A, atol=1e-6)
    t = musa.special.chebyshev_polynomial_t(musa.tensor([0.5]), 3, out=musa.empty(1))
    assert t.tolist() == [-1.0]
    with pytest.raises(ValueError, match=r"\[linalg.inv\] output has shape \(3,\) but the result "
                                         r"has shape \(2, 2\)"):
        musa.linalg.inv(A, out=musa.empty(3))
