"""kombu's shared integration suite (``t/integration/common.py``), taken from kombu's source
distribution for the installed kombu version (see sdist.py); nothing of it is kept in the
repository."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from sdist import extract

MEMBER = "t/integration/common.py"


def load_common() -> ModuleType:
    """kombu's ``t/integration/common.py`` as the module ``kombu_integration_common``.

    Raises:
        RuntimeError: the sdist could not be downloaded.
    """
    name = "kombu_integration_common"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, extract("kombu", MEMBER) / MEMBER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
