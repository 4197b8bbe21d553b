"""One module per rule, named after the pattern it finds. Discovered by ``lint.registry``."""
