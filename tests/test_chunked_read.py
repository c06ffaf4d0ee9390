"""CSV and Parquet tables read in chunks into a private, nameless memory map (issue 28, files larger than memory).

The chunked reader must give exactly the rows the whole file read at once gives, refuse exactly what it
refuses (whichever chunk holds the problem), hand the fit nothing before every chunk is checked, and leave
no file behind: its temporary file has mode 0600 and no name.
"""

import gzip
import os
import re
import stat

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privclust import io
from privclust._validation import check_data
from privclust.cli import app
from privclust.io import read_frame, read_table

CHUNKS = [1, 2, 3, 7, 1000]


def whole(path, columns=None, **options):
    """The rows as the whole file read at once gives them (the reader before chunks)."""
    return check_data(read_frame(path, columns, **options))


@pytest.fixture
def rows():
    rng = np.random.default_rng(5)
    return np.round(rng.normal(0, 10, (23, 4)), 3)


@pytest.fixture
def scratch(tmp_path):
    folder = tmp_path / "scratch"
    folder.mkdir()
    return folder


def tables(tmp_path, rows):
    """The same rows in every layout the reader takes."""
    frame = pd.DataFrame(rows, columns=["a", "b", "c", "d"])
    frame.insert(1, "id", [f"u{i}" for i in range(len(rows))])
    frame.to_csv(tmp_path / "h.csv", index=False)
    frame.to_csv(tmp_path / "s.tsv", index=False, sep="\t")
    with gzip.open(tmp_path / "g.csv.gz", "wt") as out:
        frame.to_csv(out, index=False)
    frame.to_parquet(tmp_path / "t.parquet")
    np.savetxt(tmp_path / "raw.csv", rows, delimiter=";", fmt="%g")
    return [
        (tmp_path / "h.csv", ["d", "a", "c"], {}),
        (tmp_path / "s.tsv", ["b", "c"], {}),
        (tmp_path / "g.csv.gz", ["a", "b", "c", "d"], {}),
        (tmp_path / "t.parquet", ["c", "a"], {}),
        (tmp_path / "raw.csv", None, {"sep": ";"}),
        (tmp_path / "raw.csv", ["x3", "x0"], {"sep": ";", "header": False}),
    ]


@pytest.mark.parametrize("chunk_rows", CHUNKS)
def test_chunks_give_the_rows_of_the_whole_file(tmp_path, rows, scratch, chunk_rows):
    for path, columns, options in tables(tmp_path, rows):
        table = read_table(path, columns, chunk_rows=chunk_rows, scratch=scratch, **options)
        expected = whole(path, columns, **options)
        assert isinstance(table.X, np.memmap) and table.X.dtype == np.float64
        np.testing.assert_array_equal(table.X, expected)
        assert table.columns == [str(c) for c in read_frame(path, columns, **options).columns]


@pytest.mark.parametrize("chunk_rows", [1, 4, 1000])
def test_dropna_drops_the_same_rows_chunk_by_chunk(tmp_path, scratch, chunk_rows):
    text = "a,b,c\n1,2.5,x\n3,,y\n4,NA,z\n6,7.25,\n8,9,w\n,1,q\n10,11,r\n"
    (tmp_path / "n.csv").write_text(text)
    table = read_table(tmp_path / "n.csv", ["a", "b"], dropna=True, chunk_rows=chunk_rows, scratch=scratch)
    np.testing.assert_array_equal(table.X, whole(tmp_path / "n.csv", ["a", "b"], dropna=True))
    np.testing.assert_array_equal(table.X, [[1, 2.5], [6, 7.25], [8, 9], [10, 11]])


def test_the_temporary_file_is_private_and_has_no_name(tmp_path, rows, scratch, monkeypatch):
    seen = []
    real = io.tempfile.TemporaryFile

    class Watched:
        """The reader's temporary file, its status taken when the reader lets go of it (the map holds it on)."""

        def __init__(self, *args, **kwargs):
            self.file = real(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self.file, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            seen.append(os.fstat(self.file.fileno()))
            self.file.close()

    monkeypatch.setattr(io.tempfile, "TemporaryFile", Watched)
    path, columns, _ = tables(tmp_path, rows)[0]
    table = read_table(path, columns, chunk_rows=5, scratch=scratch)
    (status,) = seen
    assert stat.S_IMODE(status.st_mode) == 0o600
    assert status.st_nlink == 0  # no name in any folder, so nothing to remove: never left behind
    assert status.st_size == table.X.nbytes
    assert list(scratch.iterdir()) == []
    np.testing.assert_array_equal(table.X, whole(path, columns))  # the map still reads the nameless file


def bad_last_rows(tmp_path):
    """Files whose only problem is in their last line, with what the refusal must say."""
    good = "a,b,c\n" + "".join(f"{i},{i / 2},{i % 3}\n" for i in range(20))
    cases = {
        "missing.csv": (good + "20,,1\n", r"column 'b' has missing values"),
        "text.csv": (good + "20,oops,1\n", r"non-numeric columns \['b'\]"),
        "infinite.csv": (good + "20,inf,1\n", r"NaN or infinite"),
        "malformed.csv": (good + "20,1,2,3,4\n", r"not a well-formed table"),
    }
    for name, (text, _) in cases.items():
        (tmp_path / name).write_text(text)
    return {tmp_path / name: message for name, (_, message) in cases.items()}


@pytest.mark.parametrize("chunk_rows", [1, 3, 1000])
def test_a_bad_last_line_is_refused_as_the_whole_file_refuses_it(tmp_path, scratch, chunk_rows):
    for path, message in bad_last_rows(tmp_path).items():
        with pytest.raises(ValueError, match=message) as chunked:
            read_table(path, ["a", "b"], chunk_rows=chunk_rows, scratch=scratch)
        with pytest.raises(ValueError) as at_once:
            check_data(read_frame(path, ["a", "b"]), what=str(path))
        assert str(chunked.value) == str(at_once.value)
        said = str(chunked.value).replace(str(path), "")
        assert not re.search(r"\d", said.replace("'b'", ""))  # no value, row or count
        assert list(scratch.iterdir()) == []


@pytest.mark.parametrize("chunk_rows", [1, 2, 1000])
def test_the_refusal_names_what_the_whole_file_would_name(tmp_path, scratch, chunk_rows):
    # text in c in the first chunk, missing values in a and b in later ones: the whole file names the missing
    # values first, in both columns
    (tmp_path / "m.csv").write_text("a,b,c\n1,2,x\n3,4,5\n6,,7\n,8,9\n10,11,12\n")
    with pytest.raises(ValueError, match=r"columns \['a', 'b'\] have missing values") as err:
        read_table(tmp_path / "m.csv", chunk_rows=chunk_rows, scratch=scratch)
    with pytest.raises(ValueError) as at_once:
        read_frame(tmp_path / "m.csv")
    assert str(err.value) == str(at_once.value)
    with pytest.raises(ValueError, match=r"non-numeric columns \['c'\]"):
        read_table(tmp_path / "m.csv", dropna=True, chunk_rows=chunk_rows, scratch=scratch)


@pytest.mark.parametrize("chunk_rows", [1, 2, 1000])
def test_true_false_in_one_chunk_and_numbers_in_another_is_refused_as_read_whole(tmp_path, scratch, chunk_rows):
    # pandas reads a chunk of only True/False as 0/1: whether the file is refused must not depend on where the
    # chunks fall (nor on one row's value), only on what the whole file holds
    (tmp_path / "b.csv").write_text("a,b\n1,True\n2,False\n3,4.5\n4,2\n")
    with pytest.raises(ValueError, match=r"non-numeric columns \['b'\]"):
        read_table(tmp_path / "b.csv", chunk_rows=chunk_rows, scratch=scratch)
    with pytest.raises(ValueError, match=r"non-numeric columns \['b'\]"):
        check_data(read_frame(tmp_path / "b.csv"), what="b.csv")
    (tmp_path / "t.csv").write_text("a,b\n1,True\n2,False\n3,True\n")  # True/False throughout: 0/1 both ways
    np.testing.assert_array_equal(
        read_table(tmp_path / "t.csv", chunk_rows=chunk_rows, scratch=scratch).X[:, 1], [1, 0, 1]
    )


def test_header_only_and_empty_parquet_are_tables_without_rows(tmp_path, scratch):
    (tmp_path / "h.csv").write_text("a,b\n")
    pd.DataFrame({"a": np.zeros(0), "b": np.zeros(0)}).to_parquet(tmp_path / "e.parquet")
    for path in (tmp_path / "h.csv", tmp_path / "e.parquet"):
        table = read_table(path, chunk_rows=2, scratch=scratch)
        assert table.X.shape == (0, 2) and table.columns == ["a", "b"]


def test_fit_refuses_a_bad_last_line_before_the_fit_starts(tmp_path, monkeypatch):
    import privclust.estimator as estimator

    monkeypatch.setattr(io, "SPILL_CHUNK_BYTES", 1)  # the smallest chunks the CLI reads (1,024 rows)
    monkeypatch.setattr(io.tempfile, "tempdir", str(tmp_path))
    started = []
    monkeypatch.setattr(estimator.KMeans, "fit", lambda self, *a, **k: started.append(1) or self)
    lines = "".join(f"{i % 7},{(i * 3) % 5}\n" for i in range(3000))
    (tmp_path / "d.csv").write_text("a,b\n" + lines + "1,\n")
    centers = tmp_path / "centers.csv"
    args = ["fit", str(tmp_path / "d.csv"), "--k", "2", "--bounds", "0,10", "--seed", "0", "-o", str(centers)]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 2 and "column 'b' has missing values" in out.output
    assert started == [] and not centers.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv"]  # no temporary file left


def test_a_fit_on_the_spilled_rows_is_the_fit_on_the_array(tmp_path, scratch):
    """The map is clustered chunk by chunk (as a .npy map is): the seeded centers are those of the array."""
    from privclust import KMeans, datasets

    X = datasets.load("s1").X
    np.savetxt(tmp_path / "s1.csv", X, delimiter=",", fmt="%.17g")
    spilled = read_table(tmp_path / "s1.csv", chunk_rows=333, scratch=scratch).X
    assert isinstance(spilled, np.memmap)
    for algorithm in ("auto", "fastlloyd"):
        fits = [KMeans(15, epsilon=1, delta=1e-6, bounds=(-1, 1), algorithm=algorithm, random_state=3) for _ in "ab"]
        np.testing.assert_array_equal(fits[0].fit(X).cluster_centers_, fits[1].fit(spilled).cluster_centers_)


def test_a_full_disk_is_a_clear_refusal_without_a_count(tmp_path, scratch, monkeypatch):
    import errno

    real = io.tempfile.TemporaryFile

    class Full:
        def __init__(self, *args, **kwargs):
            self.file = real(*args, **kwargs)
            self.room = 3  # writes that fit

        def write(self, data):
            self.room -= 1
            if self.room < 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self.file.write(data)

        def __getattr__(self, name):
            return getattr(self.file, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

    monkeypatch.setattr(io.tempfile, "TemporaryFile", Full)
    (tmp_path / "d.csv").write_text("a,b\n" + "".join(f"{i},{i}\n" for i in range(40)))
    with pytest.raises(ValueError, match="No space left on device.*set TMPDIR") as err:
        read_table(tmp_path / "d.csv", chunk_rows=5, scratch=scratch)
    said = str(err.value).replace(str(tmp_path), "").replace("8 bytes per number", "")
    assert not re.search(r"\d", said)  # no row count
    assert list(scratch.iterdir()) == []


# ----------------------------------------------------------------------------- --user-column: ids read alongside


def whole_with_ids(path, columns, id_column, **options):
    """The rows and ids as the whole file read at once gives them (the reader before chunks)."""
    frame = read_frame(path, [*columns, id_column], **options)
    ids = frame.pop(id_column).to_numpy()
    return check_data(frame, what=str(path)), ids


def user_tables(tmp_path):
    """One table with ids of every kind the whole file may give: integers, text, floats (a missing id makes the
    column float), and text that pandas reads as numbers in some chunks (the whole file reads it as text)."""
    rng = np.random.default_rng(9)
    n = 29
    frame = pd.DataFrame(np.round(rng.normal(0, 5, (n, 3)), 3), columns=["a", "b", "c"])
    frame["int_id"] = rng.integers(0, 6, n)
    frame["text_id"] = [f"u{i % 5}" for i in range(n)]
    frame["mixed_id"] = [f"u{i}" if i < 10 else f"{i % 4:03d}" for i in range(n)]  # "u3" ... then "002"
    frame["float_id"] = rng.integers(0, 4, n).astype(float)
    frame.loc[[4, 17], "float_id"] = np.nan
    frame.loc[[8], "b"] = np.nan
    frame.to_csv(tmp_path / "u.csv", index=False)
    frame.to_parquet(tmp_path / "u.parquet")
    return [tmp_path / "u.csv", tmp_path / "u.parquet"]


# the type each id column gets: from a CSV's text, typed once all are read; a Parquet file's column's own
ID_KINDS = {
    ".csv": {"int_id": "i", "text_id": "T", "mixed_id": "T", "float_id": "f"},
    ".parquet": {"int_id": "i", "text_id": "T", "mixed_id": "T", "float_id": "f"},
}


@pytest.mark.parametrize("chunk_rows", [1, 4, 7, 1000])
@pytest.mark.parametrize("id_column", ["int_id", "text_id", "mixed_id", "float_id"])
def test_the_ids_read_in_chunks_are_those_of_the_whole_file(tmp_path, scratch, chunk_rows, id_column):
    for path in user_tables(tmp_path):
        expected_rows, expected_ids = whole_with_ids(path, ["c", "a"], id_column, dropna=True)
        table, ids = io.read_table_and_ids(
            path, ["c", "a"], id_column, dropna=True, chunk_rows=chunk_rows, scratch=scratch
        )
        assert isinstance(table.X, np.memmap) and table.columns == ["c", "a"]  # spilled as read_table's rows are
        np.testing.assert_array_equal(table.X, expected_rows)
        assert ids.dtype.kind == ID_KINDS[path.suffix][id_column]
        assert ids.tolist() == expected_ids.tolist()  # "002" stays "002" among text ids


def written_ids(tmp_path, cells, name="ids.csv"):
    """A CSV of one feature and a user column holding ``cells`` (an empty cell is a missing id)."""
    path = tmp_path / name
    path.write_text("x,user\n" + "".join(f"{i % 7}.5,{cell}\n" for i, cell in enumerate(cells)))
    return path


BIG = 2**53  # the first integer a float64 cannot tell from its neighbour


@pytest.mark.parametrize("chunk_rows", [1, 2, 3, 1000])
def test_integer_ids_beyond_two_to_the_53_stay_distinct_users(tmp_path, scratch, chunk_rows):
    """A chunk holding a missing id (dropped) was read as floats, and its integers with it: 2**53 and
    2**53 + 1 became one user (so did 2**53 + 3 and 2**53 + 4)."""
    cells = [BIG, BIG + 1, "", BIG + 2, BIG + 3, BIG + 4, 5]
    path = written_ids(tmp_path, cells)
    _, ids = io.read_table_and_ids(path, ["x"], "user", dropna=True, chunk_rows=chunk_rows, scratch=scratch)
    assert ids.dtype == np.int64 and ids.tolist() == [c for c in cells if c != ""]
    assert len(np.unique(ids)) == 6
    # uint64 where int64 cannot hold them; beyond 64 bits, each integer's decimal text ("07" is "7")
    huge = [2**63 + 1, 2**63 + 2, "", 3]
    _, ids = io.read_table_and_ids(written_ids(tmp_path, huge), ["x"], "user", dropna=True, chunk_rows=chunk_rows)
    assert ids.dtype == np.uint64 and ids.tolist() == [2**63 + 1, 2**63 + 2, 3]
    giant = [2**64 + 1, f"0{2**64 + 1}", 2**64 + 2, -5]
    _, ids = io.read_table_and_ids(written_ids(tmp_path, giant), ["x"], "user", chunk_rows=chunk_rows)
    assert ids.tolist() == [str(2**64 + 1), str(2**64 + 1), str(2**64 + 2), "-5"]


def test_a_parquet_integer_column_with_a_null_keeps_its_integers(tmp_path, scratch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "ids.parquet"
    users = pa.array([BIG, BIG + 1, None, BIG + 3, BIG + 4], pa.int64())
    pq.write_table(pa.table({"x": [0.5, 1.5, 2.5, 3.5, 4.5], "user": users}), path)  # no pandas metadata
    for chunk_rows in (1, 2, 3, 1000):
        _, ids = io.read_table_and_ids(path, ["x"], "user", dropna=True, chunk_rows=chunk_rows, scratch=scratch)
        assert ids.dtype == np.int64 and ids.tolist() == [BIG, BIG + 1, BIG + 3, BIG + 4]


@pytest.mark.parametrize("chunk_rows", [1, 2, 1000])
def test_mixed_ids_get_one_type_whatever_the_chunks(tmp_path, scratch, chunk_rows):
    cases = [
        (["12", "012", "u7", "12"], ["12", "012", "u7", "12"]),  # text: each exactly as written
        (["3", "3.0", "3.5", "-1"], [3.0, 3.0, 3.5, -1.0]),  # numbers: 3 and 3.0 are one user
        (["7", " 07", "+7", "8"], [7, 7, 7, 8]),  # integers, as a number column reads them
        (["1_000", "1000", "2"], ["1_000", "1000", "2"]),  # Python's int reads 1_000; a table's reader does not
        (["u1", "", "2"], ["u1", "2"]),  # a missing id dropped: not a user
    ]
    for cells, expected in cases:
        path = written_ids(tmp_path, cells)
        _, ids = io.read_table_and_ids(path, ["x"], "user", dropna=True, chunk_rows=chunk_rows, scratch=scratch)
        assert ids.tolist() == expected, cells
        assert ids.dtype.kind == {str: "T", float: "f", int: "i"}[type(expected[0])]


def test_a_file_of_many_chunks_is_read_once(tmp_path, scratch, monkeypatch):
    """At the default chunk size, the one text id sits in the last chunk: the file is still read once (it was
    read again, whole, when its chunks disagreed), and every id keeps the text it was written as."""
    n = 3 * io._chunk_rows(None, ["x", "user"]) + 5
    users = np.arange(n).astype(str).astype(object)
    users[-1] = "u-last"
    pd.DataFrame({"x": np.arange(n) % 3 + 0.5, "user": users}).to_csv(tmp_path / "many.csv", index=False)
    chunks = []
    real = pd.read_csv

    def counted(*args, **kwargs):
        if "nrows" not in kwargs:  # the first line, read for the header, is not a read of the rows
            chunks.append(kwargs.get("chunksize"))
        return real(*args, **kwargs)

    monkeypatch.setattr(pd, "read_csv", counted)
    table, ids = io.read_table_and_ids(tmp_path / "many.csv", ["x"], "user", scratch=scratch)
    assert chunks == [io._chunk_rows(None, ["x", "user"])]  # one reader, in chunks
    assert table.X.shape == (n, 1) and ids.dtype.kind == "T"
    assert ids[0] == "0" and ids[-2] == str(n - 2) and ids[-1] == "u-last"


@pytest.mark.parametrize("chunk_rows", [1, 3, 1000])
def test_a_user_column_read_in_chunks_refuses_what_the_whole_file_refuses(tmp_path, scratch, chunk_rows):
    (csv,) = [p for p in user_tables(tmp_path) if p.suffix == ".csv"]
    (tmp_path / "text.csv").write_text("a,b,user\n1,2,u1\n3,x,u2\n4,5,u3\n")
    cases = [
        (csv, ["a", "c"], "float_id", r"column 'float_id' has missing values"),  # a missing id, in two chunks
        (csv, ["a", "b"], "int_id", r"column 'b' has missing values"),
        (tmp_path / "text.csv", ["a", "b"], "user", r"non-numeric columns \['b'\]"),
    ]
    for path, columns, id_column, message in cases:
        with pytest.raises(ValueError, match=message) as chunked:
            io.read_table_and_ids(path, columns, id_column, chunk_rows=chunk_rows, scratch=scratch)
        with pytest.raises(ValueError) as at_once:
            whole_with_ids(path, columns, id_column)
        assert str(chunked.value) == str(at_once.value)
    for path, message in bad_last_rows(tmp_path).items():  # the problem in the last line, whichever chunk holds it
        with pytest.raises(ValueError, match=message) as chunked:
            io.read_table_and_ids(path, ["a", "b"], "c", chunk_rows=chunk_rows, scratch=scratch)
        with pytest.raises(ValueError) as at_once:
            whole_with_ids(path, ["a", "b"], "c")
        assert str(chunked.value) == str(at_once.value)
    assert list(scratch.iterdir()) == []
