"""The CLI's configuration file, ``~/.config/capacity-orchestrator/config.toml`` (read with ``tomllib``).

```toml
stack = "capacity-orchestrator"   # the deployed stack (its ApiUrl output is the API)
region = "us-east-1"
profile = "ml-platform"           # the AWS profile whose credentials sign requests (SigV4)
output = "table"                  # table | json | yaml
# endpoint = "http://127.0.0.1:3000"   # an API base URL instead of a stack (make serve)
# requester = "ml-platform@example.com"  # the request's requester when -f/flags give none
# identity = "arn:aws:sts::123456789012:assumed-role/Approvers/carol"  # the caller, --local only
```

The path is ``$CAPACITY_CONFIG`` when set, else ``$XDG_CONFIG_HOME/capacity-orchestrator/config.toml``
(``~/.config`` when ``XDG_CONFIG_HOME`` is unset). A missing file is an empty configuration; command-line
options override every key.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from capacity_cli.api import CliError
from capacity_cli.suggest import closest

OUTPUTS = ("table", "json", "yaml")


@dataclass(frozen=True)
class Config:
    """The keys of the configuration file (all optional; see the module docstring)."""

    stack: str | None = None
    region: str | None = None
    profile: str | None = None
    output: str | None = None
    endpoint: str | None = None
    requester: str | None = None
    identity: str | None = None


def config_path() -> Path:
    """Where the configuration file is read from (see the module docstring)."""
    explicit = os.environ.get("CAPACITY_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return Path(base) / "capacity-orchestrator" / "config.toml"


def load_config(path: Path | None = None) -> Config:
    """Read the configuration file; a missing file is an empty :class:`Config`.

    Raises:
        CliError: the file is not TOML, has an unknown key (with the key it most likely meant) or a value of
            the wrong type, or ``output`` is not one of table, json, yaml.
    """
    path = path or config_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Config()
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise CliError(f"{path}: not TOML: {exc}") from exc
    known = [f.name for f in fields(Config)]
    problems = []
    for key, value in data.items():
        if key not in known:
            hint = closest(key, known)
            problems.append(f"unknown key {key!r}" + (f" (did you mean {hint!r}?)" if hint else ""))
        elif not isinstance(value, str):
            problems.append(f"{key} must be a string, got {type(value).__name__}")
    if data.get("output") not in (None, *OUTPUTS):
        problems.append(f"output must be one of {', '.join(OUTPUTS)}, got {data['output']!r}")
    if problems:
        raise CliError(f"{path}: " + "; ".join(problems) + f" (keys: {', '.join(known)})")
    return Config(**{key: value for key, value in data.items() if key in known})
