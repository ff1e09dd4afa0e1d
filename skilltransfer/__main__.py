"""``python -m skilltransfer``: the same CLI as the ``skilltransfer`` command."""

from skilltransfer.cli import main

if __name__ == "__main__":
    main()
