"""The local model: randomizers are epsilon-LDP and unbiased; the greedy runs unchanged on one round of reports."""

import math

import numpy as np
import pytest
from scipy.stats import beta

from privclust import Budget, BudgetExceededError, KMeans, PrivacyAccountant
from privclust.local import (
    REPORT,
    Aggregator,
    GeneralizedRR,
    LocalHashing,
    OneCoordinate,
    Protocol,
    Randomizer,
    ShufflerKey,
    decode_reports,
    encode_reports,
    frequency_oracle,
)
from privclust.local.frequency import hash_functions_for
from privclust.metrics import nicv
from privclust.queries import CapabilityError
from privclust.shuffle import Shuffler


def blobs(n, k=4, d=2, seed=0, spread=0.05):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-0.7, 0.7, (k, d))
    return np.clip(centers[rng.integers(0, k, n)] + rng.normal(0, spread, (n, d)), -1, 1), centers


@pytest.mark.parametrize(
    "make", [lambda run: GeneralizedRR(12, 1.5), lambda run: LocalHashing(500, 1.5, seed=run, hash_functions=8192)]
)
def test_frequency_oracles_are_unbiased_with_the_stated_variance(make):
    rng = np.random.default_rng(0)
    values = rng.integers(0, 8, 60_000)
    true = np.bincount(values, minlength=make(0).domain)
    runs = []
    for run in range(30):  # unbiased over the public hash family's draw too: a fresh family each run
        oracle = make(run)
        runs.append(oracle.estimate(oracle.tally(oracle.randomize(values, rng)), values.size, np.arange(oracle.domain)))
    runs = np.array(runs)
    # Mean over runs is the truth (within 4.5 standard errors), and a value nobody holds has about the stated
    # variance (with enough shared hash functions that collisions with the heavy values add little).
    spread = runs.std(0).max()
    assert np.all(np.abs(runs.mean(0) - true) < 4.5 * spread / np.sqrt(30))
    empty = runs[:, 10:].ravel()
    assert empty.std() == pytest.approx(math.sqrt(values.size * oracle.variance()), rel=0.25)


def test_the_randomizers_output_probabilities_are_within_e_to_the_epsilon():
    eps = 1.3
    grr = GeneralizedRR(20, eps)
    assert grr.p / grr.q == pytest.approx(math.exp(eps))
    olh = LocalHashing(1000, eps, seed=0)
    q_other = (1 - olh.p) / (olh.g - 1)  # any other hash value, for a fixed hash function
    assert olh.p / q_other == pytest.approx(math.exp(eps))
    vec = OneCoordinate(5, eps)
    up_max, up_min = 0.5 + 1 / (2 * vec.scale), 0.5 - 1 / (2 * vec.scale)  # P[bit = +1] at x_j = 1 and -1
    assert up_max / up_min == pytest.approx(math.exp(eps))


def test_the_one_coordinate_randomizer_is_unbiased():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (200_000, 3)) * np.array([1.0, 0.5, 0.1])
    vec = OneCoordinate(3, 1.0)
    total = vec.estimates(vec.randomize(x, rng)).sum(0)
    assert np.all(np.abs(total - x.sum(0)) < 4 * math.sqrt(x.shape[0] * vec.variance()))


def test_local_hashing_is_chosen_for_large_domains_and_sized_by_the_users():
    assert isinstance(frequency_oracle(10, 2.0, 0), GeneralizedRR)  # 10 < 3 e^2 + 2
    big = frequency_oracle(5_000, 2.0, 0, users=1e6)
    assert isinstance(big, LocalHashing) and big.hash_functions == hash_functions_for(1e6, 2.0) > 1024


def empirical_local_epsilon(report, a, b, draws=20_000, seed=0):
    """A 99.9%-confidence lower bound on the privacy loss of ``report`` between inputs a and b, from the
    frequencies of every output (Clopper-Pearson), over outputs seen at least 50 times."""
    rng = np.random.default_rng(seed)
    out_a, out_b = report(a, draws, rng), report(b, draws, rng)
    keys, inverse = np.unique(np.concatenate([out_a, out_b]), return_inverse=True, axis=0)
    count_a = np.bincount(inverse[:draws], minlength=len(keys))
    count_b = np.bincount(inverse[draws:], minlength=len(keys))
    worst = 0.0
    for ca, cb in zip(count_a, count_b):
        if ca + cb < 50:
            continue
        for hi, lo in ((ca, cb), (cb, ca)):
            p_low = beta.ppf(0.0005, hi, draws - hi + 1) if hi else 0.0
            q_high = beta.ppf(0.9995, lo + 1, draws - lo)
            if p_low > 0:
                worst = max(worst, math.log(p_low / q_high))
    return worst


@pytest.mark.parametrize("query", [3, -1])  # a level's histogram (balls of radius 0.18), the lifting grid's
def test_a_devices_report_is_epsilon_ldp_empirically(query):
    eps = 1.0
    protocol = Protocol(n_clusters=2, n_features=2, bounds=[-1, 1], epsilon=eps, users=1000, seed=4)
    local = Randomizer(protocol).round.queries[query]

    def report(point, draws, rng):
        buckets, values = local.query.contribution(np.repeat([point], draws, axis=0))
        records = local.randomize(buckets, np.asarray(values, dtype=float), rng)
        return np.stack([records[f].astype(np.int64) for f in ("hash", "y", "coord", "bit")], 1)

    # Two points in different buckets of this query: the report's law may differ by e^eps, never more.  (A
    # level's value of about 0.2 here keeps the bucket only that often: the loss is real but smaller.)
    loss = empirical_local_epsilon(report, [-0.9, -0.9], [0.9, 0.9], draws=40_000)
    assert loss <= eps and (query == 3 or loss > 0.5)


def test_reports_are_refused_unless_they_were_made_for_the_protocol():
    protocol = Protocol(n_clusters=2, n_features=2, bounds=[-1, 1], epsilon=1.0, users=100, seed=1)
    other = Protocol(n_clusters=3, n_features=2, bounds=[-1, 1], epsilon=1.0, users=100, seed=1)
    batch = Randomizer(protocol, np.random.default_rng(0)).reports(np.zeros((5, 2)))
    assert len(batch) == 13 + 5 * REPORT.itemsize and len(decode_reports(protocol, batch)) == 5
    with pytest.raises(ValueError, match="another protocol"):
        decode_reports(other, batch)
    with pytest.raises(ValueError, match="truncated"):
        decode_reports(protocol, batch[:-3])
    with pytest.raises(ValueError, match="bad header"):
        decode_reports(protocol, b"not reports at all")


@pytest.mark.parametrize("field, value", [("y", 2**31), ("hash", 65535)])
def test_a_forged_report_with_a_field_out_of_range_is_refused(field, value):
    protocol = Protocol(n_clusters=2, n_features=2, bounds=[-1, 1], epsilon=1.0, users=1000, seed=1)
    records = decode_reports(protocol, Randomizer(protocol, np.random.default_rng(0)).reports(np.zeros((400, 2))))
    forged = records.copy()
    forged[field][0] = value
    aggregator = Aggregator(protocol)
    aggregator.add(records)  # the honest batch is tallied
    with pytest.raises(ValueError, match="out of range"):
        aggregator.add(forged)
    assert aggregator.received == 400  # the refused batch left the tallies as they were


def test_the_aggregator_takes_reports_in_any_order_and_batches():
    X, _ = blobs(20_000)
    protocol = Protocol(n_clusters=4, n_features=2, bounds=[-1, 1], epsilon=2.0, users=len(X), seed=2)
    records = decode_reports(protocol, Randomizer(protocol, np.random.default_rng(0)).reports(X))
    whole, parts = Aggregator(protocol), Aggregator(protocol)
    whole.add(records)
    shuffled = records[np.random.default_rng(1).permutation(len(records))]
    for chunk in np.array_split(shuffled, 7):
        parts.add(encode_reports(protocol, chunk))
    for a, b in zip(whole.tallies, parts.tallies):
        np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_allclose(whole.release().centers, parts.release().centers)


def test_the_deployed_protocol_finds_the_clusters():
    X, centers = blobs(100_000, seed=3)
    protocol = Protocol(n_clusters=4, n_features=2, bounds=[-1, 1], epsilon=2.0, users=len(X), seed=7)
    aggregator = Aggregator(protocol)
    aggregator.add(Randomizer(protocol, np.random.default_rng(0)).reports(X))
    result = aggregator.release()
    assert result.privacy_spent.epsilon == pytest.approx(2.0) and result.privacy_spent.delta == 0.0
    assert nicv(X, result.centers) < 0.1 * nicv(X, X.mean(0, keepdims=True))


def test_kmeans_in_the_local_model_states_the_local_guarantee_and_finds_the_clusters():
    X, _ = blobs(100_000, seed=5)
    model = KMeans(4, epsilon=2.0, bounds=(-1, 1), algorithm="greedy", privacy_model="local", random_state=0).fit(X)
    spent = model.privacy_spent_
    assert spent.epsilon == pytest.approx(2.0) and spent.delta == 0.0 and len(spent.steps) == 1
    assert "LDP" in spent.steps[0].label
    assert nicv(X, model.cluster_centers_) < 0.1 * nicv(X, X.mean(0, keepdims=True))


@pytest.mark.parametrize(
    "algorithm, params",
    [("fastlloyd", None), ("maxcover", None), ("onecluster", None), ("greedy", {"selection": "exponential"})],
)
def test_algorithms_the_local_model_cannot_run_are_refused_before_anything_is_spent(algorithm, params):
    shared = PrivacyAccountant(Budget(10.0, 1e-3))
    model = KMeans(
        2, bounds=(-1, 1), algorithm=algorithm, algorithm_params=params, privacy_model="local", accountant=shared
    )
    with pytest.raises(CapabilityError, match="nothing was spent"):
        model.fit(np.zeros((50, 2)))
    assert shared.spends == []


def test_sparse_greedy_levels_are_decoded_locally_and_dropped_by_a_model_without_sparse_releases(monkeypatch):
    from privclust.local.oracle import LocalOracle
    from privclust.queries.plan import DENSE

    X, _ = blobs(3_000, d=6, seed=1)

    def fit(**params):
        return KMeans(
            2,
            bounds=(-1, 1),
            algorithm="greedy",
            privacy_model="local",
            random_state=0,
            algorithm_params={"projection_dim": 4, **params},
        ).fit(X)

    assert fit(levels=8).cluster_centers_.shape == (2, 6)  # sparse levels: hierarchical decoding
    monkeypatch.setattr(LocalOracle, "capabilities", frozenset({DENSE}))
    fit()  # default levels: the dense ones only
    with pytest.raises(CapabilityError):
        fit(levels=8)


def test_a_local_fit_is_refused_by_a_spent_shared_budget_before_any_row_is_read():
    shared = PrivacyAccountant(Budget(1.0))
    shared.spend_dp("earlier", 0.8)

    class Untouchable:
        shape = (100, 2)

        def __array__(self, *args, **kwargs):
            raise AssertionError("the rows were read")

    with pytest.raises(BudgetExceededError):
        KMeans(2, epsilon=0.5, bounds=(-1, 1), algorithm="greedy", privacy_model="local", accountant=shared).fit(
            Untouchable()
        )


def test_a_vector_query_is_estimated_without_bias_with_its_stated_noise():
    from privclust.local import LocalQuery
    from privclust.queries import Block, SumQuery

    rng = np.random.default_rng(3)
    cells = rng.integers(0, 6, 80_000)
    x = rng.uniform(-1, 1, (80_000, 3)) * 0.6 + (cells[:, None] - 2.5) * 0.1
    query = SumQuery(
        "grid",
        6,
        (Block("sum", 3, math.sqrt(3), coordinate_bound=1.0), Block("count", 1, 1.0, count=True)),
        lambda chunk: (cells, np.hstack([x, np.ones((len(x), 1))])),
    )
    local = LocalQuery.design(query, 1.0, 3.0, seed=1, bucket_share=0.5, users=len(x))
    buckets, values = query.contribution(None)
    released = local.release(local.tally(local.randomize(buckets, values, rng)))
    true_sums = np.stack([x[cells == c].sum(0) for c in range(6)])
    true_counts = np.bincount(cells, minlength=6)
    assert np.all(np.abs(released["count"][:, 0] - true_counts) < 4 * released.std["count"])
    assert np.all(np.abs(released["sum"] - true_sums) < 4 * released.std["sum"])


def _stream_urandom(monkeypatch, seed=0):
    """Replace the OS CSPRNG the devices and the shuffler draw from with a reproducible byte stream; returns
    the list of byte counts drawn (so a test sees that the secure source, and only it, was used)."""
    import privclust.local.secure as secure

    stream, drawn = np.random.default_rng(seed), []

    def fake(n):
        drawn.append(n)
        return stream.bytes(n)

    monkeypatch.setattr(secure.os, "urandom", fake)
    return drawn


def test_an_unseeded_device_draws_every_coin_from_the_os_csprng(monkeypatch):
    protocol = Protocol(n_clusters=2, n_features=2, bounds=[-1, 1], epsilon=1.0, users=1000, seed=1)
    X, _ = blobs(500)
    first_draws = _stream_urandom(monkeypatch, seed=5)
    first = Randomizer(protocol).reports(X)
    _stream_urandom(monkeypatch, seed=5)
    again = Randomizer(protocol).reports(X)
    _stream_urandom(monkeypatch, seed=6)
    other = Randomizer(protocol).reports(X)
    # The same secure bytes give the same reports, other bytes other reports: no other randomness is used.
    assert first == again and first != other and sum(first_draws) >= 8 * len(X)


def test_the_unseeded_local_simulation_draws_the_devices_coins_from_the_os_csprng(monkeypatch):
    drawn = _stream_urandom(monkeypatch)
    X, _ = blobs(3000)
    KMeans(2, epsilon=2.0, bounds=(-1, 1), algorithm="greedy", privacy_model="local").fit(X)
    assert sum(drawn) >= 8 * len(X)


def test_the_secure_source_has_the_laws_the_randomizers_need():
    from privclust.local.secure import SecureRandom

    rng = SecureRandom()
    u = rng.random(20_000)
    assert u.shape == (20_000,) and u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.02
    k = rng.integers(3, 10, size=20_000)
    assert k.min() == 3 and k.max() == 9 and set(np.bincount(k)[3:].tolist()).isdisjoint({0})
    big = rng.integers(0, 3 * 2**61, size=20_000)  # a range that does not divide 2^64: rejection at work
    assert big.min() >= 0 and big.max() < 3 * 2**61 and np.mean(big < 2**61) == pytest.approx(1 / 3, abs=0.02)
    picks = rng.choice(3, size=30_000, p=[0.2, 0.0, 0.8])
    assert not np.any(picks == 1) and abs(np.mean(picks == 0) - 0.2) < 0.02
    order = rng.permutation(1000)
    assert sorted(order.tolist()) == list(range(1000)) and not np.array_equal(order, np.arange(1000))


def test_the_same_batch_twice_or_a_replayed_report_is_refused():
    protocol = Protocol(n_clusters=2, n_features=2, bounds=[-1, 1], epsilon=1.0, users=2000, seed=1)
    X, _ = blobs(500)
    batch = Randomizer(protocol, np.random.default_rng(0)).reports(X)
    aggregator = Aggregator(protocol)
    aggregator.add(batch)
    with pytest.raises(ValueError, match="repeat a nonce") as refused:
        aggregator.add(batch)  # the same batch again
    records = decode_reports(protocol, Randomizer(protocol, np.random.default_rng(1)).reports(X))
    with pytest.raises(ValueError, match="repeat a nonce"):
        aggregator.add(np.concatenate([records, records[7:8]]))  # one report twice inside a (shuffled) batch
    assert aggregator.received == 500
    aggregator.add(records)  # fresh reports of the same points are fine: each has its own nonce
    assert aggregator.received == 1000
    assert "0." not in str(refused.value)  # the refusal names counts, never a report or a point


def test_more_reports_than_the_protocols_users_are_refused():
    protocol = Protocol(n_clusters=2, n_features=2, bounds=[-1, 1], epsilon=1.0, users=1000, seed=1)
    honest = Randomizer(protocol, np.random.default_rng(0)).reports(blobs(1000)[0])
    planted = Randomizer(protocol, np.random.default_rng(1)).reports(np.full((500, 2), 0.94))  # one user, many
    aggregator = Aggregator(protocol)
    aggregator.add(honest)
    with pytest.raises(ValueError, match="more reports than the protocol's 1,000 users"):
        aggregator.add(planted)
    assert aggregator.received == 1000
    with pytest.raises(ValueError, match="more reports than"):
        Aggregator(protocol).add(Randomizer(protocol).reports(np.zeros((1001, 2))))


def test_a_shuffle_protocol_states_the_guarantee_of_the_reports_it_received():
    from privclust.shuffle import shuffle_epsilon

    key = ShufflerKey.generate()
    public = dict(n_clusters=2, n_features=2, bounds=[-1, 1], seed=3, shuffler_key=key.public_hex)
    protocol = Protocol.for_shuffle(1.0, 1e-6, 200_000, **public)
    X, _ = blobs(1000)
    aggregator = Aggregator(protocol)
    aggregator.add(Shuffler().shuffle_batch(protocol, Randomizer(protocol, np.random.default_rng(0)).reports(X), key))
    real = shuffle_epsilon(protocol.epsilon, 1000, 1e-6)
    assert real > 7  # 1,000 reports hide little: about the local epsilon_0, nowhere near the declared 1
    with pytest.raises(ValueError, match=r"1,000 reports of the planned 200,000 give only central \(epsilon=7\.7"):
        aggregator.release()  # refused by default: nothing released
    result = aggregator.release(accept_weaker=True)
    spent = result.privacy_spent
    assert spent.epsilon == pytest.approx(real) and spent.delta == 1e-6 and result.accepted_weaker
    assert "ACCEPTED WEAKER" in spent.steps[0].label and "1,000 of the planned 200,000" in spent.steps[0].label


def test_a_full_shuffle_round_meets_its_declared_guarantee_without_an_override():
    X, _ = blobs(20_000)
    key = ShufflerKey.generate()
    public = dict(n_clusters=4, n_features=2, bounds=[-1, 1], seed=2, shuffler_key=key.public_hex)
    protocol = Protocol.for_shuffle(1.0, 1e-6, len(X), **public)
    aggregator = Aggregator(protocol)
    devices = Randomizer(protocol, np.random.default_rng(0)).reports(X)
    with pytest.raises(ValueError, match="did not pass the shuffler"):  # a device's batch, linkable: nothing tallied
        aggregator.add(devices)
    with pytest.raises(ValueError, match="not the shuffler's key"):  # the shuffler signs only with the named key
        Shuffler().shuffle_batch(protocol, devices, ShufflerKey.generate())
    forged = bytearray(Shuffler().shuffle_batch(protocol, devices, key))
    forged[-1] ^= 1
    with pytest.raises(ValueError, match="signature of the shuffler"):  # a batch it did not sign whole
        aggregator.add(bytes(forged))
    unkeyed = Protocol.for_shuffle(1.0, 1e-6, len(X), **{**public, "shuffler_key": None})
    with pytest.raises(ValueError, match="names no shuffler's key"):  # nothing could tell its shuffled batches
        Aggregator(unkeyed).add(Shuffler().shuffle_batch(unkeyed, Randomizer(unkeyed).reports(X[:10])))
    assert aggregator.received == 0
    aggregator.add(Shuffler().shuffle_batch(protocol, devices, key))
    result = aggregator.release()
    assert result.privacy_spent.epsilon == pytest.approx(1.0) and not result.accepted_weaker


def test_replace_one_and_add_remove_spends_compose_in_one_relation():
    from privclust.privacy.budget import ADD_REMOVE, REPLACE_ONE, Spend

    central = Spend("central", epsilon=1.0, delta=1e-6)
    assert central.relation == ADD_REMOVE
    converted = central.under(REPLACE_ONE)  # a replacement is a removal and an addition: group privacy of 2
    assert converted.epsilon == 2.0 and converted.delta == pytest.approx((1 + math.e) * 1e-6)
    assert Spend("gauss", mu=0.5).under(REPLACE_ONE).mu == 1.0
    with pytest.raises(ValueError, match="cannot be stated for add/remove"):
        Spend("local", epsilon=1.0, relation=REPLACE_ONE).under(ADD_REMOVE)
    ledger = PrivacyAccountant()
    ledger.spend(central)
    assert ledger.report().relation == ADD_REMOVE and ledger.guarantee() == (1.0, 1e-6)
    ledger.spend(Spend("local", epsilon=1.0, relation=REPLACE_ONE))
    eps, delta = ledger.guarantee()
    assert eps == pytest.approx(3.0) and delta == pytest.approx((1 + math.e) * 1e-6)
    report = ledger.report()
    assert report.relation == REPLACE_ONE and "replace-one" in str(report)
    assert report.as_dict()["relation"] == REPLACE_ONE


def test_a_local_fit_after_a_central_one_is_charged_for_replace_one_neighbours():
    X, _ = blobs(5000)
    shared = PrivacyAccountant(Budget(2.5, 1e-5))
    KMeans(2, epsilon=1.0, delta=1e-6, bounds=(-1, 1), algorithm="greedy", accountant=shared, random_state=0).fit(X)
    central = len(shared.spends)
    assert shared.guarantee()[0] <= 1.0  # the central fit alone, for add/remove neighbours
    local = KMeans(2, epsilon=1.0, bounds=(-1, 1), algorithm="greedy", privacy_model="local", accountant=shared)
    # For replace-one neighbours the central fit costs about twice its epsilon: with the local round's 1 that
    # is over 2.5 (composed as if one relation, it was at most 1 + 1).
    with pytest.raises(BudgetExceededError, match="over the budget"):
        local.set_params(random_state=0).fit(X)
    assert len(shared.spends) == central  # refused before anything was spent
    spent = KMeans(2, epsilon=1.0, bounds=(-1, 1), algorithm="greedy", privacy_model="local", random_state=0)
    assert spent.fit(X).privacy_spent_.steps[0].relation == "replace-one"


def test_a_ledger_file_keeps_a_spends_relation(tmp_path):
    from privclust.privacy.budget import REPLACE_ONE, Spend
    from privclust.privacy.ledger import LedgerAccountant

    LedgerAccountant.create(tmp_path / "ledger.json", Budget(10.0, 1e-5))
    LedgerAccountant.open(tmp_path / "ledger.json").spend(Spend("local round", epsilon=1.0, relation=REPLACE_ONE))
    LedgerAccountant.open(tmp_path / "ledger.json").spend(Spend("central fit", epsilon=1.0))
    again = LedgerAccountant.open(tmp_path / "ledger.json")
    assert [s.relation for s in again.spends] == [REPLACE_ONE, "add/remove"] and again.guarantee()[0] == 3.0


def test_subsampling_does_not_amplify_a_local_fit():
    from privclust import Subsampled

    local = KMeans(2, epsilon=1.0, bounds=(-1, 1), algorithm="greedy", privacy_model="local", random_state=0)
    with pytest.raises(ValueError, match="central fits only"):
        Subsampled(local, rate=0.1, random_state=0).fit(blobs(2000)[0])


def test_a_ledger_run_refuses_a_local_round_the_ledger_itself_charges_it_as_replace_one(tmp_path):
    from privclust.privacy.ledger import LedgerAccountant

    X, _ = blobs(3000)
    ledger = LedgerAccountant.create(tmp_path / "ledger.json", Budget(2.5, 1e-5))
    ledger.spend_dp("a central release", 1.0)
    local = KMeans(2, epsilon=1.0, bounds=(-1, 1), algorithm="greedy", privacy_model="local", random_state=0)
    # A run's reservation is add/remove (1 + 1 <= 2.5 passes); settled, the round would make the file replace-one
    # (2 + 1 > 2.5).  So the run refuses it, and the ledger charged directly refuses it too.
    with ledger.run(1.0, 0.0) as run:
        with pytest.raises(BudgetExceededError, match="replace-one"):
            local.set_params(accountant=run).fit(X)
    with pytest.raises(BudgetExceededError, match="over the budget"):
        local.set_params(accountant=ledger).fit(X)
    assert [s.label for s in LedgerAccountant.open(tmp_path / "ledger.json").spends] == ["a central release"]


def test_a_protocol_with_restarts_is_refused_before_any_report():
    # One round of reports holds one greedy run: a second run would need a second round (it used to fail
    # only at release, after every device had reported).
    protocol = Protocol(
        n_clusters=2, n_features=2, bounds=[-1, 1], epsilon=4.0, users=100, seed=7, algorithm_params={"restarts": 2}
    )
    with pytest.raises(ValueError, match="one round: one greedy run; drop 'restarts'"):
        Randomizer(protocol)
    with pytest.raises(ValueError, match="drop 'restarts'"):
        Aggregator(protocol)


def test_a_weak_shuffler_key_is_refused_for_signatures_anyone_can_make():
    """Ed25519's points of small order (and non-canonical encodings of two of them): against each, the trivial
    signature (R the identity, S = 0) verifies for some message without any private key -- shown here -- so a
    protocol naming one would vouch for nothing.  Each is refused, with its sign bit set too."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from privclust.local.signing import _SMALL_ORDER

    trivial = bytes([1]) + bytes(63)
    public = dict(n_clusters=2, n_features=2, bounds=[-1, 1], seed=1)
    for encoding in _SMALL_ORDER:
        for sign in (0, 0x80):
            weak = bytes([*encoding[:31], encoding[31] | sign])
            with pytest.raises(ValueError, match="weak Ed25519 key"):
                Protocol.for_shuffle(1.0, 1e-6, 1000, shuffler_key=weak.hex(), **public)
            if int.from_bytes(encoding, "little") < 2**255 - 19:  # canonical: the library takes it as a key
                key = Ed25519PublicKey.from_public_bytes(weak)
                forged = 0
                for i in range(64):
                    try:
                        key.verify(trivial, b"batch %d" % i)
                        forged += 1
                    except Exception:
                        pass
                assert forged > 0, weak.hex()
    non_canonical = (2**255 - 19 + 5).to_bytes(32, "little").hex()  # y = p + 5: the point y = 5, spelt a second way
    with pytest.raises(ValueError, match="weak Ed25519 key"):
        Protocol.for_shuffle(1.0, 1e-6, 1000, shuffler_key=non_canonical, **public)
    honest = ShufflerKey.generate().public_hex
    assert Protocol.for_shuffle(1.0, 1e-6, 1000, shuffler_key=honest, **public).shuffler_key == honest
    for spelling in (honest.upper(), honest[:-2], honest + "00"):  # one spelling: the shuffler compares keys as text
        with pytest.raises(ValueError, match="64 lowercase hex digits"):
            Protocol.for_shuffle(1.0, 1e-6, 1000, shuffler_key=spelling, **public)


def test_a_shuffle_protocols_server_takes_one_signed_batch_whole_and_read_as_it_was_checked(tmp_path):
    """Reports amplify only among those shuffled together: a second shuffled batch is refused.  A file read as
    either kind is read as a shuffle protocol's server reads it (a device's batch refused), and a file replaced
    between its check and its reading -- by a batch the same key signed for another protocol -- is refused."""
    from privclust.local import ONE_SHUFFLED_BATCH, ReportFile

    key = ShufflerKey.generate()
    public = dict(n_clusters=2, n_features=2, bounds=[-1, 1], seed=4, shuffler_key=key.public_hex)
    protocol = Protocol.for_shuffle(1.0, 1e-6, 4000, **public)
    X, _ = blobs(2000)
    devices = Randomizer(protocol, np.random.default_rng(0))
    first, second = (Shuffler().shuffle_batch(protocol, devices.reports(X), key) for _ in range(2))
    aggregator = Aggregator(protocol)
    aggregator.add(memoryview(first))  # a batch however it is held
    with pytest.raises(ValueError, match="one shuffled batch a release"):
        aggregator.add(second)
    assert aggregator.received == 2000
    # the same rule for streams, whatever came first, and for an empty batch: batches are counted, not reports
    (tmp_path / "second.bin").write_bytes(second)
    with pytest.raises(ValueError, match=ONE_SHUFFLED_BATCH[:40]):
        aggregator.add_stream(ReportFile.open(protocol, tmp_path / "second.bin").chunks())
    streams = Aggregator(protocol)
    streams.add_stream(ReportFile.open(protocol, tmp_path / "second.bin").chunks())
    with pytest.raises(ValueError, match="one shuffled batch a release"):
        streams.add_stream(ReportFile.open(protocol, tmp_path / "second.bin").chunks())
    empty = Aggregator(protocol)
    empty.add(Shuffler().shuffle_batch(protocol, devices.reports(np.zeros((0, 2))), key))
    with pytest.raises(ValueError, match="one shuffled batch a release"):
        empty.add(first)
    assert empty.received == 0 and streams.received == 2000
    (tmp_path / "devices.bin").write_bytes(devices.reports(X))
    with pytest.raises(ValueError, match="did not pass the shuffler"):
        ReportFile.open(protocol, tmp_path / "devices.bin")
    other = Protocol.for_shuffle(1.0, 2e-6, 4000, **public)
    (tmp_path / "s.bin").write_bytes(first)
    opened = ReportFile.open(protocol, tmp_path / "s.bin")
    (tmp_path / "s.bin").write_bytes(Shuffler().shuffle_batch(other, Randomizer(other).reports(X), key))
    fresh = Aggregator(protocol)
    with pytest.raises(ValueError, match="changed while it was read"):
        fresh.add_stream(opened.chunks())
    assert fresh.received == 0
    unkeyed = Protocol.for_shuffle(1.0, 1e-6, 4000, **{**public, "shuffler_key": None})
    with pytest.raises(ValueError, match="names no shuffler's key, so no server"):  # refused before it shuffles
        Shuffler().shuffle_batch(unkeyed, Randomizer(unkeyed).reports(X[:5]), key)
    # and its server, given a batch marked shuffled by hand, cannot tell it from a relabelled one: refused
    records = decode_reports(unkeyed, Randomizer(unkeyed).reports(X[:5]), shuffled=False)
    marked = encode_reports(unkeyed, records).replace(b"PCLR", b"PCLS", 1) + bytes(64)
    (tmp_path / "marked.bin").write_bytes(marked)
    for read in (lambda: Aggregator(unkeyed).add(marked), lambda: ReportFile.open(unkeyed, tmp_path / "marked.bin")):
        with pytest.raises(ValueError, match="names no shuffler's key, so its server cannot tell"):
            read()
