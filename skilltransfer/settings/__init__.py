"""A stream's settings (`StreamConfig`, with its env, model and the axes a grid varies: `skilltransfer.settings.config`)
and the typed view of what a run folder recorded of them (`RunSettings`, `read_run_settings`:
`skilltransfer.settings.recorded`): below both the runner, which runs them, and the report, which groups runs by
them.
"""

from skilltransfer.settings.config import EnvSpec, ModelSpec, StreamConfig, axes
from skilltransfer.settings.recorded import RunSettings, read_run_settings

__all__ = ["EnvSpec", "ModelSpec", "RunSettings", "StreamConfig", "axes", "read_run_settings"]
