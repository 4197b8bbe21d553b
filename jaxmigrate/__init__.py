"""jaxmigrate: move legacy multi-device JAX code onto modern JAX, and prove the move kept its meaning."""

__version__ = "0.1.0"
