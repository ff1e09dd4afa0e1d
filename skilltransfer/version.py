"""The toolkit's version (``skilltransfer.__version__``), on the ground floor: what the model client's user agent and
a run's provenance record, read without the package's face."""

__version__ = "0.1.0"
