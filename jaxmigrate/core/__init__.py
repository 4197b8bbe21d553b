"""The layer ``lint`` and ``migrate`` both stand on, importing neither.

``source`` maps ast positions to text offsets, ``edits`` splices text, ``module`` is one parsed
module with its resolver (``jaxmigrate.names``) and the facts planners ask of it, ``fallbacks``
recognises compatibility imports. Detection (lint) and rewriting (migrate) share one parse of a
file through ``module.ParsedModule``.
"""
