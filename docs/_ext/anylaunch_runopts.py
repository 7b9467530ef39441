"""Sphinx directive ``runopts``: a scheduler's run options as a table, generated at build time.

``:::{runopts} kubernetes`` reads ``get_scheduler_factories()["kubernetes"]("docs").run_opts()``
(no backend is contacted: building a scheduler object and asking for its options is offline), so
the table cannot drift from the code.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive


def _row(cells: list[nodes.Node]) -> nodes.row:
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
        entry += cell if isinstance(cell, nodes.paragraph) else nodes.paragraph("", "", cell)
        row += entry
    return row


def _default(value: object) -> str:
    return "" if value is None else repr(value)


class RunoptsDirective(Directive):
    """``.. runopts:: <scheduler>``: the table of that scheduler's run options."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        from anylaunch.schedulers import get_scheduler_factories
        from anylaunch.specs.runopts import get_type_name

        name = self.arguments[0]
        factories = get_scheduler_factories()
        if name not in factories:
            raise self.error(f"unknown scheduler {name!r}; known: {', '.join(sorted(factories))}")
        opts = factories[name]("docs").run_opts()

        table = nodes.table(classes=["anylaunch-runopts"])
        group = nodes.tgroup(cols=4)
        table += group
        for width in (22, 12, 12, 54):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        head += _row([nodes.Text(h) for h in ("option", "type", "default", "help")])
        group += head
        body = nodes.tbody()
        for opt_name, opt in opts:
            required = " (required)" if opt.is_required else ""
            body += _row(
                [
                    nodes.literal(opt_name, opt_name),
                    nodes.Text(get_type_name(opt.opt_type) + required),
                    nodes.literal(_default(opt.default), _default(opt.default))
                    if opt.default is not None
                    else nodes.Text(""),
                    nodes.Text(opt.help),
                ]
            )
        group += body
        if not len(body):
            return [nodes.paragraph("", f"{name} has no run options.")]
        return [table]


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("runopts", RunoptsDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
