"""The one exception type that means "the user asked for something that cannot be done"."""


class UserError(Exception):
    """A bad model name, size, file or option: reported as one line and exit code 2."""
