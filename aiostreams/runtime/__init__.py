"""The kernel every layer may use: the clock, the slot of the record that runs, trace hooks,
permit waits, the record bound for an external sink.

Nothing here imports any other package of aiostreams but the vocabulary (``types``,
``errors``); the layer test (tests/test_layers.py) keeps it so.
"""
