"""induction subpackage."""
