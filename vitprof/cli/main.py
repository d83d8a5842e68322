"""The ``vitprof`` command line: ``build_parser()`` and ``main(argv) -> int``.

User errors and usage errors alike end in one line on stderr, ``vitprof: error: ...``, and exit
code 2: the parser prints the error and where to find the usage instead of argparse's multi-line
usage block. stdout carries only the result: while a command runs, whatever the model's code (or
a library, or a child process) writes to stdout, from Python or to file descriptor 1, goes to
stderr (:func:`~vitprof.cli.commands.common.results_only_on_stdout`). A model's code that calls
``sys.exit`` is a user error too. An interrupt (SIGINT) ends in one line, ``vitprof:
interrupted``, and exit code 130. These exit codes hold whatever happens to stderr: where it
is closed or full, what vitprof writes there is dropped. Help and ``--version`` that cannot be
written to stdout are a user error too.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from vitprof.cli.commands.common import results_only_on_stdout, write_output
from vitprof.core.errors import UserError

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

COMMANDS = ("analyze", "models", "check", "formula", "crosscheck", "profile", "report", "sweep",
            "diff", "memory")


class OneLineErrorParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr (exit code 2).

    Sub-command parsers inherit the class (``add_subparsers`` uses the parent's type).
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse, then run the parser's ``validate`` default, if any: a check across options
        (``Namespace -> message | None``) whose message is a usage error of this parser."""
        parsed, rest = super().parse_known_args(args, namespace)
        validate = self.get_default("validate")
        if validate is not None and (message := validate(parsed)):
            self.error(message)
        return parsed, rest

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        """argparse's, except that help that cannot reach stdout (closed, or a full device) is
        a UserError, as a command's result is (argparse drops it and exits 0)."""
        if file is not None:
            super().print_help(file)
        else:
            write_output(self.format_help(), None)

    def error(self, message: str) -> NoReturn:
        if message.endswith("expected one argument"):
            # argparse takes a value such as -16,224 for an option: say how to pass it
            message += "; a value that starts with '-' is written OPTION=VALUE"
        self.exit(2, f"vitprof: error: {message} (see '{self.prog} --help')\n")


class _PrintVersion(argparse.Action):
    """``--version``: print ``vitprof VERSION``, the installed package's (its metadata, read only
    when asked), and exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                         nargs=0, help="print vitprof's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("vitprof")
        except PackageNotFoundError:
            raise UserError("vitprof is not installed: no package metadata to read its "
                            "version from") from None
        write_output(f"vitprof {installed}", None)
        parser.exit(0)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of ``command`` alone: a command line that starts with
    a sub-command's name is parsed the same by either (a sub-command's parser, its help and its
    errors do not depend on the others), and the others' modules are then never imported."""
    parser = OneLineErrorParser(
        prog="vitprof",
        description="Exact params and MACs of Vision Transformers, per component.",
    )
    parser.add_argument("--version", action=_PrintVersion)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS if command is None else (command,):
        importlib.import_module(f"vitprof.cli.commands.{name}").add_parser(subparsers)
    return parser


def _named_command(argv: Sequence[str]) -> str | None:
    """The sub-command ``argv`` starts with, or None (no argument, an option, an unknown name)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def _interrupt_once(signum: int, frame: object) -> NoReturn:
    """SIGINT handler: ignore every later SIGINT, then raise KeyboardInterrupt. A second Ctrl-C
    would otherwise interrupt the exit itself (torch's atexit hooks) with a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


@contextlib.contextmanager
def _one_interrupt() -> Iterator[None]:
    """Run the body with ``_interrupt_once`` as the SIGINT handler (in the main thread, where
    Python's own handler is installed); the previous handler is restored unless interrupted."""
    own = threading.current_thread() is threading.main_thread() and (
        signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    if own:
        signal.signal(signal.SIGINT, _interrupt_once)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is _interrupt_once:
            signal.signal(signal.SIGINT, signal.default_int_handler)


class _StderrThatNeverFails:
    """stderr for the length of :func:`main`: what is written goes to the stderr found, and is
    dropped where that is closed or fails (a full device, a closed pipe), as nothing can say so
    anywhere: the exit code, 0, 1, 2 or 130, is then the command's all the same."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if self._stream is not None:
            with contextlib.suppress(OSError, ValueError):  # ValueError: a closed file
                self._stream.write(text)
        return len(text)

    def flush(self) -> None:
        if self._stream is not None:
            with contextlib.suppress(OSError, ValueError):
                self._stream.flush()

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _sys_exit_call(exit_: SystemExit) -> str:
    """``sys.exit(3)``, ``sys.exit('bye')`` or ``sys.exit()``: the call that raised ``exit_``."""
    return f"sys.exit({'' if exit_.code is None else repr(exit_.code)})"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sub-command ``argv`` names; the exit code: the command's (0, or 1 where it
    fails a check), 2 for a user error, 130 when interrupted (argparse exits on its own)."""
    argv = sys.argv[1:] if argv is None else argv
    with contextlib.redirect_stderr(_StderrThatNeverFails(sys.stderr)):
        try:
            with _one_interrupt():
                # argparse's own exits (--help, usage, --version) pass
                args = build_parser(_named_command(argv)).parse_args(argv)
                try:
                    with results_only_on_stdout():
                        return args.run(args)
                except SystemExit as exit_:  # argparse is done: this comes from the model's code
                    raise UserError(
                        f"the model's code called {_sys_exit_call(exit_)} while vitprof ran it"
                    ) from None
        except UserError as error:
            print(f"vitprof: error: {error}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("vitprof: interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(main())
