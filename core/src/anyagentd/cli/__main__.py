"""``python -m anyagentd.cli``: the ``anyagentd`` command line without the console script."""

from . import main

if __name__ == "__main__":
    main(prog_name="anyagentd")
