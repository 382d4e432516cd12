"""The release folder's format (:func:`~labeldp.boundary.release_folder.privatize_table`), and its files read
back and checked (:func:`~labeldp.boundary.released.load_release` makes them released labels); nothing here
reads a private label.

``labels.parquet``
    one row per input row (per row kept, with a privacy unit), in input order: the id column (copied, or
    ``row``, the input position), ``released_label`` (a declared class), ``k`` (RR-with-prior) and, on
    request, ``channel_0 .. channel_{K-1}`` (the row's noise channel);
``release.json``
    the sidecar: classes, mechanism, epsilon, the prior, the noise channel (the K x K matrix where it is
    one), the noise source, the ledger's epsilon and entry, the privacy unit;
``ledger.json``
    the :class:`~labeldp.accounting.PrivacyLedger` (members: row positions in ``labels.parquet``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq
from dp_accounting import dp_event

from labeldp._version import __version__
from labeldp.accounting.ledger import PrivacyLedger
from labeldp.errors import SECOND_RELEASE, DataError, MissingFileError
from labeldp.mechanisms import (
    change_probability,
    keep_probability,
    randomized_response_probabilities,
    rr_with_prior_probabilities,
)
from labeldp.randomness import NoiseSource

FORMAT = "labeldp label release"
FORMAT_VERSION = 1
LABELS_FILE = "labels.parquet"
SIDECAR_FILE = "release.json"
LEDGER_FILE = "ledger.json"
#: the columns of ``labels.parquet`` besides the id column
RELEASED_COLUMN = "released_label"
K_COLUMN = "k"
#: the id column written when the table names none: each row's position in the input (from 0)
ROW_COLUMN = "row"
CHANNEL_PREFIX = "channel_"
#: the most classes whose K x K channel matrix the sidecar writes out (K^2 numbers)
MATRIX_CLASSES = 64
#: the mechanisms of a label column released once
RR = "randomized-response"
RR_WITH_PRIOR = "rr-with-prior"


class Drawn(Protocol):
    """What the sidecar says of a release's draws (:class:`~labeldp.boundary.column.Draws`): K, and
    RR-with-prior's spread of k (its ``range``), None for RR."""

    num_classes: int
    k_spread: Any


def noise_text(noise: NoiseSource) -> str:
    """Where a release's noise came from, in words; with an insecure seed, that the release is NOT PRIVATE."""
    if not noise.private:
        return (
            f"reproducible from insecure_noise_seed {noise.insecure_seed} (written beside the release): NOT "
            "PRIVATE, anyone who reads it can regenerate the noise and recover the true labels"
        )
    return noise.describe()


def _channel(draws: Drawn, epsilon: float, shared, channel_names: list[str]) -> dict[str, Any]:
    """The sidecar's noise channel: its K x K matrix where every row shares it."""
    num_classes, with_prior = draws.num_classes, draws.k_spread is not None
    channel: dict[str, Any] = {
        "meaning": "Pr[released label | true label]: matrix[y][z] for true class y and "
        "released class z; a row's channel L[y] = Pr[its released label | y]"
    }
    if not with_prior:  # K x K numbers are two: a label kept, and each other class
        channel["keep"] = keep_probability(epsilon, num_classes)
        channel["each_other"] = change_probability(epsilon, num_classes) / (num_classes - 1)
    if (not with_prior or shared is not None) and num_classes <= MATRIX_CLASSES:
        matrix = (
            randomized_response_probabilities(num_classes, epsilon)
            if not with_prior
            else rr_with_prior_probabilities(shared[None, :], epsilon)[0]
        )
        channel["matrix"] = matrix.tolist()
    elif with_prior:
        channel["per_row"] = (
            "depends on the row's prior and released label: "
            "labeldp.mechanisms.rr_with_prior_likelihood(released positions, prior rows, epsilon), "
            "or ReleasedLabels.channel(priors)"
        )
    if channel_names:
        channel["columns"] = channel_names
    return channel


def describe_release(
    ledger: PrivacyLedger,
    draws: Drawn,
    rows: int,
    described: str,
    label_column: str,
    id_column: str | None,
    class_values: pa.Array,
    epsilon: float,
    prior_columns,
    shared,
    channel_names: list[str],
    block_rows: int,
    noise: NoiseSource,
    privacy_unit: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``release.json`` of a release already drawn: what a reader needs to use it, and the ledger's figures.

    ``privacy_unit`` holds the unit's public facts (column, bound, seed, counts, per-unit and per-row
    epsilon), None without one. With an insecure seed the sidecar carries a NOT PRIVATE ``warning``.
    """
    with_prior = draws.k_spread is not None
    ledger_data = ledger.to_dict()
    channel = _channel(draws, epsilon, shared, channel_names)
    sidecar = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "labeldp_version": __version__,
        "rows": rows,
        "source": {"table": described, "label_column": label_column, "id_column": id_column},
        "classes": class_values.to_pylist(),
        "label_type": str(class_values.type),
        "mechanism": RR_WITH_PRIOR if with_prior else RR,
        "epsilon": epsilon,
        "prior": (
            {"columns": list(prior_columns)}
            if prior_columns is not None
            else {"shared": shared.tolist()}
            if shared is not None
            else None
        ),
        "privacy_unit": privacy_unit,
        "k_range": draws.k_spread.range if draws.k_spread else None,
        "channel": channel,
        "columns": {
            "id": id_column or ROW_COLUMN,
            "released_label": RELEASED_COLUMN,
            "k": K_COLUMN if with_prior else None,
            "channel": channel_names,
        },
        "files": {"labels": LABELS_FILE, "ledger": LEDGER_FILE},
        "batch_rows": block_rows,
        "ledger": {
            "file": LEDGER_FILE,
            "epsilon": ledger_data["epsilon"],
            "delta": ledger_data["delta"],
            "neighboring_relation": ledger_data["neighboring_relation"],
            "entries": [
                {key: entry[key] for key in ("tag", "description", "event", "num_members")}
                for entry in ledger_data["entries"]
            ],
        },
        "noise": {
            "description": noise_text(noise),
            "private": noise.private,
            "insecure_noise_seed": noise.insecure_seed,
            "secure": noise.secure,
        },
    }
    if not noise.private:
        sidecar["warning"] = (
            f"NOT PRIVATE: the noise can be regenerated from insecure_noise_seed "
            f"{noise.insecure_seed}; for tests only, never share this release"
        )
    return sidecar


def read_sidecar(path) -> dict[str, Any]:
    """The sidecar of the release folder ``path``.

    Raises :class:`~labeldp.errors.MissingFileError` if there is no ``release.json`` (not a release folder,
    or a release into it did not finish), :class:`~labeldp.errors.DataError` if it is damaged or of
    another format.
    """
    folder = Path(path)
    sidecar_path = folder / SIDECAR_FILE
    if not sidecar_path.is_file():
        if folder.parent.joinpath(f".{folder.name}.partial").exists():
            raise MissingFileError(f"{folder} is not a finished release: a release into it did not finish")
        raise MissingFileError(f"{sidecar_path} does not exist: {folder} is not a label release folder")
    try:
        sidecar = json.loads(sidecar_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataError(f"{sidecar_path} is damaged ({error})") from None
    if sidecar.get("format") != FORMAT or sidecar.get("format_version") != FORMAT_VERSION:
        raise DataError(f"{sidecar_path} is not a labeldp label release (format {FORMAT!r} version {FORMAT_VERSION})")
    return sidecar


def _check_stated_epsilon(folder: Path, epsilon: float, ledger: PrivacyLedger) -> None:
    """Refuse a sidecar whose epsilon (the channel's) is not the one its ledger recorded: a hand-edited
    ``release.json`` would otherwise train through a channel no draw made.
    """
    for entry in ledger.entries:
        event = entry.event
        if isinstance(event, dp_event.RandomizedResponseDpEvent):
            k, noise = event.num_buckets, event.noise_parameter
            recorded = -math.log(noise / (k - (k - 1) * noise))
            if not math.isclose(recorded, epsilon, rel_tol=1e-6):
                raise DataError(
                    f"{folder}: release.json states epsilon {epsilon:g} per label, its ledger recorded "
                    f"{recorded:g}; the folder was edited after it was written. Restore the folder as privatize "
                    f"wrote it, or release the labels again into a new folder {SECOND_RELEASE}"
                )


def read_release(path) -> tuple[dict[str, Any], PrivacyLedger, pa.Table]:
    """The release folder ``path``'s sidecar, ledger and ``labels.parquet``, read whole and checked against one
    another (as :func:`~labeldp.boundary.released.load_release` reads them).

    Raises :class:`~labeldp.errors.DataError` if the folder is damaged, edited, or its files disagree.
    """
    folder = Path(path)
    sidecar = read_sidecar(folder)
    ledger = PrivacyLedger.load(folder / sidecar["files"]["ledger"])
    _check_stated_epsilon(folder, float(sidecar["epsilon"]), ledger)
    try:
        table = pq.read_table(folder / sidecar["files"]["labels"])
    except (pa.ArrowInvalid, OSError) as error:
        raise DataError(f"{folder / sidecar['files']['labels']} is damaged or truncated ({error})") from None
    rows = sidecar["rows"]
    if table.num_rows != rows or ledger.dataset_size != rows:
        raise DataError(
            f"{folder}: {table.num_rows} released labels and a ledger of {ledger.dataset_size} rows, "
            f"the sidecar says {rows}"
        )
    return sidecar, ledger, table


__all__ = [
    "CHANNEL_PREFIX",
    "FORMAT",
    "FORMAT_VERSION",
    "K_COLUMN",
    "LABELS_FILE",
    "LEDGER_FILE",
    "RELEASED_COLUMN",
    "RR",
    "RR_WITH_PRIOR",
    "SIDECAR_FILE",
    "read_release",
    "read_sidecar",
    "describe_release",
]
