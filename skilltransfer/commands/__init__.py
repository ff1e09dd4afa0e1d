"""CLI subcommands: every module in this package adds its commands to ``skilltransfer.cli.app`` on import."""

import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
