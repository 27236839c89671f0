"""How a failure is shown and which exit status it ends with (:mod:`capacity_cli.exits`).

For a person (``--output table``) a failure is a few lines on standard error: what the API refused, each
field error with what was most likely meant, and a hint. Under ``--output json`` or ``yaml`` it is the
error document of :func:`capacity_cli.exits.error_document` on standard error, in that format, whatever
failed: a refused request, a usage error Click found before any command ran (:class:`CapacityGroup`), a
watch that stopped short. Standard output keeps only data, so ``capacity -o json ... | jq`` never reads an
error as an answer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from capacity_cli.api import ApiError, CliError
from capacity_cli.config import OUTPUTS, load_config
from capacity_cli.exits import ExitStatus, error_document
from capacity_cli.render import as_yaml
from capacity_cli.suggest import query_suggestion, suggestion

STRUCTURED = ("json", "yaml")


@dataclass(frozen=True)
class Failure:
    """One failure, as shown: the exit status, the message, the HTTP status (None when nothing answered),
    the field problems (``field``, ``message``, ``suggestion``) and a hint (one sentence, or None)."""

    status: ExitStatus
    message: str
    http_status: int | None = None
    problems: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    hint: str | None = None

    def document(self) -> dict[str, Any]:
        """The error document (:func:`capacity_cli.exits.error_document`)."""
        return error_document(
            self.status, self.message, http_status=self.http_status, problems=self.problems, hint=self.hint
        )


def failure_of(
    exc: CliError,
    *,
    sent: Any = None,
    schema: str = "ReservationRequest",
    query_value: str | None = None,
    hint: str | None = None,
) -> Failure:
    """The :class:`Failure` of ``exc``; field errors get their "did you mean" (``sent``: the body that was
    refused, ``schema`` its OpenAPI schema; ``query_value``: a refused query parameter's value)."""
    if not isinstance(exc, ApiError):
        return Failure(ExitStatus(exc.exit_code), str(exc), hint=hint)
    problems = []
    for problem in exc.problems:
        if query_value:
            found = query_suggestion(problem, query_value)
        else:
            found = suggestion(problem, sent, schema=schema)
        problems.append({"field": problem.field, "message": problem.message, "suggestion": found})
    return Failure(ExitStatus(exc.exit_code), exc.message, exc.status, problems, hint)


def show(err: Console, output: str, failure: Failure) -> None:
    """Print ``failure`` on standard error: the error document under ``json``/``yaml``, else lines."""
    if output in STRUCTURED:
        write_document(err, output, failure.document())
        return
    if failure.problems:
        err.print(f"[red]The API refused the request ({failure.http_status}):[/red]")
        for problem in failure.problems:
            line = f"{problem['field']}: {problem['message']}"
            if problem.get("suggestion"):
                line += f" - {problem['suggestion']}"
            err.print(f"  - {line}", markup=False, highlight=False)
    elif failure.http_status is not None:
        err.print(f"[red]The API answered {failure.http_status}:[/red] {failure.message}", highlight=False)
    else:
        err.print(f"[red]error:[/red] {failure.message}", highlight=False)
    if failure.hint:
        err.print(f"  ({failure.hint})", markup=False, highlight=False)


def write_document(err: Console, output: str, document: Mapping[str, Any]) -> None:
    """``document`` as JSON (one line) or YAML on ``err``'s file, unstyled."""
    text = as_yaml(document) if output == "yaml" else json.dumps(document, default=str)
    # Written to the file itself: Rich would wrap a long line and colour it.
    err.file.write(text.rstrip("\n") + "\n")
    err.file.flush()


def structured_output(args: Sequence[str]) -> str | None:
    """``json`` or ``yaml`` when the command line (``-o json``, ``--output=yaml``...) or, without one, the
    configuration file asks for it; None otherwise. Read before Click parses anything, so a usage error is
    shown in the format asked for; it never fails."""
    chosen: str | None = None
    config: str | None = None
    for index, arg in enumerate(args):
        if arg == "--":
            break
        following = args[index + 1] if index + 1 < len(args) else None
        if arg in ("-o", "--output"):
            chosen = following
        elif arg.startswith("--output="):
            chosen = arg.split("=", 1)[1]
        elif arg.startswith("-o") and len(arg) > 2 and not arg.startswith("--"):
            chosen = arg[2:]
        elif arg == "--config":
            config = following
    if chosen is None:
        try:
            from pathlib import Path  # noqa: PLC0415

            chosen = load_config(Path(config) if config else None).output
        except (CliError, OSError, ValueError):
            return None
    return chosen if chosen in STRUCTURED and chosen in OUTPUTS else None


class CapacityGroup(TyperGroup):
    """The ``capacity`` command group: under ``--output json|yaml`` a usage error (an unknown command or
    option, a value Click refuses) or an aborted prompt is the error document too, with the same exit status
    as without (2 for usage, 1 for an abort, 130 for Ctrl-C)."""

    def main(  # type: ignore[override]  # Click's signature, passed through
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line (see the class docstring)."""
        argv = list(sys.argv[1:] if args is None else args)
        output = structured_output(argv)
        if output is None or not standalone_mode:
            return super().main(argv, prog_name, complete_var, standalone_mode, **extra)
        err = Console(stderr=True)
        try:
            code = super().main(argv, prog_name, complete_var, False, **extra)
        except typer.Abort:
            write_document(err, output, Failure(ExitStatus.FAILED, "aborted: nothing was done").document())
            sys.exit(ExitStatus.FAILED)
        except typer.TyperException as exc:  # Click's usage errors (typer vendors Click)
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            status = ExitStatus.BAD_INPUT if getattr(exc, "exit_code", 2) == 2 else ExitStatus.FAILED
            write_document(err, output, Failure(status, message).document())
            sys.exit(status)
        sys.exit(code if isinstance(code, int) else ExitStatus.OK)
