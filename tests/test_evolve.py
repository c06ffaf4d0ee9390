"""``algorithm="evolve"``: private evolution by nearest-candidate votes -- its plan, its releases, its answers."""

import numpy as np
import pytest

from privclust import KMeans
from privclust.algorithms import ALGORITHMS
from privclust.algorithms.base import FitContext
from privclust.algorithms.evolve import VOTES_PART, evolve_spec, vote_query
from privclust.privacy.budget import Budget, PrivacyAccountant
from privclust.privacy.noise import Randomness
from privclust.queries import in_memory

CENTERS = np.array([[-0.6, -0.5], [0.55, -0.5], [0.0, 0.6], [-0.5, 0.45]])


@pytest.fixture(scope="module")
def blobs4():
    rng = np.random.default_rng(3)
    X = np.vstack([c + 0.05 * rng.standard_normal((1000, 2)) for c in CENTERS])
    return np.clip(X, -1, 1)


def _ctx(public_n=None):
    budget = Budget(1.0, 1e-6)
    oracle = in_memory(np.zeros((10, 2)), budget, PrivacyAccountant(budget))
    return FitContext(oracle, 3, budget, Randomness(0), public_n=public_n)


def test_the_plan_is_the_votes_and_a_count_unless_n_is_public():
    assert [(p.name, p.share) for p in evolve_spec(_ctx(public_n=500)).parts] == [(VOTES_PART, 1.0)]
    counted = evolve_spec(_ctx())
    assert [p.name for p in counted.parts] == ["row count", VOTES_PART]
    assert sum(p.share for p in counted.parts) == pytest.approx(1.0)


def test_a_vote_is_one_count_for_the_nearest_candidate_whatever_the_domain():
    candidates = np.array([[0.0, 0.0], [100.0, 0.0], [0.0, -50.0]])
    query = vote_query(candidates, "votes")
    (block,) = query.blocks
    assert block.count and block.bound == 1.0 and block.width == 1  # sensitivity 1, not the domain's size
    rows = np.array([[1.0, 1.0], [90.0, 3.0], [2.0, -40.0], [60.0, 0.0]])
    ids, values = query.contribution(rows)
    assert ids.tolist() == [0, 1, 2, 1] and values.tolist() == [[1.0]] * 4


def test_every_generation_is_one_release_and_the_fit_spends_its_budget(blobs4):
    model = KMeans(4, epsilon=0.8, delta=1e-6, bounds=(-1, 1), algorithm="evolve", random_state=0).fit(blobs4)
    spent = model.privacy_spent_
    assert spent.epsilon == pytest.approx(0.8, rel=1e-6) and spent.epsilon <= 0.8 * (1 + 1e-9)
    labels = [s.label for s in spent.steps]
    generations = model.fit_info_["generations"]
    assert generations == int(4 * np.sqrt(2))
    assert sum("generation" in label for label in labels) == generations
    assert model.cluster_centers_.shape == (4, 2)


def test_the_votes_noise_does_not_grow_with_the_box(blobs4):
    tight = KMeans(4, bounds=(-1, 1), algorithm="evolve", random_state=1, public_n=len(blobs4)).fit(blobs4)
    loose = KMeans(4, bounds=(-10, 10), algorithm="evolve", random_state=1, public_n=len(blobs4)).fit(blobs4)
    # In rows, not in the box's units: a box 10x wider leaves every vote's noise as it was.
    assert loose.fit_info_["vote_std"] == pytest.approx(tight.fit_info_["vote_std"])
    assert tight.fit_info_["vote_std"] > 0


def test_well_separated_clusters_get_a_center_each(blobs4):
    errors = []
    for seed in range(3):
        model = KMeans(4, epsilon=1.0, delta=1e-6, bounds=(-1, 1), algorithm="evolve", random_state=seed).fit(blobs4)
        errors.append(np.linalg.norm(model.cluster_centers_[:, None] - CENTERS[None], axis=2).min(axis=0).max())
    assert sorted(errors)[1] < 0.1


def test_seeded_fits_repeat_and_differ_by_seed(blobs4):
    fit = lambda seed: KMeans(4, bounds=(-1, 1), algorithm="evolve", random_state=seed).fit(blobs4).cluster_centers_  # noqa: E731
    np.testing.assert_array_equal(fit(5), fit(5))
    assert not np.array_equal(fit(5), fit(6))


@pytest.mark.parametrize(
    "params, message",
    [
        ({"generations": 0}, "generations must be"),
        ({"rows_per_candidate": 0.0}, "rows_per_candidate must be"),
        ({"floor_z": -1.0}, "floor_z must be"),
        ({"step": 3.0}, "step must be"),
        ({"tail_df": 0.0}, "tail_df must be"),
        ({"init": "grid"}, "init must be"),
        ({"nonsense": 1}, "unknown evolve parameters"),
    ],
)
def test_bad_parameters_are_refused_before_any_data_is_read(params, message):
    ledger = PrivacyAccountant(Budget(5.0, 1e-3))
    with pytest.raises(ValueError, match=message):
        KMeans(3, bounds=(-1, 1), algorithm="evolve", algorithm_params=params, accountant=ledger).fit(np.zeros((50, 2)))
    assert ledger.spends == []


def test_it_is_registered_with_its_plan():
    from privclust.algorithms.base import algorithm_spec

    assert "evolve" in ALGORITHMS
    assert algorithm_spec("evolve", _ctx(public_n=100)) == evolve_spec(_ctx(public_n=100))  # a value


def test_a_latin_start_in_one_dimension_is_the_strata_centres():
    from privclust.algorithms.evolve import _first_population

    rng = np.random.default_rng(0)
    assert sorted(_first_population(5, 1, "latin", rng)[:, 0]) == pytest.approx([-0.8, -0.4, 0.0, 0.4, 0.8])
    square = _first_population(4, 2, "latin", rng)
    for axis in range(2):  # one candidate in each of the 4 strata of every axis
        assert sorted(np.floor((square[:, axis] + 1) * 2).astype(int)) == [0, 1, 2, 3]


def test_the_population_grows_with_n_up_to_its_cap(blobs4):
    def population(public_n, **params):
        model = KMeans(
            4, bounds=(-1, 1), algorithm="evolve", random_state=0, public_n=public_n, algorithm_params=params
        )
        return model.fit(blobs4).fit_info_["population"]

    assert population(400) == 4 * (20 + 1)  # n / (5 k) mutants per survivor below MANY_ROWS rows
    assert population(4000) == 4 * (200 + 1)
    assert population(20_000) == 4 * (500 + 1)  # n / (10 k) from MANY_ROWS rows on
    assert population(20_000, rows_per_candidate=5.0) == 4 * (1000 + 1)  # as the user asks
    assert population(4000, max_population=400) == 400  # 4 x (99 + 1)
    assert population(4000, max_population=8) == 4 * (4 + 1)  # never below MIN_MUTANTS per survivor


def test_a_box_ten_times_wider_than_the_data_is_narrowed_by_the_votes(blobs4):
    errors, zooms = [], []
    for seed in range(3):
        model = KMeans(4, epsilon=1.0, delta=1e-6, bounds=(-10, 10), algorithm="evolve", random_state=seed)
        model.fit(blobs4)
        errors.append(np.linalg.norm(model.cluster_centers_[:, None] - CENTERS[None], axis=2).min(axis=0).max())
        zooms.append(model.fit_info_.get("zooms"))
    assert sorted(errors)[1] < 0.1  # as in the tight box: a center on every cluster
    assert min(zooms) >= 1


def test_the_zoom_reads_only_votes_that_clear_the_noise_over_the_whole_population():
    from privclust.algorithms.evolve import ZOOM_SHRINK, _zoomed
    from privclust.queries.base import Released

    rng = np.random.default_rng(0)
    population = rng.uniform(-1, 1, size=(400, 2))
    box = np.array([[-1.0, -1.0], [1.0, 1.0]])
    near = np.flatnonzero(np.abs(population).max(axis=1) < 0.2)
    votes = np.zeros((400, 1))
    votes[near] = 100.0
    zoom = _zoomed(population, Released({"count": votes}, {"count": 1.0}), box)
    assert zoom is not None
    assert np.all(zoom[0] <= population[near].min(axis=0)) and np.all(zoom[1] >= population[near].max(axis=0))
    assert np.all(zoom[1] - zoom[0] <= ZOOM_SHRINK * 2.0)
    # the same votes under noise 30 times larger clear no floor: the box stays
    assert _zoomed(population, Released({"count": votes}, {"count": 30.0}), box) is None
    # a box the votes fill is not narrowed
    assert _zoomed(population, Released({"count": np.full((400, 1), 100.0)}, {"count": 1.0}), box) is None
