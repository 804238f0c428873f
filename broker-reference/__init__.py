"""The reference broker and name server (``rocketmq_broker``), installed with the ``broker`` extra
(``pip install 'rocketmq-python-sdk[broker]'``: click for the command lines, PyYAML for the ACL
file); the client SDK (``rocketmq_sdk``) does not need it."""

try:
    import click  # noqa: F401
    import yaml  # noqa: F401
except ModuleNotFoundError as _exc:
    raise ModuleNotFoundError(f"the reference broker needs {_exc.name}: pip install 'rocketmq-python-sdk[broker]'",
                              name=_exc.name) from _exc
