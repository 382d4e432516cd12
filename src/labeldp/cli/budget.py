"""``labeldp budget``: what each dataset's releases have spent, composed across runs; folders written
before the dataset ledgers existed imported on request."""

from __future__ import annotations

import argparse
from pathlib import Path

from labeldp.config.shared_options import BUDGET_DIR, TOTAL_EPSILON
from labeldp.options import add_options

DESCRIPTION = (
    "List every dataset of the budget folder and the epsilon its releases have spent, composed across runs "
    "(see docs/dataset-ledger.md); with `import FOLDER ...`, put the runs, tunes and release folders found "
    "under each FOLDER on their datasets' ledgers (folders written before the ledgers existed are not counted "
    "until imported; importing one twice counts it once)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``import`` and its folders, and the budget folder."""
    parser.add_argument("action", nargs="?", choices=("list", "import"), default="list")
    parser.add_argument("folders", nargs="*", metavar="FOLDER", help="with import: folders of runs or releases")
    add_options(parser, "budget", BUDGET_DIR, TOTAL_EPSILON)


def run(args: argparse.Namespace) -> None:
    """List the datasets' composed spend, importing ``folders`` first with ``import``."""
    from labeldp.accounting.datasets import budget_dir, ledgers
    from labeldp.accounting.rounding import format_epsilon
    from labeldp.errors import ConfigError

    if args.action == "import":
        if not args.folders:
            raise ConfigError("labeldp budget import needs the folders of the runs or releases to import")
        for folder in args.folders:
            for line in import_folders(Path(folder)):
                print(line)
    elif args.folders:
        raise ConfigError("folders are imported with `labeldp budget import FOLDER ...`")
    found = ledgers()
    if not found:
        print(f"no dataset has spent anything yet ({budget_dir()})")
    for ledger in found:
        epsilon, delta, unit = ledger.composed()
        releases = ledger.spends()
        routes = sorted({spend.route for spend in releases})
        print(
            f"{ledger.key}  epsilon {format_epsilon(epsilon)} per {unit or 'row'}"
            + (f" (delta {delta:g})" if delta else "")
            + f"  {len(releases)} release{'s' if len(releases) != 1 else ''} ({', '.join(routes)})  {ledger.described}"
        )


def import_folders(root: Path) -> list[str]:
    """Put every run folder (``config.json`` beside ``ledger.json``) and release folder (``release.json``)
    under ``root`` on its dataset's ledger, from its saved ledger; one line said for each."""
    from labeldp.errors import LabelDPError

    said = []
    for marker in sorted([*root.rglob("ledger.json"), *root.rglob("release.json")]):
        folder = marker.parent
        if marker.name == "ledger.json" and (folder / "release.json").exists():
            continue  # a release folder: met through its release.json
        if marker.name == "ledger.json" and not (folder / "config.json").exists():
            continue  # an audit's own ledger or a scratch folder: not a run
        try:
            key, epsilon = _import(folder, marker.name == "release.json")
        except (LabelDPError, OSError, KeyError, ValueError) as error:
            said.append(f"{folder}: not counted ({error})")
            continue
        said.append(f"{folder}: epsilon {epsilon} on dataset {key}")
    return said


def _import(folder: Path, release: bool) -> tuple[str, str]:
    from labeldp.accounting import PrivacyLedger
    from labeldp.accounting.datasets import DatasetLedger, Spend, table_facts
    from labeldp.accounting.rounding import format_epsilon
    from labeldp.boundary import read_sidecar
    from labeldp.boundary.table_source import read_key_columns
    from labeldp.config.run_config import RunConfig
    from labeldp.errors import RunDirectoryError
    from labeldp.runs import RunDirectory
    from labeldp.runs.context import dataset_ledger
    from labeldp.runs.run import config_dataset

    if release:
        sidecar = read_sidecar(folder)
        source, unit = sidecar["source"], (sidecar.get("privacy_unit") or {}).get("column")
        read = read_key_columns(source["table"], source["label_column"], source["id_column"], one_row_per_person=True)
        ledger = DatasetLedger.of(table_facts(source["table"], source["label_column"], read.columns, read.rows))
        saved = PrivacyLedger.load(folder / sidecar["files"]["ledger"])
        spend = Spend.of_ledger(str(folder.resolve()), "privatize", saved, 0.0, unit)
    else:
        saved_config = RunDirectory(folder).read_config()
        if saved_config is None:  # checked by the caller; a folder emptied since is no run
            raise RunDirectoryError(f"{folder} has no config.json")
        config = RunConfig.from_dict(saved_config).resolved()
        data = config_dataset(config)
        ledger = dataset_ledger(data)
        saved = PrivacyLedger.load(folder / "ledger.json")
        unit = (data.unit_bound or {}).get("column")
        spend = Spend.of_ledger(str(folder.resolve()), "train", saved, config.delta or 0.0, unit)
    ledger.record(spend)
    return ledger.key, format_epsilon(spend.epsilon)
