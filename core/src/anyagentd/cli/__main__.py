"""``python -m anyagentd.cli``: the ``anyagentd`` command line without the console script."""

from .. import startup

startup.begin()  # as the console script does (this package's own import loads only click)

from . import main  # noqa: E402

if __name__ == "__main__":
    main(prog_name="anyagentd")
