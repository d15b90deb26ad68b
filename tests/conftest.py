from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster import scancel_everything, slurm_answers


@pytest.fixture(scope="session")
def cluster() -> Iterator[None]:
    """The real Slurm test cluster. It must be up: its absence is a failure, not a skip."""
    if not slurm_answers():
        pytest.fail("the Slurm test cluster is not answering: run `deploy/testcluster.sh up`")
    scancel_everything()
    yield
    scancel_everything()


@pytest.fixture
def clean_queue(cluster: None) -> Iterator[None]:
    """Each cluster test starts and ends with an empty queue, so tests cannot see each other."""
    scancel_everything()
    yield
    scancel_everything()
