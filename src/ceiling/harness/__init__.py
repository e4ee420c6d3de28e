"""harness (see DESIGN.md)."""
