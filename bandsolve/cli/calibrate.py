"""``bandsolve calibrate``: declared and run by :mod:`bandsolve.calibrate`."""


def add(sub) -> None:
    from ..calibrate import add_subcommand

    add_subcommand(sub)
