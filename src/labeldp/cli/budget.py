"""``labeldp budget``: what each group of people has spent, composed per person across releases; folders
written before the dataset ledgers existed imported on request."""

from __future__ import annotations

import argparse
from pathlib import Path

from labeldp.config.shared_options import BUDGET_DIR, TOTAL_EPSILON
from labeldp.options import add_options

DESCRIPTION = (
    "List every group of people of the budget folder (a dataset name, the column naming its people, or a table) "
    "and the epsilon its worst person has spent, composed across releases under replace-one label (see "
    "docs/dataset-ledger.md); with `import FOLDER ...`, put the runs, tunes and release folders found under each "
    "FOLDER on their ledgers: a folder whose release is on them already is skipped, so importing twice counts once."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``import`` and its folders, and the budget folder."""
    parser.add_argument("action", nargs="?", choices=("list", "import"), default="list")
    parser.add_argument("folders", nargs="*", metavar="FOLDER", help="with import: folders of runs or releases")
    add_options(parser, "budget", BUDGET_DIR, TOTAL_EPSILON)


def run(args: argparse.Namespace) -> None:
    """List the groups' composed spend, importing ``folders`` first with ``import``."""
    from labeldp.accounting.datasets import ledgers
    from labeldp.cli.common import budget_policy
    from labeldp.cli.summary import print_dataset_spend
    from labeldp.errors import ConfigError

    policy = budget_policy(args)
    if args.action == "import":
        if not args.folders:
            raise ConfigError("labeldp budget import needs the folders of the runs or releases to import")
        missing = [folder for folder in args.folders if not Path(folder).is_dir()]
        if missing:
            raise ConfigError(f"no such folder: {', '.join(missing)} (nothing was imported)")
        for folder in args.folders:
            for line in import_folders(Path(folder), policy):
                print(line)
    elif args.folders:
        raise ConfigError("folders are imported with `labeldp budget import FOLDER ...`")
    found = ledgers(policy.folder)
    if not found:
        print(f"no dataset has spent anything yet ({policy.folder})")
    for ledger in found:
        summary = ledger.summary()
        routes = sorted({spend.route for spend in ledger.spends()})
        print(f"{ledger.key} ({', '.join(routes) or 'no release'}):", end=" ")
        print_dataset_spend(summary)


def import_folders(root: Path, policy) -> list[str]:
    """Put every run folder (``config.json`` beside ``ledger.json``) and release folder (``release.json``) under
    ``root`` on the ledgers of its people, from its saved ledger; one line said for each."""
    from labeldp.errors import LabelDPError

    said = []
    for marker in sorted([*root.rglob("ledger.json"), *root.rglob("release.json")]):
        folder = marker.parent
        if marker.name == "ledger.json" and (folder / "release.json").exists():
            continue  # a release folder: met through its release.json
        if marker.name == "ledger.json" and not (folder / "config.json").exists():
            continue  # an audit's own ledger or a scratch folder: not a run
        try:
            said.append(_import(folder, marker.name == "release.json", policy))
        except (LabelDPError, OSError, KeyError, ValueError, TypeError) as error:
            said.append(f"{folder}: not counted ({error})")
    return said


def _identity(folder: Path, files: list[str]) -> str:
    """The folder's release id: the one it holds, else one made from its saved content, the released labels
    included (two releases of one configuration differ there), never its path."""
    import hashlib

    from labeldp.accounting.datasets import RELEASE_FILE

    held = folder / RELEASE_FILE
    if held.exists() and held.read_text().strip():
        return held.read_text().strip()
    digest = hashlib.sha256()
    for path in [*(folder / name for name in files), *sorted(folder.glob("noisy_labels/*.npz"))]:
        if path.exists():
            digest.update(path.read_bytes())
    return f"imported#{digest.hexdigest()[:16]}"


def _import(folder: Path, release: bool, policy) -> str:
    import pyarrow.parquet as pq

    from labeldp.accounting import PrivacyLedger
    from labeldp.accounting.datasets import CANCELLED, ledgers, table_facts
    from labeldp.accounting.policy import Guarantee
    from labeldp.accounting.rounding import format_epsilon
    from labeldp.accounting.spending import Source, Spending
    from labeldp.boundary import read_sidecar
    from labeldp.boundary.table_source import read_key_columns
    from labeldp.config.run_config import RunConfig
    from labeldp.errors import RunDirectoryError
    from labeldp.runs import RunDirectory
    from labeldp.runs.plan import config_dataset
    from labeldp.runs.reservation import run_source
    from labeldp.tables.folder_format import ROW_COLUMN
    from labeldp.tables.keys import row_keys
    from labeldp.tables.table_batches import column_keys

    files = ["release.json", "ledger.json", "labels.parquet"] if release else ["config.json", "ledger.json"]
    identity = _identity(folder, files)
    known = [
        ledger.key
        for ledger in ledgers(policy.folder)
        if (line := ledger.lines().get(identity)) is not None and line.route != CANCELLED
    ]
    if known:
        return f"{folder}: on the ledger already ({', '.join(known)}): skipped"
    if release:
        sidecar = read_sidecar(folder)
        table, label = sidecar["source"]["table"], sidecar["source"]["label_column"]
        unit = (sidecar.get("privacy_unit") or {}).get("column")
        ids = sidecar["source"]["id_column"]
        read = read_key_columns(table, label, ids, one_row_per_person=True)

        def keys(column: str):  # the released rows': their ids as released, else their rows of the table now
            released = folder / sidecar["files"]["labels"]
            if column == ids:
                return row_keys(pq.read_table(released, columns=[ids]).column(0))
            rows = pq.read_table(released, columns=[ROW_COLUMN]).column(0).to_numpy() if ids is None else None
            return column_keys(table, column) if rows is None else column_keys(table, column)[rows]

        source = Source(
            table=table_facts(table, label, read.columns, read.rows),
            columns=read.columns,
            keys=keys,
            unit=unit,
            id_column=ids,
        )
        saved, delta, route = PrivacyLedger.load(folder / sidecar["files"]["ledger"]), 0.0, "privatize"
    else:
        saved_config = RunDirectory(folder).read_config()
        if saved_config is None:  # checked by the caller; a folder emptied since is no run
            raise RunDirectoryError(f"{folder} has no config.json")
        config = RunConfig.from_dict(saved_config).resolved()
        data = config_dataset(config)
        source, unit = run_source(config, data), (data.unit_bound or {}).get("column")
        saved, delta, route = PrivacyLedger.load(folder / "ledger.json"), config.delta or 0.0, "train"
    spending = Spending(policy, source, identity, route, str(folder))
    guarantee = Guarantee.of_ledger(saved, delta, unit)
    spending.record(guarantee)
    return f"{folder}: epsilon {format_epsilon(guarantee.epsilon)} on {', '.join(spending.groups)}"
