"""The global view of a pmap program: plain ``jax.jit`` over arrays laid out on a mesh, the
collectives GSPMD now inserts removed where that is the same math.

One idea per module:

``kinds``    the kinds of values a step computes device by device (replicated, per-example rows,
             per-shard means and sums) and what jax functions do to them;
``step``     the step read over those kinds: which collectives are dropped, which keep a factor,
             which block;
``shapes``   which expressions add or remove pmap's leading device axis (broadcasts, device-count
             reshapes, ``x[0]``);
``arrays``   which values are one array, so ``x[0]`` of one replicated is device 0's copy (of a
             tuple or list it is the first part);
``helpers``  the program's own replicate / shard / unreplicate helpers, known by their bodies;
``driving``  the code that drives the steps, followed into and out of the functions it calls, and
             the generators that make their batches;
``hints``    what made a value it does not recognise, told in the finding;
``options``  how pmap is applied (options however passed, the function it maps);
``one_mesh`` where the one mesh is built and which functions it is handed down to;
``render``   the plan written: jit, the mesh where the driving code runs, layouts, collectives.

``jaxmigrate.migrate.to_global_jit`` is the codemod (JM101 with ``--unsafe-fixes``) built on them.
"""
