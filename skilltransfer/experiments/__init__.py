"""experiments subpackage."""
