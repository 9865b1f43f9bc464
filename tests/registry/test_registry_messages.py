"""Finding the broken fields in registries' compatibility messages (no server needed)."""

from __future__ import annotations

import pytest

from aiostreams.schema_registry.client import _fields_named_in


@pytest.mark.parametrize(("message", "fields"), [
    ("Incompatible artifact: t-value [AVRO], num of incompatible diffs: {1}, list of diff "
     "types: [customer at /fields/2] Causes: customer at /fields/2", ("customer",)),
    ("Incompatible artifact: j-value [JSON], num of incompatible diffs: {2}, list of diff "
     "types: [SUBSCHEMA_TYPE_CHANGED at /properties/a, REQUIRED_PROPERTY_ADDED at "
     "/properties/b/properties/c]", ("a", "b.c")),
    ("{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'customer' at "
     "path '/fields/2' in the new schema has no default value'}", ("customer",)),
    ("The new version of the protobuf artifact is not backward compatible. at /", ()),
], ids=["apicurio-avro", "apicurio-json", "confluent-avro", "apicurio-protobuf"])
def test_compatibility_messages_yield_the_fields_they_name(
        message: str, fields: tuple[str, ...]) -> None:
    assert _fields_named_in([message]) == fields
