"""Protobuf message classes built at run time (no protoc): one file with two top-level
messages and a nested one (message indexes other than [0]), and a file that imports another
of ours and a well-known one (schema references)."""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
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


def _money_file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="aiostreams/test/money.proto",
                                              package="aiostreams.money", syntax="proto3")
    money = file.message_type.add(name="Money")
    money.field.add(name="currency", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    money.field.add(name="units", number=2, type=_F.TYPE_INT64, label=_F.LABEL_OPTIONAL)
    return file


def _payment_file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="aiostreams/test/payment.proto", package="aiostreams.payments", syntax="proto3",
        dependency=["aiostreams/test/money.proto", "google/protobuf/timestamp.proto"])
    payment = file.message_type.add(name="Payment")
    payment.field.add(name="id", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    payment.field.add(name="amount", number=2, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL,
                      type_name=".aiostreams.money.Money")
    payment.field.add(name="at", number=3, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL,
                      type_name=".google.protobuf.Timestamp")
    return file


def _timestamp_file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(file)
    return file


_pool = descriptor_pool.DescriptorPool()
for _proto in (_file(), _money_file(), _timestamp_file(), _payment_file()):
    _pool.Add(_proto)
Header: type[Message] = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName("aiostreams.test.Header"))
Order: type[Message] = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName("aiostreams.test.Order"))
OrderLine: type[Message] = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName("aiostreams.test.Order.Line"))
Money: type[Message] = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName("aiostreams.money.Money"))
Payment: type[Message] = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName("aiostreams.payments.Payment"))
