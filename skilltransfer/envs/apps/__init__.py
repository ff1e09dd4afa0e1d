"""The ``apps`` environment: an AppWorld-like offline world of simulated apps (see ``env.AppsEnv``)."""

from skilltransfer.envs.apps.env import AppsEnv

__all__ = ["AppsEnv"]
