"""Protobuf message classes built at run time (no protoc): one file, two top-level messages,
one nested, so message indexes other than [0] are exercised."""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

_F = descriptor_pb2.FieldDescriptorProto


def _file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="aiostreams_test_orders.proto",
                                              package="aiostreams.test", syntax="proto3")
    first = file.message_type.add(name="Header")
    first.field.add(name="source", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    order = file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    order.field.add(name="amount", number=2, type=_F.TYPE_DOUBLE, label=_F.LABEL_OPTIONAL)
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    line.field.add(name="quantity", number=2, type=_F.TYPE_INT64, label=_F.LABEL_OPTIONAL)
    order.field.add(name="lines", number=3, type=_F.TYPE_MESSAGE, label=_F.LABEL_REPEATED,
                    type_name=".aiostreams.test.Order.Line")
    return file


_pool = descriptor_pool.DescriptorPool()
_pool.Add(_file())
Header: type[Message] = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName("aiostreams.test.Header"))
Order: type[Message] = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName("aiostreams.test.Order"))
OrderLine: type[Message] = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName("aiostreams.test.Order.Line"))
