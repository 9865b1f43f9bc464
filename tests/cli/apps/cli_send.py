"""An app declaring the topics ``aiostreams send`` tests write to, on ``memory://cli-send``."""

from __future__ import annotations

from pydantic import BaseModel

from aiostreams import App


class Order(BaseModel):
    id: str
    amount: float


app = App("cli-send", broker="memory://cli-send")
orders = app.topic("send-orders", key=str, value=Order, partitions=2)
counts = app.topic("send-counts", key=str, value=int, partitions=1)
