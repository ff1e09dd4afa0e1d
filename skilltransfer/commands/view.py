"""``skilltransfer view``: serve run folders in a local web viewer, or export them as a static site."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from skilltransfer.errors import InputError
from skilltransfer.util.terminal import echo


def view(
    paths: Annotated[list[Path], typer.Argument(help="Run folders, or folders holding them (grid outputs, report "
                                                "folders: their figures are shown).")],
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to serve on (0: a free one).")] = 7575,
    host: Annotated[str, typer.Option(help="Address to bind; the default serves this machine only.")] = "127.0.0.1",
    export: Annotated[Path | None, typer.Option("--export", help="Write a static site into this folder (opens "
                                                "from disk, no server) instead of serving. Anyone who can "
                                                "read the folder, and any page opened from disk, can read its "
                                                "data; see --export-file.")] = None,
    export_file: Annotated[Path | None, typer.Option("--export-file", help="Write the viewer as one self-contained "
                                                     "HTML file (data inside it, loadable by no other page) instead "
                                                     "of serving.")] = None,
) -> None:
    """Browse runs, tasks, trajectories (with every model call's prompt), skills, transfer and comparisons."""
    from skilltransfer.view import Catalog, ViewServer, export_site
    from skilltransfer.view.export import EXPOSURE_NOTE
    from skilltransfer.view.export import export_file as write_single_file

    catalog = Catalog(paths)
    if export is not None and export_file is not None:
        raise InputError("give --export or --export-file, not both")
    _some_run_reads(catalog)
    if export is not None or export_file is not None:
        done = export_site(catalog, export) if export is not None else write_single_file(catalog, export_file or "")
        where = f"{done.path}/index.html" if export is not None else str(done.path)
        echo(f"wrote {where}: {done.runs} runs, {done.tasks} trajectories, {done.files} files, "
             f"{done.bytes / 2**20:.1f} MiB" + (f"; {len(done.problems)} not exported" if done.problems else ""))
        if export is not None:
            echo(f"note: {EXPOSURE_NOTE}", err=True)
        for problem in done.problems:
            echo(f"  not exported: {problem}", err=True)
        return
    runs, _ = catalog.scan()
    if not runs:
        raise InputError("no runs found (folders with config.json and results.jsonl)", path=paths[0])
    server = ViewServer(catalog, host=host, port=port).start()
    echo(f"skilltransfer view: {len(runs)} runs at {server.url} (read-only; reload to see new tasks; "
         "Ctrl-C stops)")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def _some_run_reads(catalog: Any) -> None:
    """Refuse, in one line, paths whose run folders all fail to read (a crafted one: the file, line and field); when
    some read, the page lists the others with why."""
    runs, _ = catalog.scan()
    if not runs:
        return
    index = catalog.index()
    if not index["runs"] and index["problems"]:
        raise InputError(index["problems"][0]["error"])
