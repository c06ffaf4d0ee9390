"""Reading tables (schema first, then the chosen columns) and writing files that are never half-written."""

import gzip
import json
import os
import re

import numpy as np
import pandas as pd
import pytest

from privclust import io
from privclust.io import StagedFiles, read_schema, read_table, select_columns, write_points

ROWS = np.array([[1.5, 10.0, 100.0], [2.5, 20.0, 200.0], [3.5, 30.0, 300.0], [4.5, 40.0, 300.0]])


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".privclust-"))


@pytest.fixture
def files(tmp_path):
    frame = pd.DataFrame(ROWS, columns=["a", "b", "c"])
    frame.insert(0, "id", ["u1", "u2", "u3", "u4"])
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet")
    np.savetxt(tmp_path / "raw.csv", ROWS, delimiter=",")
    np.save(tmp_path / "t.npy", ROWS)
    return tmp_path


def test_schema_is_read_without_the_rows(files):
    assert read_schema(files / "t.csv") == ["id", "a", "b", "c"]
    assert read_schema(files / "t.parquet") == ["id", "a", "b", "c"]
    assert read_schema(files / "raw.csv") == ["x0", "x1", "x2"]  # no header: named by position
    assert read_schema(files / "t.npy") == ["x0", "x1", "x2"]


def test_select_columns_by_name_or_position():
    names = ["id", "a", "2", "c"]
    assert select_columns(names, None) == [0, 1, 2, 3]
    assert select_columns(names, ["c", "a"]) == [3, 1]
    assert select_columns(names, ["1", "3"]) == [1, 3]
    assert select_columns(names, ["2"]) == [2]  # a name wins over a position
    with pytest.raises(ValueError, match=r"no column 'z'.*\['id', 'a', '2', 'c'\]"):
        select_columns(names, ["z"])
    with pytest.raises(ValueError, match="no column '4'"):
        select_columns(names, ["4"])
    with pytest.raises(ValueError, match="more than once"):
        select_columns(names, ["a", "1"])


@pytest.mark.parametrize("name", ["t.csv", "t.parquet"])
def test_the_chosen_columns_in_the_chosen_order(files, name):
    table = read_table(files / name, ["c", "a"])
    assert table.columns == ["c", "a"]
    np.testing.assert_array_equal(table.X, ROWS[:, [2, 0]])
    with pytest.raises(ValueError, match=r"non-numeric columns \['id'\]"):
        read_table(files / name)


def test_headerless_csv_and_npy_columns(files):
    np.testing.assert_array_equal(read_table(files / "raw.csv", ["x2", "0"]).X, ROWS[:, [2, 0]])
    spaced = read_table(files / "t.npy", ["0", "2"])
    assert isinstance(spaced.X, np.memmap) and spaced.columns == ["x0", "x2"]  # evenly spaced: still a map
    np.testing.assert_array_equal(spaced.X, ROWS[:, [0, 2]])
    np.testing.assert_array_equal(read_table(files / "t.npy", ["2", "0"]).X, ROWS[:, [2, 0]])


def test_a_header_only_csv_is_a_table_with_no_rows(tmp_path):
    (tmp_path / "h.csv").write_text("a,b,c\n")
    table = read_table(tmp_path / "h.csv")
    assert table.X.shape == (0, 3) and table.X.dtype == np.float64 and table.columns == ["a", "b", "c"]


def _no_private_detail(message: str) -> None:
    # Fixed descriptions only: no quoted bytes, no line number or row count.
    assert not re.search(r"line \d|row \d|\b\d+ rows|b'", message), message


def test_broken_files_get_a_fixed_description(tmp_path):
    text = "a,b\n" + "".join(f"{i},{i * 7}\n" for i in range(5000))
    packed = gzip.compress(text.encode())
    cases = {
        "cut.csv.gz": (packed[: len(packed) // 2], "truncated or corrupt"),
        "plain.csv.gz": (text.encode(), "not gzip-compressed"),
        "latin.csv": ("a,b\n1,caf\xe9\n".encode("latin-1"), "UTF-8"),
        "ragged.csv": (b"a,b\n1,2\n3,4,5\n6,7\n", "not a well-formed table"),
        "cut.npy": (b"", "not a complete .npy"),
        "junk.parquet": (b"PAR1 this is not parquet", "not a readable Parquet"),
        "empty.csv": (b"", "is empty"),
    }
    np.save(tmp_path / "whole.npy", np.zeros((100, 3)))
    cases["cut.npy"] = ((tmp_path / "whole.npy").read_bytes()[:500], "not a complete .npy")
    for name, (content, message) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=message) as err:
            read_table(tmp_path / name)
        _no_private_detail(str(err.value))


def test_object_npy_and_unknown_suffix(tmp_path):
    np.save(tmp_path / "o.npy", np.array([[1, "a"]], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="Python objects"):
        read_table(tmp_path / "o.npy")
    (tmp_path / "x.xlsx").write_text("1,2\n")
    with pytest.raises(ValueError, match="unsupported file type"):
        read_table(tmp_path / "x.xlsx")


def test_write_points_keeps_names_and_writes_npy_under_its_own_name(tmp_path):
    write_points(tmp_path / "c.csv", ROWS[:2, :2], header=["height, cm", 'say "hi"'])
    assert (tmp_path / "c.csv").read_text().splitlines()[0] == '"height, cm","say ""hi"""'
    assert pd.read_csv(tmp_path / "c.csv").columns.tolist() == ["height, cm", 'say "hi"']
    write_points(tmp_path / "c.npy", ROWS)
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), ROWS)
    write_points(tmp_path / "l.csv", np.array([3, 0, 12]), header=["label"])
    assert (tmp_path / "l.csv").read_text() == "label\n3\n0\n12\n"
    assert leftovers(tmp_path) == []


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "labels.csv"
    target.write_text("label\nold\n")
    os.chmod(target, 0o640)
    monkeypatch.setattr(io, "LABELS_CHUNK", 10)
    chunks = []

    def interrupted_on_the_third_chunk(values):
        chunks.append(values)
        if len(chunks) == 3:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the labels
        return "".join(f"{v}\n" for v in values.tolist())

    monkeypatch.setattr(io, "_labels_text", interrupted_on_the_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        write_points(target, np.arange(100), header=["label"])
    assert target.read_text() == "label\nold\n" and leftovers(tmp_path) == []
    monkeypatch.undo()
    write_points(target, np.arange(100), header=["label"])
    assert target.read_text().splitlines()[-1] == "99" and (target.stat().st_mode & 0o777) == 0o640


def test_staged_files_are_all_renamed_or_none(tmp_path):
    (tmp_path / "a.csv").write_text("old a")
    with StagedFiles() as staged:
        first, second = staged.reserve(tmp_path / "a.csv"), staged.reserve(tmp_path / "b.png", formats=["png"])
        assert first.name.endswith(".a.csv") and second.suffix == ".png"
        first.write_text("new a")
        second.write_text("new b")
    assert (tmp_path / "a.csv").read_text() == "old a" and not (tmp_path / "b.png").exists()
    assert leftovers(tmp_path) == []
    with StagedFiles() as staged:
        staged.reserve(tmp_path / "a.csv").write_text("new a")
        staged.reserve(tmp_path / "b.png").write_text("new b")
        staged.commit()
    assert (tmp_path / "a.csv").read_text() == "new a" and (tmp_path / "b.png").read_text() == "new b"
    assert leftovers(tmp_path) == []


def test_staged_files_refuse_bad_targets_before_anything_is_written(tmp_path):
    with StagedFiles() as staged:
        with pytest.raises(ValueError, match="does not exist"):
            staged.reserve(tmp_path / "missing" / "c.csv", "--output")
        with pytest.raises(ValueError, match="is a folder"):
            staged.reserve(tmp_path, "--output")
        with pytest.raises(ValueError, match=r"cannot write \.xyz; use one of \.png"):
            staged.reserve(tmp_path / "p.xyz", "--plot", formats=["png", "pdf"])
        staged.reserve(tmp_path / "c.csv", "--output")
        with pytest.raises(ValueError, match="already the name of another output"):
            staged.reserve(tmp_path / "." / "c.csv", "--labels")


# ---------------------------------------------------------------------------- headers, separators, missing values
# A header is never guessed from values: a data row read as a header is lost from the fit and
# published as the column names of centers.csv.


def _fit(*args):
    from typer.testing import CliRunner

    from privclust.cli import app

    return CliRunner().invoke(app, ["fit", *map(str, args)])


REPEATED = np.array([[12.5, 12.5, 3.0], [1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])


def test_a_headerless_csv_whose_first_row_repeats_a_value_is_read_in_full(tmp_path):
    np.savetxt(tmp_path / "r.csv", REPEATED, delimiter=",", fmt="%g")
    table = read_table(tmp_path / "r.csv")
    assert table.columns == ["x0", "x1", "x2"]
    np.testing.assert_array_equal(table.X, REPEATED)


def test_fit_publishes_no_data_row_as_the_centers_header(tmp_path):
    np.savetxt(tmp_path / "r.csv", REPEATED, delimiter=",", fmt="%g")
    centers = tmp_path / "c.csv"
    out = _fit(tmp_path / "r.csv", "--k", 2, "--bounds", "0,20", "--seed", 0, "--json", "-o", centers)
    assert out.exit_code == 0, out.output
    assert centers.read_text().splitlines()[0] == "x0,x1,x2"
    assert "(4 x 3)" in json.loads(out.stdout)["not_private"]["data"]  # every row was read


def test_a_first_row_of_numbers_or_missing_values_is_data(tmp_path):
    # Whitespace, exponents, nan, inf, empty cells and NA markers do not make a row a header.
    for line in (" 3 ,1e5,-2", "nan,1,2", ",1,2", "NA,1,2", "inf,null,7", "1,,", ",,"):
        (tmp_path / "d.csv").write_text(line + "\n4,5,6\n")
        assert read_schema(tmp_path / "d.csv") == ["x0", "x1", "x2"], line
        frame = io.read_frame(tmp_path / "d.csv", dropna=True)
        assert frame.shape[1] == 3, line
    (tmp_path / "h.csv").write_text("a, b ,c\n1,2,3\n")
    assert read_schema(tmp_path / "h.csv") == ["a", " b ", "c"]
    (tmp_path / "h.csv").write_text(",a,b\n1,2,3\n")  # pandas' index column: a header
    assert read_schema(tmp_path / "h.csv")[1:] == ["a", "b"]


def test_a_first_row_of_names_and_numbers_is_refused_without_header_or_no_header(tmp_path):
    (tmp_path / "m.csv").write_text("u17,12.5,3.25\nu18,1,2\n")
    for call in (read_schema, read_table, io.read_frame):
        with pytest.raises(ValueError, match="--header or --no-header") as err:
            call(tmp_path / "m.csv")
        assert "u17" not in str(err.value) and "12.5" not in str(err.value) and "3.25" not in str(err.value)
    assert read_schema(tmp_path / "m.csv", header=False) == ["x0", "x1", "x2"]
    np.testing.assert_array_equal(read_table(tmp_path / "m.csv", ["1", "2"], header=False).X, [[12.5, 3.25], [1, 2]])
    assert read_schema(tmp_path / "m.csv", header=True) == ["u17", "12.5", "3.25"]


def test_header_and_no_header_override(tmp_path):
    np.savetxt(tmp_path / "r.csv", REPEATED, delimiter=",", fmt="%g")
    forced = read_table(tmp_path / "r.csv", header=True)
    assert len(forced.columns) == 3 and forced.X.shape == (3, 3)
    (tmp_path / "h.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="non-numeric columns"):
        read_table(tmp_path / "h.csv", header=False)
    out = _fit(tmp_path / "r.csv", "--header", "--k", 2, "--bounds", "0,20", "--seed", 0, "-o", tmp_path / "c.csv")
    assert out.exit_code == 0, out.output
    (tmp_path / "m.csv").write_text("u17,12.5,3.25\nu18,1,2\nu19,3,4\n")
    centers = tmp_path / "m-centers.csv"
    out = _fit(tmp_path / "m.csv", "--no-header", "-c", "1,2", "--k", 2, "--bounds", "0,20", "--seed", 0, "-o", centers)
    assert out.exit_code == 0, out.output
    assert centers.read_text().splitlines()[0] == "x1,x2"
    out = _fit(tmp_path / "m.csv", "-c", "1,2", "--k", 2, "--bounds", "0,20", "-o", centers)
    assert out.exit_code == 2 and "--no-header" in out.output and "12.5" not in out.output


def test_separator_option_and_tsv(tmp_path):
    (tmp_path / "s.csv").write_text("a;b\n1,5;2\n3;4\n")
    assert read_schema(tmp_path / "s.csv", sep=";") == ["a", "b"]
    (tmp_path / "s.csv").write_text("a;b\n1.5;2\n3;4\n")
    np.testing.assert_array_equal(read_table(tmp_path / "s.csv", sep=";").X, [[1.5, 2], [3, 4]])
    (tmp_path / "t.tsv").write_text("7\t7\n1\t2\n")  # tab by the suffix; a repeated value is still data
    np.testing.assert_array_equal(read_table(tmp_path / "t.tsv").X, [[7, 7], [1, 2]])
    np.testing.assert_array_equal(read_table(tmp_path / "t.tsv", sep="\\t").X, [[7, 7], [1, 2]])
    for bad in ("", ";;", "1", ".", '"'):
        with pytest.raises(ValueError, match="--sep"):
            read_table(tmp_path / "s.csv", sep=bad)
    centers = tmp_path / "c.csv"
    out = _fit(tmp_path / "s.csv", "--sep", ";", "--k", 2, "--bounds", "0,5", "--seed", 0, "-o", centers)
    assert out.exit_code == 0, out.output
    assert centers.read_text().splitlines()[0] == "a,b"
    out = _fit(tmp_path / "s.csv", "--sep", "ab", "--k", 2, "--bounds", "0,5", "-o", centers)
    assert out.exit_code == 2 and "--sep" in out.output


def test_missing_values_are_refused_naming_the_column_or_dropped_with_dropna(tmp_path):
    (tmp_path / "n.csv").write_text("a,b,c\n1,2.5,x\n3,,y\n4,NA,z\n6,7.25,\n")
    with pytest.raises(ValueError, match=r"column 'b'.*--dropna") as err:
        read_table(tmp_path / "n.csv", ["a", "b"])
    message = str(err.value).replace(str(tmp_path), "")
    assert not re.search(r"\d", message) and "row " not in message  # no value, row number or count
    dropped = read_table(tmp_path / "n.csv", ["a", "b"], dropna=True)
    np.testing.assert_array_equal(dropped.X, [[1, 2.5], [6, 7.25]])
    np.testing.assert_array_equal(read_table(tmp_path / "n.csv", ["a"]).X, [[1], [3], [4], [6]])  # c not chosen
    centers = tmp_path / "centers.csv"
    args = (tmp_path / "n.csv", "-c", "a,b", "--k", 2, "--bounds", "0,10", "--seed", 0, "-o", centers)
    out = _fit(*args)
    assert out.exit_code == 2 and "column 'b'" in out.output and not centers.exists()
    out = _fit(*args, "--dropna", "--json")
    assert out.exit_code == 0, out.output
    assert "(2 x 2)" in json.loads(out.stdout)["not_private"]["data"]


def test_local_report_reads_files_as_fit_does(tmp_path):
    from typer.testing import CliRunner

    from privclust.cli import app

    def local(*args):
        return CliRunner().invoke(app, ["local", *map(str, args)])

    protocol = tmp_path / "protocol.json"
    out = local("init", "-k", 2, "--features", 3, "--bounds", "0,20", "-e", 1, "--users", 10, "-o", protocol)
    assert out.exit_code == 0, out.output
    np.savetxt(tmp_path / "r.csv", REPEATED, delimiter=",", fmt="%g")
    out = local("report", tmp_path / "r.csv", "-p", protocol, "-o", tmp_path / "r.bin")
    assert out.exit_code == 0 and "4 reports" in out.output, out.output
    (tmp_path / "s.csv").write_text("a;b;c\n1;2;3\n4;;6\n")
    out = local("report", tmp_path / "s.csv", "--sep", ";", "-p", protocol, "-o", tmp_path / "s.bin")
    assert out.exit_code == 2 and "column 'b'" in out.output and not (tmp_path / "s.bin").exists()
    out = local("report", tmp_path / "s.csv", "--sep", ";", "--dropna", "-p", protocol, "-o", tmp_path / "s.bin")
    assert out.exit_code == 0 and "1 reports" in out.output, out.output
    out = local("report", tmp_path / "r.csv", "--header", "-p", protocol, "-o", tmp_path / "h.bin")
    assert out.exit_code == 0 and "3 reports" in out.output, out.output


def test_stream_events_are_read_by_the_same_reader(tmp_path):
    from privclust.cli.stream import read_events

    (tmp_path / "e.csv").write_text("1,insert,0.5,0.5\n2,insert,0.25,\n2,delete,0.5,0.5\n")
    with pytest.raises(ValueError, match="--no-header"):
        read_events(tmp_path / "e.csv")
    with pytest.raises(ValueError, match="column 'x3'"):
        read_events(tmp_path / "e.csv", header=False)
    steps, signs, rows = read_events(tmp_path / "e.csv", header=False, dropna=True)
    assert steps.tolist() == [1, 2] and signs.tolist() == [1, -1]
    np.testing.assert_array_equal(rows, [[0.5, 0.5], [0.5, 0.5]])
    (tmp_path / "e.tsv").write_text("step\top\tx\n1\tinsert\t0.5\n")
    assert read_events(tmp_path / "e.tsv")[0].tolist() == [1]
