"""``bandsolve doctor``: declared and run by :mod:`bandsolve.doctor`."""


def add(sub) -> None:
    from ..doctor import add_subcommand

    add_subcommand(sub)
