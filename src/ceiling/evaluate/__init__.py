"""evaluate (see DESIGN.md)."""
