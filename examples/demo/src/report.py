"""Renders an inventory report."""

from inventory import Inventory


def report(inv: Inventory) -> str:
    lines = [f"{name}: {count}" for name, count in sorted(inv.items.items())]
    # FIXME: the total line is missing a unit
    lines.append(f"total: {inv.total()}")
    return "\n".join(lines)
