"""A small stock inventory, used as the demo workspace's code."""


class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, name, count):
        # TODO: reject negative counts
        self.items[name] = self.items.get(name, 0) + count

    def remove(self, name, count):
        # TODO: raise a clear error when the item is missing
        self.items[name] -= count

    def total(self):
        return sum(self.items.values())
