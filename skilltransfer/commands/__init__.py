"""CLI subcommands; each module adds its commands to ``skilltransfer.cli.app``."""
