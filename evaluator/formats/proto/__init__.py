"""Generated protobuf modules for smdebug's event records (package ``ruleeval.tfevent``).

The ``*_pb2.py`` / ``*_pb2.pyi`` files are generated and checked in; edit the ``.proto`` files and
run ``tools/gen_protos.py``. The package name differs from TensorFlow's and smdebug's so all three
can be loaded in one process; the wire format is identical.
"""
