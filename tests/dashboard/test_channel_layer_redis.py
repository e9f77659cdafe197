"""The Redis channel layer as configured keeps an idle consumer's blocking receive alive."""

from __future__ import annotations

import asyncio

import pytest

from dashboard.config import channel_layers
from tests.conftest import REDIS_URL

pytestmark = [pytest.mark.redis]


async def test_an_idle_receive_outlives_the_blocking_pop_timeout():
    from channels_redis.core import RedisChannelLayer

    layer = RedisChannelLayer(**channel_layers(REDIS_URL)["default"]["CONFIG"])
    channel = await layer.new_channel()
    with pytest.raises(TimeoutError):  # our own deadline, not redis-py's socket timeout
        await asyncio.wait_for(layer.receive(channel), timeout=7)
    await layer.send(channel, {"type": "instance.changed", "id": "x"})
    assert await asyncio.wait_for(layer.receive(channel), timeout=30) == {"type": "instance.changed", "id": "x"}
    await layer.flush()
