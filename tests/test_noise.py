"""Noise samplers: the distributions they draw, reproducibility, independent streams."""

import numpy as np
import pytest
from scipy import integrate, stats

from privclust.privacy.noise import Randomness, SecureNoise, SeededNoise

N = 20_000
# Secure noise cannot be seeded, so its tests are random: a low level keeps false alarms rare,
# while the wrong-scale checks below show the tests still have power.
LEVEL = 1e-4


@pytest.mark.parametrize("source", ["secure", "seeded"])
def test_gaussian_noise_distribution(source):
    noise = SecureNoise() if source == "secure" else SeededNoise(np.random.SeedSequence(1))
    values = np.full(N if source == "seeded" else 5000, 3.25)
    out = noise.add_gaussian(values, 2.0) - 3.25
    assert stats.kstest(out, "norm", args=(0, 2.0)).pvalue > LEVEL
    # A sampler with the wrong scale fails the same test.
    assert stats.kstest(out, "norm", args=(0, 2.4)).pvalue < 1e-3


@pytest.mark.parametrize("source", ["secure", "seeded"])
def test_laplace_noise_distribution(source):
    noise = SecureNoise() if source == "secure" else SeededNoise(np.random.SeedSequence(2))
    values = np.full(N if source == "seeded" else 5000, -7.5)
    out = noise.add_laplace(values, 0.5) + 7.5
    assert stats.kstest(out, "laplace", args=(0, 0.5)).pvalue > LEVEL
    assert stats.kstest(out, "laplace", args=(0, 0.6)).pvalue < 1e-3


def permute_and_flip_probabilities(scores, scale):
    """P(argmax(score + Exp(scale)) = i), by numerical integration (independent reference)."""
    scores = np.asarray(scores, float)
    probs = []
    for i, s in enumerate(scores):
        others = np.delete(scores, i)

        def density(x, s=s, others=others):
            p = np.exp(-(x - s) / scale) / scale
            return p * np.prod(1 - np.exp(-np.maximum(x - others, 0) / scale))

        probs.append(integrate.quad(density, s, np.inf)[0])
    return np.array(probs)


@pytest.mark.parametrize("source", ["secure", "seeded"])
def test_noisy_argmax_is_permute_and_flip(source):
    noise = SecureNoise() if source == "secure" else SeededNoise(np.random.SeedSequence(3))
    scores, scale, draws = [0.0, 1.0, 2.0, 2.5], 2.0, 4000
    counts = np.bincount([noise.noisy_argmax(scores, scale) for _ in range(draws)], minlength=4)
    expected = permute_and_flip_probabilities(scores, scale)
    assert expected.sum() == pytest.approx(1.0, abs=1e-6)
    assert stats.chisquare(counts, expected * draws).pvalue > LEVEL


def test_seeded_runs_are_reproducible_and_streams_independent():
    a, b = Randomness(5), Randomness(5)
    x = np.zeros(100)
    first, second = a.noise.add_gaussian(x, 1.0), a.noise.add_gaussian(x, 1.0)
    assert np.array_equal(first, b.noise.add_gaussian(x, 1.0))
    # Two mechanisms never share noise: consecutive calls draw from different streams.
    assert abs(np.corrcoef(first, second)[0, 1]) < 0.35
    assert not np.array_equal(a.geometry().uniform(size=5), a.geometry().uniform(size=5))
    assert not np.array_equal(Randomness(6).noise.add_gaussian(x, 1.0), first)


def test_secure_mode_is_default_and_unseeded():
    r = Randomness(None)
    assert r.secure
    x = np.zeros(50)
    assert not np.array_equal(r.noise.add_gaussian(x, 1.0), Randomness(None).noise.add_gaussian(x, 1.0))


def test_bad_random_state():
    with pytest.raises(TypeError):
        Randomness("seed")
    with pytest.raises(ValueError):
        Randomness(-1)
    assert not Randomness(np.random.default_rng(0)).secure
