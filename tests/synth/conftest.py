"""The vendored fixture project under fixtures/ has its own tests: they are data here."""

collect_ignore = ["fixtures"]
