"""Hostile input, property-based: every case is a clear error or a documented result, never a crash."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from typer.testing import CliRunner

from privclust import KMeans
from privclust.cli import app

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

floats = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.sampled_from([1e308, -1e308, 0.0, 1.0])
arrays = hnp.arrays(
    dtype=st.sampled_from([np.float64, np.float32, np.int64, np.int8, np.bool_]),
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=12),
    elements=None,
)
bounds = st.one_of(
    st.tuples(floats, floats),
    st.lists(st.tuples(floats, floats), min_size=0, max_size=4),
    floats,
    st.just("data"),
    st.just(None),
    st.text(max_size=5),
)


def fit_outcome(**kwargs):
    """Fit, and say how it ended: 'ok' (checked) or 'error' (a clear ValueError/TypeError)."""
    X = kwargs.pop("X")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = KMeans(random_state=0, **kwargs).fit(X)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        assert message and "Traceback" not in message
        return "error"
    centers = model.cluster_centers_
    assert np.all(np.isfinite(centers))
    assert centers.shape == (kwargs["n_clusters"], np.asarray(X).shape[1])
    if kwargs.get("algorithm") == "nonprivate-lloyd" or isinstance(kwargs.get("bounds"), str):
        assert model.privacy_spent_.epsilon == float("inf")  # documented: the non-private baseline, data bounds
    else:
        assert model.privacy_spent_.epsilon <= kwargs["epsilon"] * (1 + 1e-9)
    return "ok"


@FAST
@given(X=arrays, k=st.integers(-1, 14), bounds=bounds)
def test_estimator_on_arbitrary_arrays_and_bounds(X, k, bounds):
    fit_outcome(X=X, n_clusters=k, epsilon=1.0, delta=1e-6, bounds=bounds)


@FAST
@given(
    X=hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=30), elements=floats),
    eps=floats,
    delta=floats,
    algorithm=st.sampled_from(["fastlloyd", "glloyd", "sulloyd", "nonprivate-lloyd", "lloyd", "kmeans", ""]),
)
def test_estimator_on_arbitrary_values_and_budgets(X, eps, delta, algorithm):
    fit_outcome(X=X, n_clusters=2, epsilon=eps, delta=delta, bounds=(-5, 5), algorithm=algorithm)


@FAST
@given(rows=st.integers(1, 40), copies=st.integers(1, 5), k=st.integers(1, 6))
def test_duplicates_single_rows_and_tiny_data(rows, copies, k):
    X = np.tile(np.linspace(-1, 1, rows)[:, None].repeat(2, axis=1), (copies, 1))
    outcome = fit_outcome(X=X, n_clusters=k, epsilon=0.5, delta=1e-6, bounds=(-1, 1))
    assert outcome == "ok"  # more centers than rows is fine: comparing k with n would reveal n


def test_huge_values_inside_huge_bounds():
    X = np.array([[1e300, -1e300], [-1e300, 1e300], [0.0, 0.0]])
    # The declared width overflows a double: refused, with the reason.
    with pytest.raises(ValueError, match="too wide"):
        KMeans(2, bounds=(-1.5e308, 1.5e308)).fit(X)
    assert np.all(np.isfinite(KMeans(2, bounds=(-1e301, 1e301), random_state=0).fit(X).cluster_centers_))


def test_complex_and_object_input_is_refused():
    with pytest.raises(ValueError, match="complex"):
        KMeans(2, bounds=(-1, 1)).fit(np.ones((5, 2)) * (1 + 1j))
    with pytest.raises(TypeError, match="must be .*a real number"):  # numpy's message names a type, no value
        KMeans(2, bounds=(-1, 1)).fit(np.array([[object(), 1.0]] * 5, dtype=object))


cells = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda v: f"{v:g}"),
    st.sampled_from(["", "nan", "inf", "-inf", "x", "1e999", '"1,2"', "NULL", " "]),
)


@settings(max_examples=40, deadline=None)
@given(table=st.lists(st.lists(cells, min_size=1, max_size=4), min_size=0, max_size=12), header=st.booleans())
def test_cli_on_arbitrary_csv(tmp_path_factory, table, header):
    folder = tmp_path_factory.mktemp("csv")
    path = folder / "data.csv"
    lines = ([",".join(f"c{i}" for i in range(len(table[0])))] if header and table else []) + [
        ",".join(r) for r in table
    ]
    path.write_text("\n".join(lines))
    out = CliRunner().invoke(app, ["fit", str(path), "--k", "2", "--bounds", "-10,10", "-o", str(folder / "c.csv")])
    assert out.exit_code in (0, 2), out.output
    assert out.exception is None or isinstance(out.exception, SystemExit), repr(out.exception)
    if out.exit_code == 2:
        assert "error:" in out.output
        assert not (folder / "c.csv").exists()


@pytest.mark.parametrize("content", [b"", b"\x00\x01\x02binary", b"a;b\n1;2\n3;4\n"])
def test_cli_on_broken_files(tmp_path, content):
    path = tmp_path / "f.csv"
    path.write_bytes(content)
    out = CliRunner().invoke(app, ["fit", str(path), "--k", "1", "--bounds", "0,5", "-o", str(tmp_path / "c.csv")])
    assert out.exit_code in (0, 2)
    assert out.exception is None or isinstance(out.exception, SystemExit), repr(out.exception)


def test_cli_on_a_folder_and_unknown_suffix(tmp_path):
    for target in (tmp_path, tmp_path / "x.xlsx"):
        if target.suffix:
            target.write_text("1,2\n")
        out = CliRunner().invoke(app, ["fit", str(target), "--k", "1", "--bounds", "0,5"])
        assert out.exit_code == 2 and "error:" in out.output


def test_centers_at_the_edge_of_a_box_near_the_float_limit_stay_finite():
    # Found by hypothesis: a center folded onto the upper wall of a box 9.9e307 wide overflowed.
    model = KMeans(4, bounds=(0.0, 9.94576128575763e307), random_state=0).fit(np.zeros((4, 1)))
    assert np.all(np.isfinite(model.cluster_centers_))


def test_absurd_iteration_counts_are_refused_before_anything_is_allocated():
    with pytest.raises(ValueError, match="max_iter must be an integer between 1 and 1000 "):
        KMeans(2, bounds=(-1, 1), algorithm="fastlloyd", max_iter=10**9).fit(np.zeros((10, 2)))
