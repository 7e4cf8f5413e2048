"""``bandsolve verify``: declared and run by :mod:`bandsolve.verify`."""


def add(sub) -> None:
    from ..verify import add_subcommand

    add_subcommand(sub)
