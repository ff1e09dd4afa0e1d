"""The runner: a stream's settings and a spec's grid made into runs.

``spec`` reads a spec file, ``plan`` makes its streams, ``build`` the env, tasks and embedder of each; one stream runs
task by task into its run folder (`skilltransfer.log.RunFolder`): ``stream_build`` builds its parts once, ``stream`` is
the loop, ``stream_record`` writes each task's trajectory and record, ``clock`` is the task's deadline. ``launch`` is
``run``'s way in and ``grid`` / ``execute`` / ``ray_backend`` run many streams side by side; ``budget``, ``estimate``
and ``progress`` bound, price and show the work (the endpoint check before it is the model layer's,
`skilltransfer.llm.openai_client`); ``coordinated``, ``evolve``, ``organize`` and ``guard`` are the stream kinds and
wrappers that need more than a task loop. It reads runs back only through the log, and knows no report and no viewer.
"""
