"""A small generated ads table (a few thousand impressions, about 5 per user) and its hash spec, shared by
the ads route's tests."""

from __future__ import annotations

import pytest

from labeldp.data.synthetic_ads import AdsSpec, write_ads_table

#: a strong, simple signal: few values per column, a 10 % base rate
SMALL = AdsSpec(base_rate=0.1, advertisers=20, campaigns=50, sites=100, devices=4, scales=(1, 1, 1, 0.5, 0.3, 0, 0, 0))
COLUMNS = ("advertiser", "campaign", "site", "device")


@pytest.fixture(scope="session")
def ads(tmp_path_factory) -> tuple:
    """(train, test) Parquet files of 6000 and 3000 rows, row groups of 2048; torch's optimisers imported
    here, once (the first one built imports torch._dynamo: seconds, which no test should be charged)."""
    import torch

    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    folder = tmp_path_factory.mktemp("ads-route")
    train = write_ads_table(folder / "train.parquet", 6000, SMALL, row_group_rows=2048)
    test = write_ads_table(folder / "test.parquet", 3000, SMALL, "test", row_group_rows=2048)
    return train, test


@pytest.fixture(scope="session")
def spec():
    from labeldp.ads import hash_spec

    return hash_spec(COLUMNS, [("advertiser", "site")], bits=8, slot_bits={"device": 3})
