"""``skilltransfer view``: a web viewer of run folders (runs and grids, tasks, trajectories with every model call's
prompt, skill libraries, transfer graphs, comparisons), served locally (`ViewServer`) or exported as a static site
that opens from disk (`export_site`). The run log is the contract: the viewer reads run folders as they are, through
`skilltransfer.log`, and never writes to them."""

from __future__ import annotations

from skilltransfer.view.data import Catalog
from skilltransfer.view.export import ExportSummary, export_site
from skilltransfer.view.server import ViewServer

__all__ = ["Catalog", "ExportSummary", "ViewServer", "export_site"]
