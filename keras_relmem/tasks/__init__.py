"""Library code behind the command lines in `tasks/` (importable and tested)."""
