"""A finished run as a predictor: its model with the preprocessing of its inputs, in one call.

Predictions are post-processing of the run's releases (the model) and of new, public inputs: they cost no
privacy."""

from __future__ import annotations

from pathlib import Path

import joblib
import numpy as np
import pandas as pd
from torch import nn

from labeldp.data.table import read_table
from labeldp.errors import ConfigError, DataError
from labeldp.files import write_atomic
from labeldp.runs.run import load_run_model
from labeldp.runs.rundir import RunDirectory
from labeldp.tables.table_files import open_source
from labeldp.training.predictions import predict_proba


class Predictor:
    """The model of a finished run and, for a table, its fitted preprocessing; :func:`load_predictor` makes
    one.

    Parameters
    ----------
    class_names : list of str
        The names of the model's K outputs, in order (the classes, or the grid's points).
    preprocessor : object, optional
        The fitted preprocessing of a table's raw rows (its ``transform``); None for inputs given encoded.
    label_values : numpy.ndarray or None, optional
        The public grid of a regression's labels; None for classes.
    """

    def __init__(
        self, model: nn.Module, class_names: list[str], preprocessor=None, label_values: np.ndarray | None = None
    ):
        self.model, self.class_names, self.preprocessor = model, class_names, preprocessor
        self.label_values = label_values  # the public grid of a regression's labels, else None

    def inputs(self, rows: pd.DataFrame | np.ndarray) -> np.ndarray:
        """The model's inputs: a table's raw rows encoded as in training, or inputs already encoded.

        Raises
        ------
        labeldp.errors.ConfigError
            If ``rows`` is a table but the run was not trained on one.
        """
        if isinstance(rows, pd.DataFrame):
            if self.preprocessor is None:
                raise ConfigError("this run was not trained on a table: give its inputs as an array")
            return self.preprocessor.transform(rows)
        return np.asarray(rows, dtype=np.float32)

    def predict_proba(self, rows: pd.DataFrame | np.ndarray) -> np.ndarray:
        """(n, K) class probabilities of ``rows`` (as :meth:`inputs` takes them), in the order of ``class_names``."""
        return predict_proba(self.model, self.inputs(rows))

    def predict(self, rows: pd.DataFrame | np.ndarray) -> np.ndarray:
        """The most probable class of each row, by name; for numeric labels the expected value over the grid
        (what the run's test RMSE measures)."""
        probabilities = self.predict_proba(rows)
        if self.label_values is not None:
            return probabilities @ self.label_values
        return np.asarray(self.class_names, dtype=object)[probabilities.argmax(axis=1)]


def load_predictor(run_dir: str | Path) -> Predictor:
    """The :class:`Predictor` of the finished run in ``run_dir``; class names ``"0"`` to ``"K-1"`` where it
    has none.

    Raises
    ------
    labeldp.errors.MissingFileError
        If the run has not finished (no ``model.pt``).
    """
    out = RunDirectory(run_dir)
    model = load_run_model(run_dir)
    facts = out.read_data_facts()
    assert facts is not None  # load_run_model refuses a folder without data.json
    preprocessor = joblib.load(out.preprocessor_path) if out.preprocessor_path.exists() else None
    names = facts["class_names"] or [str(k) for k in range(facts["num_classes"])]
    grid = facts.get("label_values")
    return Predictor(model, names, preprocessor, None if grid is None else np.asarray(grid, dtype=np.float64))


def predict_table(run_dir: str | Path, table: str | Path, out: str | Path, id_column: str | None = None) -> Path:
    """Score the rows of ``table`` with the run's model and write ``out`` (CSV or Parquet by its suffix): per
    row its ``id_column`` (if given), each class's probability ``p_<class>`` and the predicted class, or for
    numeric labels the predicted value alone.

    A label column in ``table`` is never read. The errors speak of ``labeldp predict``'s options.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``out`` has another suffix, or the run was not trained on a table.
    labeldp.errors.DataError
        If ``id_column`` is not in ``table``, or ``table`` cannot be read.
    """
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise ConfigError(f"--out must end in .csv or .parquet, got {out.name}")
    predictor = load_predictor(run_dir)
    if predictor.preprocessor is None:
        dataset = (RunDirectory(run_dir).read_config() or {}).get("dataset", "a dataset that is no table")
        raise ConfigError(
            f"`labeldp predict` scores the rows of a table with the model of a table's run (--dataset csv); "
            f"{run_dir} was trained on {dataset}, whose inputs are not a table's rows. From Python, "
            f"labeldp.runs.predictor.load_predictor({str(run_dir)!r}).predict(inputs) scores its inputs"
        )
    names = open_source(table, [])[0][0].schema.names
    if id_column is not None and id_column not in names:
        raise DataError(f"--id-column {id_column!r} is not a column of {table}")
    # the public columns only: a label column in the table is never read
    rows = read_table(table, [c for c in names if c in {*predictor.preprocessor.features, id_column}])
    if predictor.label_values is not None:
        scores = pd.DataFrame({"predicted": predictor.predict(rows)})
    else:
        probabilities = predictor.predict_proba(rows)
        scores = pd.DataFrame(probabilities, columns=[f"p_{name}" for name in predictor.class_names])
        scores["predicted"] = np.asarray(predictor.class_names, dtype=object)[probabilities.argmax(axis=1)]
    if id_column is not None:
        scores.insert(0, id_column, rows[id_column].to_numpy())
    write_atomic(
        out, lambda tmp: scores.to_parquet(tmp, index=False) if suffix != ".csv" else scores.to_csv(tmp, index=False)
    )
    return out
