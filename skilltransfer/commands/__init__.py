"""CLI subcommands: plain functions with Typer annotations, registered on the app by ``skilltransfer.cli``."""
