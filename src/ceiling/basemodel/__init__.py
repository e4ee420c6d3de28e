"""basemodel (see DESIGN.md)."""
