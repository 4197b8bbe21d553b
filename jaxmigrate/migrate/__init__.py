"""Whole-module codemods that lint fixes call (see DESIGN.md, "The two depths of a pmap migration")."""

from jaxmigrate.migrate.pmap_to_shard_map import PmapMigration, Site, rewrite_module

__all__ = ["PmapMigration", "Site", "rewrite_module"]
