"""The audits of privclust's mechanisms and algorithms: real ones pass, broken ones are caught.

Draw counts here are reduced to keep the suite quick; each is one at which the outcome is statistically
safe (a real mechanism is flagged with probability <= 1 - confidence whatever the draws; a control is
asserted caught only where its margin at these draws is large).  The default draws are exercised by
``privclust bench audit`` (docs/benchmarks.md has a run and the margins over repeated runs).

Tests that a correct mechanism passes use a confidence of 0.99999 (the bound exceeds the truth with
probability 1e-5), so that the suite, whose secure noise cannot be seeded, is not flaky.
"""

import numpy as np
import pytest

from privclust.audit import CASES, CONTROLS, Control, audit, cases, scaled_noise, unclipped_domain
from privclust.geometry.domain import BoxDomain
from privclust.privacy.noise import SecureNoise, SeededNoise

SURE = 0.99999


@pytest.fixture
def numpy_samplers(monkeypatch):
    """The mechanism audits with numpy's samplers: the same distributions, microseconds per draw."""
    monkeypatch.setattr(cases, "_secure", lambda: SeededNoise(np.random.SeedSequence()))


MECHANISMS = {
    "Laplace mechanism": 4000,
    "Gaussian mechanism": 4000,
    "exponential mechanism (permute-and-flip)": 400,
    "implicit exponential mechanism (Gumbel)": 400,
    "sparse vector (AboveThreshold)": 200,
    "NoisyAVG": 300,
    "private selection: the comparison": 2000,
    "private box (magnitudes)": 300,
}


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_real_mechanisms_pass_on_the_secure_samplers(name):
    result = audit(CASES[name], MECHANISMS[name], confidence=SURE)
    assert result.noise == "secure" and not result.broken_on_purpose
    assert not result.violated, result


MECHANISM_CONTROLS = [name for name, c in CONTROLS.items() if c.case.name in MECHANISMS]


@pytest.mark.parametrize("name", MECHANISM_CONTROLS)
def test_mechanism_controls_are_caught_at_their_default_draws(name, numpy_samplers):
    result = audit(CONTROLS[name])
    assert result.broken_on_purpose and result.violated and result.caught, result
    assert result.empirical_epsilon > result.claimed_epsilon


def test_the_box_case_audits_the_release_a_fit_makes_first(monkeypatch, numpy_samplers):
    """The case opens the box as find_box does (one shared opening): the first release of a fit's box and the
    audit's release are the same query -- its label, part and buckets -- drawing the same share of the plan."""
    from privclust.private_domain import private_bounds
    from privclust.queries.plan import Plan

    made = []
    release = Plan.release

    def recorded(plan, query, part, fraction=1.0):
        made.append((query, part, plan.allotment(part)))
        return release(plan, query, part, fraction)

    monkeypatch.setattr(Plan, "release", recorded)
    sample, _ = CASES["private box (magnitudes)"].build()
    sample(1, 1)
    audited = made[-1]
    made.clear()
    X = np.full((cases.BOX_ROWS, 1), 0.5)
    private_bounds(X, cases.ALG_EPSILON, cases.ALG_DELTA, random_state=0)
    fit_first = made[0]
    assert (audited[0].label, audited[1], audited[2]) == (fit_first[0].label, fit_first[1], fit_first[2])
    probe = np.array([[0.0], [0.5], [-3.0], [cases.BOX_FAR], [1e300]])
    np.testing.assert_array_equal(audited[0].bucket(probe), fit_first[0].bucket(probe))
    assert audited[0].n_buckets == fit_first[0].n_buckets


def _no_noise(self, values, scale):
    return np.asarray(values, dtype=np.float64).copy()


def _argmax(scores):
    """The exact argmax, ties broken at random: the exponential mechanism without its noise."""
    return int(np.random.default_rng().choice(np.flatnonzero(scores == np.max(scores))))


@pytest.mark.parametrize(
    "method, replacement, name, draws",
    [
        ("add_laplace", _no_noise, "Laplace mechanism", 2000),
        ("add_gaussian", _no_noise, "Gaussian mechanism", 2000),
        ("noisy_argmax", lambda self, scores, scale: _argmax(scores), "exponential mechanism (permute-and-flip)", 200),
    ],
)
def test_the_audited_path_is_the_secure_sampler(monkeypatch, method, replacement, name, draws):
    # The regression of issue 13: with the default sampler's noise gone, the audit must fail.
    monkeypatch.setattr(SecureNoise, method, replacement)
    assert audit(CASES[name], draws).violated


ALGORITHMS = {
    "FastLloyd": 200,
    "FastLloyd (far rows clipped)": 200,
    "FastLloyd at user level": 200,
    "GLloyd": 100,
    "SuLloyd": 100,
    "greedy (histogram)": 60,
    "evolve": 150,
    "maxcover": 20,
    "maxcover without final round": 20,
    "maxcover Gaussian average": 20,
    "onecluster": 100,
    "Subsampled SuLloyd (rate 0.1)": 100,
    "federated round: server's view": 20,
}


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_real_algorithms_pass(name):
    result = audit(CASES[name], ALGORITHMS[name], confidence=SURE)
    assert not result.violated, result


def test_fastlloyd_with_half_its_noise_is_caught():
    assert audit(CONTROLS["FastLloyd: noise / 2 (broken on purpose)"], 400).caught


def test_fastlloyd_whose_far_rows_are_not_clipped_is_caught():
    """auto's FastLloyd calibrates its noise to the radius the far rows are clipped onto: without the clipping,
    the extra row adds its whole distance, about five radii, and shows far more than the claimed mu."""
    result = audit(CONTROLS["FastLloyd (far rows clipped): far rows not clipped (broken on purpose)"], 200)
    assert result.caught and result.empirical_mu > result.claimed_mu, result


def test_a_user_level_fit_calibrated_for_one_row_is_caught():
    """Each user's rows bounded to m, but every release noised for one row: the user's m rows show m times
    the claimed mu (the real user-level case passes above, on the same pair)."""
    result = audit(CONTROLS["FastLloyd at user level: one row's sensitivity for m rows (broken on purpose)"], 150)
    assert result.caught and result.empirical_mu > result.claimed_mu, result


def test_dropped_clipping_is_caught():
    assert audit(
        CONTROLS["maxcover without final round: clipping to the bounds dropped (broken on purpose)"], 60
    ).caught


@pytest.mark.parametrize(
    "name, factor, draws",
    [
        ("greedy (histogram)", 0.25, 120),
        ("evolve", 0.25, 150),
        ("maxcover", 0.125, 72),
        ("maxcover Gaussian average", 0.05, 80),
    ],
)
def test_stronger_breaks_of_the_slow_algorithms_are_caught_quickly(name, factor, draws):
    # Their noise / 2 controls need the default draws (see the module docstring).  A larger break, through
    # the same pair and the same injection, separates the sides at a few dozen draws -- about the fewest
    # at which a GDP bound of 1.6 can be shown at all.
    breakage = f"noise x {factor}"
    control = Control(CASES[name], breakage, lambda: scaled_noise(factor, ("gaussian", "laplace", "exponential")))
    assert audit(control, draws).caught


def test_federated_audit_fails_without_masks(monkeypatch):
    from privclust.federated import crypto

    # Every mask (pairwise, self, output) is expanded from a key by the same generator: zero it.
    monkeypatch.setattr(crypto, "prg", lambda key, count: np.zeros(count, np.uint64))
    result = audit(CASES["federated round: server's view"], 20)
    assert result.violated and result.extra["uniformity_p_value"] < 1e-3


def test_every_control_family_required_by_the_audit_is_present():
    families = {c.case.family for c in CONTROLS.values()}
    assert {"Laplace", "Gaussian", "exponential mechanism", "FastLloyd", "greedy", "user level"} <= families
    assert families & {"maxcover", "onecluster", "sample and aggregate"}
    assert any("clipping" in c.breakage for c in CONTROLS.values())
    assert all(name.endswith("(broken on purpose)") and "," not in name for name in CONTROLS)


def test_scaled_noise_scales_both_sources_and_restores_them(monkeypatch):
    def own_methods():
        return {(cls, name): cls.__dict__.get(name) for cls in (SecureNoise, SeededNoise) for name in dir(cls)}

    seen = []
    monkeypatch.setattr(SecureNoise, "add_laplace", lambda self, values, scale: seen.append(scale) or values)
    before = own_methods()
    with scaled_noise(0.5, ("laplace",)):
        SecureNoise().add_laplace(np.zeros(1), 3.0)
    assert seen == [1.5]

    with pytest.raises(RuntimeError), scaled_noise(0.5):
        draws = SeededNoise(np.random.SeedSequence(1)).add_gaussian(np.zeros(20000), 2.0)
        assert np.std(draws) == pytest.approx(1.0, rel=0.05)
        raise RuntimeError
    assert own_methods() == before


def test_unclipped_domain_maps_without_clipping_and_restores():
    domain = BoxDomain(np.array([0.0]), np.array([10.0]))
    rows = np.array([[5.0], [20.0]])
    with unclipped_domain():
        np.testing.assert_allclose(domain.to_unit(rows.copy()), [[0.0], [3.0]])
    np.testing.assert_allclose(domain.to_unit(rows.copy()), [[0.0], [1.0]])


DEVICE_CASES = [
    "local randomizer: randomized response",
    "local randomizer: one coordinate",
    "shuffled randomized response",
]


@pytest.mark.parametrize("name", DEVICE_CASES)
def test_device_randomizers_and_the_shuffled_count_meet_their_claims(name):
    result = audit(CASES[name], confidence=SURE)
    assert result.noise == "device" and not result.violated, result


@pytest.mark.parametrize("name", [n for n, c in CONTROLS.items() if c.case.name in DEVICE_CASES])
def test_overconfident_devices_are_caught(name):
    result = audit(CONTROLS[name])
    assert result.broken_on_purpose and result.violated and result.caught, result
