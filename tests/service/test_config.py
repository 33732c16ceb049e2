"""The service's settings (`service/config.py`): each is checked once, when the config is
made, with an error that names it."""

from __future__ import annotations

import pytest

from attnswitch.errors import ConfigError
from attnswitch.indexing.query_fill import QUERY_FILL
from attnswitch.service.config import ServiceConfig


@pytest.mark.parametrize("fill", [-1, 1001, 2.5, True, "20"])
def test_a_query_fill_that_is_no_count_from_0_to_1000_is_refused(fill) -> None:
    with pytest.raises(ConfigError) as caught:
        ServiceConfig(query_fill=fill)
    assert str(caught.value) == f"query_fill: expected an integer from 0 to 1000, got {fill!r}"


@pytest.mark.parametrize("fill", [0, 1, 1000])
def test_a_query_fill_from_0_to_1000_is_kept(fill: int) -> None:
    assert ServiceConfig(query_fill=fill).query_fill == fill
    assert ServiceConfig().query_fill == QUERY_FILL
