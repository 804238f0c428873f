"""The reference broker and name server (``rocketmq_broker``), installed with the ``broker`` extra
(``pip install 'rocketmq-python-sdk[broker]'``: click for the command lines, PyYAML for the ACL
file); the client SDK (``rocketmq_sdk``) does not need it."""

import logging as _logging

try:
    import click  # noqa: F401
    import yaml  # noqa: F401
except ModuleNotFoundError as _exc:
    raise ModuleNotFoundError(f"the reference broker needs {_exc.name}: pip install 'rocketmq-python-sdk[broker]'",
                              name=_exc.name) from _exc

# Library etiquette: nothing reaches stderr through Python's last-resort handler unless the
# application (or this package's own CLI, ``runner.setup_logging``) configures logging.
_logging.getLogger("rocketmq_broker").addHandler(_logging.NullHandler())
