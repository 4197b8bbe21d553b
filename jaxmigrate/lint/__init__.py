"""Static analysis: rules, their registry and the renderers of their findings."""
