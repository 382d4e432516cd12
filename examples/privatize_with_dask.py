"""Release a label column with Dask, partition by partition, and account for it with one ledger.

labeldp's mechanisms are numpy functions over arrays, so a Dask (or Spark) job can apply them to each
partition where it lies; the driver records the release once, over every row, with
:func:`labeldp.boundary.table_ledger`. This script is the whole route, runnable:

    python examples/privatize_with_dask.py --table data/ --label-column y --id-column id \\
        --classes 0 1 2 --epsilon 1 [--prior-columns p0 p1 p2] --out release/

It writes ``release/labels/`` (Parquet files: id, released_label, and k with a prior) and
``release/ledger.json``. What a cluster job must get right, and how this script does it:

1. **The label domain is declared**, and every label is checked against it before anything is drawn
   (a pass that reveals only whether some label is outside it).
2. **Each partition draws from its own fresh generator** (``NoiseSource().generator(...)`` on the
   worker: OS entropy, never a seed; ``--secure-rng`` for ChaCha20).
3. **The draws are computed once**: the graph that draws them is the graph that writes them. A lazy
   frame of released labels computed twice (``.compute()`` and then ``.to_parquet()``, or a
   recomputed partition after a worker failure) draws twice, which is a second release of the same
   labels. Write once, then read the written files; ``persist`` does not protect against a
   recomputation after a lost worker.
4. **Release once**: the output folder must not exist; the partitions are written under a
   temporary name and renamed when all are there.
5. **The ledger is built on the driver before anything is drawn**, over all n rows, from public data
   only: the rows' ids and, for RR-with-prior, each row's k (a function of its prior alone,
   ``prior_top_k``; its event is RR over the smallest k >= 2 of any row). ``table_ledger`` refuses a
   duplicated id: a stray copy of a part file, or the same table in a second format, in the folder
   would release those rows twice under a ledger showing one release. The driver holds the ids and k
   (their own size and 8 bytes a row).
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import dask.dataframe as dd
import numpy as np
import pandas as pd

from labeldp.boundary import table_ledger
from labeldp.errors import DataError, ReleaseExistsError
from labeldp.mechanisms import prior_top_k, randomized_response, rr_with_prior
from labeldp.randomness import NoiseSource


def release_partition(
    frame: pd.DataFrame,
    *,
    label_column: str,
    id_column: str,
    classes: list,
    epsilon: float,
    prior_columns: list[str] | None,
    noise: NoiseSource,
    partition_info=None,
) -> pd.DataFrame:
    """One partition's release: plain numpy on its arrays. Labels are matched to the classes as
    their pandas values (use the column's own type for the classes)."""
    positions = pd.Categorical(frame[label_column], categories=classes).codes.astype(np.int64)
    if (positions < 0).any():  # checked before the job, again here (nothing of this partition is drawn)
        raise DataError("labels outside the declared classes")
    number = partition_info["number"] if partition_info else 0
    generator = noise.generator("table-release", number)  # fresh entropy per partition (seeded only for tests)
    out = pd.DataFrame({id_column: frame[id_column].to_numpy()})
    if prior_columns:
        priors = frame[prior_columns].to_numpy(np.float64)
        released, k = rr_with_prior(positions, priors, epsilon, generator)
    else:
        released, k = randomized_response(positions, len(classes), epsilon, generator), None
    out["released_label"] = pd.array(np.asarray(classes, dtype=object)[released], dtype=frame[label_column].dtype)
    if k is not None:
        out["k"] = k.astype(np.int8)
    return out


def partition_k(priors: pd.DataFrame, *, epsilon: float) -> pd.Series:
    """RR-with-prior's k for each row of one partition: a function of its prior alone, the k that
    ``rr_with_prior`` draws with."""
    return pd.Series(prior_top_k(priors.to_numpy(np.float64), epsilon)[0], index=priors.index)


def privatize_with_dask(
    table: str,
    out: str,
    *,
    label_column: str,
    id_column: str,
    classes: list,
    epsilon: float,
    prior_columns: list[str] | None = None,
    noise: NoiseSource = NoiseSource(),
) -> dict:
    out_path = Path(out)
    if out_path.exists():
        raise ReleaseExistsError(f"{out_path} exists: the labels would be released a second time")
    columns = [id_column, label_column, *(prior_columns or [])]
    frame = dd.read_parquet(table, columns=columns)
    label_type = frame[label_column].dtype
    classes = pd.Series(classes).astype(label_type).tolist()  # the classes in the column's type
    labels = frame[label_column]
    if not labels.isin(classes).all().compute():  # a missing label is not in the classes either
        raise DataError("labels outside the declared classes (or missing); nothing was released")
    ids = frame[id_column].compute().to_numpy()  # public
    k = (
        frame[prior_columns]
        .map_partitions(partition_k, epsilon=epsilon, meta=pd.Series(dtype=np.int64))
        .compute()
        .to_numpy()
        if prior_columns
        else None
    )
    ledger = table_ledger(ids, epsilon, len(classes), k)  # refuses a duplicated id, before any draw

    meta = pd.DataFrame(
        {id_column: pd.Series(dtype=frame[id_column].dtype), "released_label": pd.Series(dtype=label_type)}
    )
    if prior_columns:
        meta["k"] = pd.Series(dtype=np.int8)
    released = frame.map_partitions(
        release_partition,
        label_column=label_column,
        id_column=id_column,
        classes=classes,
        epsilon=epsilon,
        prior_columns=prior_columns,
        noise=noise,
        meta=meta,
    )
    partial = out_path.parent / f".{out_path.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    mode = partial.stat().st_mode & 0o777
    partial.chmod(0o700)  # an unfinished release is its owner's only
    try:
        released.to_parquet(partial / "labels", write_index=False)  # the one computation that draws
        ledger.save(partial / "ledger.json")
        partial.chmod(mode)
        os.rename(partial, out_path)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return {
        "rows": ids.size,
        "epsilon": ledger.epsilon(),
        "k_range": [int(k.min()), int(k.max())] if k is not None else None,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", required=True, help="Parquet file or folder")
    parser.add_argument("--label-column", required=True)
    parser.add_argument("--id-column", required=True)
    parser.add_argument("--classes", required=True, nargs="+")
    parser.add_argument("--epsilon", required=True, type=float)
    parser.add_argument("--prior-columns", nargs="+")
    parser.add_argument("--secure-rng", action="store_true")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    result = privatize_with_dask(
        args.table,
        args.out,
        label_column=args.label_column,
        id_column=args.id_column,
        classes=args.classes,
        epsilon=args.epsilon,
        prior_columns=args.prior_columns,
        noise=NoiseSource(secure=args.secure_rng),
    )
    print(f"released {result['rows']:,} labels; the ledger's epsilon {result['epsilon']:.4g}; written {args.out}")


if __name__ == "__main__":
    main()
