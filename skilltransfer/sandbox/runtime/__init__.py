"""The sandbox worker's runtime: standard library only, no evaluation state.

This folder is copied, read-only, into the per-process runtime folder (``skilltransfer.sandbox.scratch``) and
imported there as the top-level package ``sandbox_runtime``; the worker process never sees the ``skilltransfer``
package. Modules here import each other relatively, so the harness can import the same code as
``skilltransfer.sandbox.runtime`` (the in-process runner builds its namespace with the same stubs).
"""
