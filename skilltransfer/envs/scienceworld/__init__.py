"""The ``scienceworld`` environment: the ScienceWorld benchmark's simulator behind harness services."""

from skilltransfer.envs.scienceworld.env import ScienceWorldEnv

__all__ = ["ScienceWorldEnv"]
