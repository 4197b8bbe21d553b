"""Whole-module codemods that lint fixes call (see DESIGN.md, "The two depths of a pmap migration").

Nothing is imported here: rules import the ast-only planners of this package on the check path,
and the LibCST codemods must load only when a fix is applied.
"""
