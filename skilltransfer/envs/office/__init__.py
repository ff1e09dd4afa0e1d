"""The ``office`` environment: OfficeBench-style workflows over real .eml/.ics/.docx/.xlsx/.pdf/image files.

``OfficeEnv()`` serves ~200 generated tasks over 1-3 apps; ``OfficeEnv(source="officebench:<tasks folder>")`` serves
the 300 real OfficeBench instances, checked with the benchmark's nine check functions.
"""

from skilltransfer.envs.office.env import NoReferenceSolutionError, OfficeEnv
from skilltransfer.envs.office.office_tools import files

__all__ = ["NoReferenceSolutionError", "OfficeEnv", "files"]
