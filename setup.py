"""Maps the repository's fixed folder layout onto import packages.

``sdk/`` is imported as ``rocketmq_sdk``, ``broker-reference/`` as ``rocketmq_broker`` and
``integrations/`` as ``rocketmq_sdk.integrations``; pyproject.toml holds everything else.
"""

from setuptools import find_packages, setup

ROOTS = {
    "rocketmq_sdk": "sdk",
    "rocketmq_broker": "broker-reference",
    "rocketmq_sdk.integrations": "integrations",
}


def _packages() -> tuple[list[str], dict[str, str]]:
    packages: list[str] = []
    package_dir: dict[str, str] = {}
    for name, folder in ROOTS.items():
        package_dir[name] = folder
        packages.append(name)
        for sub in find_packages(where=folder):
            full = f"{name}.{sub}"
            if full.startswith("rocketmq_sdk.integrations") and name == "rocketmq_sdk":
                continue
            packages.append(full)
            package_dir[full] = f"{folder}/{sub.replace('.', '/')}"
    return sorted(set(packages)), package_dir


PACKAGES, PACKAGE_DIR = _packages()
setup(packages=PACKAGES, package_dir=PACKAGE_DIR)
