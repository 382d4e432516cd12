"""The dataset registry (data/dataset_registry.py): a name registered twice is refused, an unknown name lists
the choices, a ``"module:function"`` loader is imported when the dataset is loaded, and a dataset
without a download says so."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from labeldp.data import dataset_registry as registry_module
from labeldp.data import load_dataset
from labeldp.data.dataset_registry import dataset_names, get_dataset, register_dataset
from labeldp.data.dataset_spec import Dataset, DatasetRequest
from labeldp.errors import ConfigError

#: labeldp's own datasets, in the order data/builtin_datasets.py registers them
BUILTIN = ("digits", "mnist", "fashion-mnist", "kmnist", "cifar10", "cifar100", "movielens", "csv")


@pytest.fixture
def register_dataset_for_test():
    """``register_dataset`` for one test: the datasets it registers are removed from the registry
    afterwards (only if the name still stands for the test's dataset), so that no other test sees them."""
    dataset_names()  # labeldp's own are registered first, as in any use
    registered = []

    def register(dataset):
        registered.append(dataset)
        return register_dataset(dataset)

    yield register
    for dataset in registered:
        if registry_module._DATASETS.get(dataset.name) is dataset:
            del registry_module._DATASETS[dataset.name]


def _never(request):
    raise AssertionError("a dataset registered by these tests is never loaded")


def test_a_name_registered_twice_is_refused(register_dataset_for_test) -> None:
    """A second dataset under a registered name (one's own or labeldp's) is refused; the first keeps it."""
    first = register_dataset_for_test(Dataset("test-registry-twice", "embedded", _never, help="the first"))
    with pytest.raises(ConfigError, match="dataset 'test-registry-twice' is already registered"):
        register_dataset_for_test(Dataset("test-registry-twice", "table", _never, help="the second"))
    with pytest.raises(ConfigError, match="dataset 'mnist' is already registered"):
        register_dataset_for_test(Dataset("mnist", "embedded", _never))
    assert get_dataset("test-registry-twice") is first and get_dataset("mnist").source == "folder"


def test_a_dataset_declares_where_its_data_comes_from() -> None:
    """A dataset's source must be embedded, a folder or a table."""
    with pytest.raises(ConfigError, match=r"source must be one of \('embedded', 'folder', 'table'\), got 'web'"):
        Dataset("test-registry-web", "web", _never)


def test_labeldps_own_come_first_and_an_unknown_name_lists_every_choice(register_dataset_for_test) -> None:
    """dataset_names lists labeldp's own first, and an unknown name is an error that lists them all."""
    register_dataset_for_test(Dataset("test-registry-listed", "embedded", _never))
    names = dataset_names()
    assert names[: len(BUILTIN)] == BUILTIN and names[-1] == "test-registry-listed"
    with pytest.raises(ConfigError, match="unknown dataset 'imagenet'; choose one of") as refused:
        get_dataset("imagenet")
    assert str(refused.value).endswith(", ".join(names))


def test_a_loader_named_module_function_is_imported_when_the_dataset_is_loaded(
    register_dataset_for_test, monkeypatch
) -> None:
    """A loader (or a download) given as ``"module:function"`` is not imported at registration, so that
    the registry stays light: registering one whose module does not exist yet succeeds, and loading
    then imports it and passes it the request; load_dataset finds a registered dataset by its name."""
    dataset = register_dataset_for_test(
        Dataset(
            "test-registry-lazy",
            "embedded",
            "labeldp_test_registry_loader:load",
            download="labeldp_test_registry_loader:download",
        )
    )
    assert "labeldp_test_registry_loader" not in sys.modules
    module = types.ModuleType("labeldp_test_registry_loader")
    requests, folders = [], []
    module.load = lambda request: requests.append(request) or "loaded"
    module.download = folders.append
    monkeypatch.setitem(sys.modules, "labeldp_test_registry_loader", module)
    request = DatasetRequest(split_seed=3)
    assert dataset.load(request) == "loaded" and requests == [request]
    dataset.fetch("some/folder")
    assert folders == [Path("some/folder")]
    assert load_dataset("test-registry-lazy", split_seed=5) == "loaded" and requests[-1].split_seed == 5


def test_a_dataset_without_a_download_says_so(register_dataset_for_test) -> None:
    """Fetching a dataset that has nothing to download is an error, before anything is written."""
    register_dataset_for_test(Dataset("test-registry-local", "embedded", _never))
    for name in ("test-registry-local", "digits", "csv"):
        with pytest.raises(ConfigError, match=f"dataset {name!r} has nothing to download"):
            get_dataset(name).fetch(Path("unused"))
    assert callable(get_dataset("mnist").download)


def test_a_datasets_aliases_name_it_too(monkeypatch) -> None:
    from labeldp.data import Dataset, dataset_names, dataset_registry, get_dataset, register_dataset
    from labeldp.errors import ConfigError

    monkeypatch.setattr(
        dataset_registry, "_DATASETS", dict(dataset_registry._DATASETS)
    )  # the dataset_registry as it was, afterwards
    dataset = register_dataset(Dataset("first-day-blobs", "embedded", "x:y", aliases=("first-day-b",)))
    assert get_dataset("first-day-b") is dataset and "first-day-b" in dataset_names()
    with pytest.raises(ConfigError, match="already registered"):
        register_dataset(Dataset("first-day-other", "embedded", "x:y", aliases=("first-day-b",)))
    assert "first-day-other" not in dataset_names()


def test_a_runs_table_options_reach_the_loader_whole(register_dataset_for_test, tmp_path) -> None:
    """A run's table options reach a table's loader as one TableOptions, each under its name in config.json
    (a relative table under --data-dir), with the run's seed and test_labels beside them."""
    from labeldp.data.dataset_spec import TableOptions
    from labeldp.runs import RunConfig, config_dataset

    requests = []
    register_dataset_for_test(Dataset("test-registry-table", "table", lambda request: requests.append(request) or 1))
    table = dict(table="t.csv", label_column="y", classes=("0", "1"), privacy_unit="user", max_rows_per_unit=2)
    config = RunConfig(dataset="test-registry-table", data_dir=str(tmp_path), test_labels="public", seed=3, **table)
    assert config_dataset(RunConfig.from_dict(config.to_dict())) == 1
    assert requests[-1].table_options == TableOptions(**{**table, "table": tmp_path / "t.csv"})
    assert (requests[-1].public_test, requests[-1].split_seed) == (True, 3)
