"""musa.special's Bessel functions J0, J1, Y0, Y1, K0, K1, the scaled K
and Airy's Ai: against 40-digit values (mpmath, written out below), against
torch 1.13 (whose float64 J and Y are only float32-accurate: 2e-6 off at
x = 5), the edges, float32, and their gradients (torch's are not
differentiable)."""
import math

import numpy as np
import pytest
import torch

import musa
import musa.special as S

NAMES = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0",
         "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1"]

# mpmath.besselj / bessely / besselk (and besselk * exp(x)) at 40 digits;
# 2.404825557695773 is J0's first zero rounded to double
POINTS = [1e-300, 1e-12, 0.001, 0.5, 0.99, 1.0, 2.404825557695773, 3.0, 5.0, 7.5, 12.0, 19.99, 20.0,
          33.3, 1e3, 1e8]
EXACT = {
    "bessel_j0": [
        "1.0", "1.0", "9.99999750000015625e-1", "9.3846980724081290423e-1",
        "7.6958188096516852709e-1", "7.6519768655796655145e-1", "-6.1087652597367303971e-17",
        "-2.6005195490193343762e-1", "-1.7759677131433830435e-1", "2.6633965788037839687e-1",
        "4.7689310796833536624e-2", "1.6768479902327925991e-1", "1.6702466434058315473e-1",
        "6.3338485947521251681e-2", "2.4786686152420174561e-2", "3.2060295340412078037e-5",
    ],
    "bessel_j1": [
        "5.0000000000000001253e-301", "4.9999999999999998994e-13", "4.9999993750000261457e-4",
        "2.4226845767487388638e-1", "4.3678289579482477657e-1", "4.4005058574493351596e-1",
        "5.1914749728946676274e-1", "3.3905895852593645893e-1", "-3.2757913759146522204e-1",
        "1.3524842757970550518e-1", "-2.2344710449062761237e-1", "6.5192578142166100121e-2",
        "6.6833124175850045579e-2", "1.2386214790148009055e-1", "4.7283119070895239176e-3",
        "7.3063911815518548593e-5",
    ],
    "bessel_y0": [
        "-4.3983516362276533173e+2", "-1.7664258668214953019e+1", "-4.4714166113759232557",
        "-4.4451873350670655715e-1", "8.0401216213639911753e-2", "8.8256964215676957983e-2",
        "5.0992438344847906518e-1", "3.7685001001279038197e-1", "-3.0851762524903378007e-1",
        "1.1731328614820863084e-1", "-2.2523731263436143369e-1", "6.098196181483830639e-2",
        "6.2640596809383831162e-2", "1.2289749913503732589e-1", "4.7159179776228133998e-3",
        "7.3063911655217070977e-5",
    ],
    "bessel_y1": [
        "-6.3661977236758132712e+299", "-6.3661977236758135588e+11", "-6.3662216723113941482e+2",
        "-1.4714723926702430692", "-7.8995154916214140612e-1", "-7.8121282130028871655e-1",
        "1.027466824382595953e-1", "3.2467442479179997844e-1", "1.478631433912268448e-1",
        "-2.591285104861162518e-1", "-5.709921826089652105e-2", "-1.6621268550210406335e-1",
        "-1.6551161436252129586e-1", "-6.1500722807785735016e-2", "-2.4784331292351778915e-2",
        "-3.2060294975092520162e-5",
    ],
    "modified_bessel_k0": [
        "6.9089145941387211763e+2", "2.7746952631586960677e+1", "7.0236888005623813228",
        "9.2441907122766586178e-1", "4.2709503097965784243e-1", "4.2102443824070833334e-1",
        "6.9814543558869268224e-2", "3.4739504386279248072e-2", "3.6910983340425942747e-3",
        "2.4917761635611438901e-4", "2.2008253973114914005e-6", "5.8003712004862268299e-10",
        "5.7412378153365242927e-10", "7.4683572779177527347e-16", "2.0115173162429969967e-436",
        "8.086018957761439136e-43429453",
    ],
    "modified_bessel_k1": [
        "9.9999999999999997494e+299", "1.0000000000000000201e+12", "9.9999623815608555346e+2",
        "1.6564411200033008937", "6.1224897799922948833e-1", "6.0190723019723457474e-1",
        "8.3219309602173908969e-2", "4.0156431128194184377e-2", "4.0446134454521642084e-3",
        "2.6529739012528952599e-4", "2.2907574647671878159e-6", "5.943722919031569956e-10",
        "5.8830579695570381777e-10", "7.5796770655401297566e-16", "2.01252282371250157e-436",
        "8.0860189981915338237e-43429453",
    ],
    "scaled_modified_bessel_k0": [
        "6.9089145941387211763e+2", "2.774695263161470763e+1", "7.0307160023782514978",
        "1.52410938577390953", "1.1494128703415312943", "1.1444630798068950147",
        "7.7330064538666001542e-1", "6.9776159804385177606e-1", "5.4780756431351898687e-1",
        "4.5052369910491568638e-1", "3.5819487848907821528e-1", "2.7861370837224087266e-1",
        "2.7854487665718222393e-1", "2.1638708343017158946e-1", "3.9628321600754217115e-2",
        "1.2533141357488575884e-4",
    ],
    "scaled_modified_bessel_k1": [
        "9.9999999999999997494e+299", "1.0000000000010000201e+12", "1.0009967345590684316e+3",
        "2.7310097082117857054", "1.6477055552521314533", "1.6361534862632582465",
        "9.2177850836665472846e-1", "8.0656348012878690333e-1", "6.0027385878831258294e-1",
        "4.7966893379102061554e-1", "3.72831753369709876e-1", "2.854994321517989395e-1",
        "2.8542549694072644517e-1", "2.1961244655559350056e-1", "3.964813081296021048e-2",
        "1.2533141420154282515e-4",
    ],
}


def envelope(x):
    """J and Y oscillate inside sqrt(2 / (pi x)); near their zeros the
    error is measured against it"""
    return np.minimum(1.0, np.sqrt(2 / (np.pi * np.maximum(x, 1e-300))))


def scale(name, x, want):
    return np.maximum(np.abs(want), envelope(x)) if name.startswith("bessel") else np.abs(want)


@pytest.mark.parametrize("name", NAMES)
def test_bessel_against_exact_values(name):
    x = np.array(POINTS)
    want = np.array([float(v) for v in EXACT[name]])  # those below 1e-308 are 0
    got = getattr(S, name)(musa.tensor(x)).numpy()
    err = np.abs(got - want) / np.maximum(scale(name, x, want), 1e-300)
    assert err.max() < 3e-15, (name, x[err.argmax()], got[err.argmax()], want[err.argmax()])


@pytest.mark.parametrize("name", NAMES)
def test_bessel_against_torch(name):
    x = np.concatenate([np.logspace(-8, 3, 401), np.linspace(0, 60, 1201), [700, 710, 750]])
    got = getattr(S, name)(musa.tensor(x)).numpy()
    want = getattr(torch.special, name)(torch.tensor(x)).numpy()
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite], want[~finite])  # inf at 0 (K), -inf (Y)
    err = np.abs(got[finite] - want[finite]) / np.maximum(scale(name, x, want)[finite], 1e-300)
    # torch's J and Y are float32-accurate between 5 and 25; its K is exact
    assert err.max() < (3e-6 if name.startswith("bessel") else 4e-15), (name, err.max())


@pytest.mark.parametrize("name", NAMES)
def test_bessel_edges(name):
    f = getattr(S, name)
    x = musa.tensor([-2.0, -0.0, 0.0, math.inf, -math.inf, math.nan], dtype=musa.float64)
    got = f(x).numpy()
    want = getattr(torch.special, name)(torch.tensor(x.numpy())).numpy()
    two = f(musa.tensor([2.0], dtype=musa.float64)).item()
    if name.startswith("bessel_j"):  # J0 is even, J1 odd; J1(-0) is -0
        assert got[0] == (two if name == "bessel_j0" else -two)
        assert math.copysign(1, got[1]) == (1 if name == "bessel_j0" else -1)
    # torch 1.13 gives NaN at +-inf for J and Y; the limit there is 0
    if name.startswith("bessel"):
        assert got[3] == 0 and (got[4] == 0 if name.startswith("bessel_j") else math.isnan(got[4]))
        got, want = np.delete(got, [0, 3, 4]), np.delete(want, [0, 3, 4])
    np.testing.assert_array_equal(got, want)  # NaN below 0 (Y, K), -inf (Y) or inf (K) at 0


@pytest.mark.parametrize("name", NAMES)
def test_bessel_float32_and_integers(name):
    x32 = np.concatenate([np.linspace(0.05, 40, 800), [1e-30, 1e-3, 1e4]]).astype(np.float32)
    got = getattr(S, name)(musa.tensor(x32)).numpy()
    assert got.dtype == np.float32
    # float32 is the float64 value at the same (rounded) input, rounded once
    want = getattr(S, name)(musa.tensor(x32.astype(np.float64))).numpy().astype(np.float32)
    np.testing.assert_array_equal(got, want)
    i = getattr(S, name)(musa.tensor([1, 2, 3]))
    assert i.dtype == musa.float32
    np.testing.assert_array_equal(i.numpy(), getattr(S, name)(musa.tensor([1.0, 2.0, 3.0])).numpy())


# d/dx of each as the formula musa's backward should follow, in torch's values
DERIVATIVE = {
    "bessel_j0": lambda T, x: -T.bessel_j1(x),
    "bessel_j1": lambda T, x: T.bessel_j0(x) - T.bessel_j1(x) / x,
    "bessel_y0": lambda T, x: -T.bessel_y1(x),
    "bessel_y1": lambda T, x: T.bessel_y0(x) - T.bessel_y1(x) / x,
    "modified_bessel_k0": lambda T, x: -T.modified_bessel_k1(x),
    "modified_bessel_k1": lambda T, x: -T.modified_bessel_k0(x) - T.modified_bessel_k1(x) / x,
    "scaled_modified_bessel_k0":
        lambda T, x: T.scaled_modified_bessel_k0(x) - T.scaled_modified_bessel_k1(x),
    "scaled_modified_bessel_k1": lambda T, x: T.scaled_modified_bessel_k1(x) * (1 - 1 / x)
        - T.scaled_modified_bessel_k0(x),
}


@pytest.mark.parametrize("name", NAMES)
def test_bessel_gradients(name):
    x0 = np.array([0.3, 1.0, 2.5, 7.0, 15.0, 30.0])
    x = musa.tensor(x0, requires_grad=True)
    g = musa.autograd.grad(getattr(S, name)(x).sum(), x)[0].numpy()
    want = DERIVATIVE[name](torch.special, torch.tensor(x0)).numpy()
    tol = 1e-5 if name.startswith("bessel") else 1e-13  # torch's J and Y, as above
    np.testing.assert_allclose(g, want, rtol=tol, atol=tol * 0.1)
    # and against finite differences of musa's own values, twice
    f = getattr(S, name)
    xs = musa.tensor(np.array([0.7, 1.9, 4.4]), requires_grad=True)
    assert musa.autograd.gradcheck(f, (xs,))
    assert musa.autograd.gradgradcheck(f, (xs,))
    if name == "bessel_j1":  # j0 - j1 / x is 1/2 at 0
        z = musa.tensor([0.0], requires_grad=True)
        assert musa.autograd.grad(f(z).sum(), z)[0].item() == 0.5


def test_bessel_compiled_equals_eager():
    def f(x):
        return S.bessel_j0(x) * S.bessel_y1(x) + S.scaled_modified_bessel_k1(x) * S.airy_ai(x)
    x = musa.tensor(np.linspace(0.1, 30, 50))
    np.testing.assert_array_equal(musa.jit.trace(f, (x,))(x).numpy(), f(x).numpy())


# mpmath.airyai (derivative=0 and 1) at 40 digits; -2.338107410459767 is
# Ai's first zero rounded; the edges of the kernel's regions are -10 and 2
AIRY_POINTS = [-1e8, -1234.5, -30.0, -10.000001, -10.0, -9.99, -5.0, -2.338107410459767, -1.0,
               0.0, 1e-10, 1.0, 2.0, 2.0000001, 5.0, 30.0, 100.0, 105.0]
AIRY_EXACT = [
    "-5.5541288000569947087e-3", "8.4732739370812107351e-2", "-8.7968188456842162833e-2",
    "4.0240242221198598966e-2", "4.0241238486443190689e-2", "5.0182117162139800517e-2",
    "3.5076100902411431979e-1", "2.7433193406662829996e-17", "5.355608832923521188e-1",
    "3.5502805388781723926e-1", "3.5502805386193529888e-1", "1.3529241631288141552e-1",
    "3.4924130423274379135e-2", "3.49241251142362937e-2", "1.0834442813607441735e-4",
    "3.2082175915504955711e-49", "2.6344821520881844896e-291", "2.7006204174325602448e-313",
]
AIRY_PRIME_EXACT = [
    "9.9128295191320746871", "1.5234014700442607031", "1.2286206026374851347",
    "9.9626544654021341357e-1", "9.962650441327900559e-1", "9.9174584335548624677e-1",
    "3.2719281855444313679e-1", "7.0121082272069136249e-1", "-1.0160567116645209395e-2",
    "-2.5881940379280679841e-1", "-2.588194037928067984e-1", "-1.5914744129679321279e-1",
    "-5.3090384433653631704e-2", "-5.3090377448827914764e-2", "-2.47413890868462476e-4",
    "-1.7598765814327259821e-48", "-2.6351403616044099336e-290", "-2.7679550773616298917e-312",
]


def airy_scale(x, want, power):
    """below 0 Ai oscillates inside |x|^(-1/4) / sqrt(pi) (Ai' inside
    |x|^(1/4) / sqrt(pi)): near its zeros the error is measured against that"""
    env = np.where(x < 0, np.maximum(np.abs(x), 1e-300) ** power / np.sqrt(np.pi), 0)
    return np.maximum(np.abs(want), np.minimum(env, 1))


def test_airy_ai_against_exact_values_and_torch():
    x = np.array(AIRY_POINTS)
    want = np.array([float(v) for v in AIRY_EXACT])
    got = S.airy_ai(musa.tensor(x)).numpy()
    err = np.abs(got - want) / airy_scale(x, want, -0.25)
    big = np.abs(want) > 1e-300  # the last is a subnormal: compare absolutely
    assert err[big].max() < 3e-15, (x[big][err[big].argmax()], err[big].max())
    assert np.abs(got - want)[~big].max() < 1e-320
    # torch 1.13: 7e-6 off at -1e8 and 1.5e-6 at the first zero; within 1e-13 elsewhere
    xs = np.concatenate([np.linspace(-60, 40, 2001), [-1e4, -1e6, 0.0, 1e-20]])
    t = torch.special.airy_ai(torch.tensor(xs)).numpy()
    g = S.airy_ai(musa.tensor(xs)).numpy()
    assert (np.abs(g - t) / airy_scale(xs, t, -0.25).clip(1e-300)).max() < 1e-5


def test_airy_ai_edges_float32_integers():
    x = musa.tensor([math.inf, -math.inf, math.nan, -1e250, -0.0, 200.0], dtype=musa.float64)
    got = S.airy_ai(x).numpy()
    want = torch.special.airy_ai(torch.tensor(x.numpy())).numpy()
    # NaN where |x|^(3/2) overflows (no phase is left), as torch; at +inf the
    # limit 0, where torch 1.13 gives NaN
    assert got[0] == 0
    np.testing.assert_array_equal(got[1:], want[1:])
    x32 = np.linspace(-30, 30, 601).astype(np.float32)
    np.testing.assert_array_equal(
        S.airy_ai(musa.tensor(x32)).numpy(),
        S.airy_ai(musa.tensor(x32.astype(np.float64))).numpy().astype(np.float32))
    assert S.airy_ai(musa.tensor([1, 2])).dtype == musa.float32


def test_airy_ai_gradient():
    x0 = np.array(AIRY_POINTS[1:-1])  # -1e8's derivative needs its phase to 1e-8: skip it
    x = musa.tensor(x0, requires_grad=True)
    g = musa.autograd.grad(S.airy_ai(x).sum(), x)[0].numpy()
    want = np.array([float(v) for v in AIRY_PRIME_EXACT[1:-1]])
    err = np.abs(g - want) / airy_scale(x0, want, 0.25).clip(1e-300)
    assert err.max() < 3e-15, (x0[err.argmax()], err.max())
    xs = musa.tensor(np.array([-11.0, -2.0, 0.3, 2.5]), requires_grad=True)
    assert musa.autograd.gradcheck(S.airy_ai, (xs,))
    assert musa.autograd.gradgradcheck(S.airy_ai, (xs,))  # Ai'' = x Ai
