"""A stream's settings (`StreamConfig`, with its env, model and the axes a grid varies) and the typed view of what a
run folder recorded of them (`RunSettings`): below both the runner, which runs them, and the report, which groups
runs by them.
"""
