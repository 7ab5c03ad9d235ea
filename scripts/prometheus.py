"""Prometheus text exposition read into a dict (the scripts' view of `/metrics`)."""


def parse(text):
    """Every unlabelled sample of `text`: {name: value}."""
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, value = line.split(" ", 1)
            values[name] = float(value)
    return values
