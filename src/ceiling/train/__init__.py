"""train (see DESIGN.md)."""
