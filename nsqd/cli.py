"""`nsqd` command line: nsqd's flag names (single or double dash, -f v or -f=v), an optional
TOML config file with nsqd's keys, flags overriding the file."""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

from . import malloc
from .config.argv import go_command_line, read_plain
from .config.flags import FLAGS, FLAGS_BY_CFG
from .config.options import WORKER_ENV, Options, convert
from .gocompat.strconv import OptionError
from .log import log, setup
from .version import BUILD


def parse_flags(argv: list[str]) -> dict[str, Any]:
    """The flags given, as strings by option name (None when absent, lists for list flags):
    a plain command line read directly, argparse for anything else (--help, errors)."""
    go = go_command_line(argv)  # Go's reading, as --name=value words argparse reads alike
    args = read_plain(argv if go is None else go)
    if args is None:
        from .config.parser import build_parser

        args = vars(build_parser().parse_args(argv if go is None else go))
    return args


def resolve(argv: list[str]) -> Options:
    """Defaults < config file < flags present on the command line."""
    args = parse_flags(argv)
    opts = Options()
    config_path = args.get("config")
    if config_path:
        import tomllib  # only a configuration with a file pays for the TOML parser

        try:
            with open(config_path, "rb") as f:
                config = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise OptionError(f"failed to load config file {config_path} - {exc}") from None
        for key, value in config.items():
            if type(value) is int and not -(2**63) <= value < 2**63:  # BurntSushi/toml's int64
                raise OptionError(
                    f'failed to load config file {config_path} - toml: (last key "{key}"): '
                    f"{value} is out of range for int64"
                )
            flag = FLAGS_BY_CFG.get(key)
            if flag is None or key in ("config", "version"):
                continue  # nsqd ignores keys it has no option for (these two are flags only)
            try:
                opts.values[flag.attr] = convert(flag, value, from_config=True)
            except OptionError as exc:
                raise OptionError(
                    f"config file {config_path}: invalid value {_show(value)} for {key} - {exc}"
                ) from None
    for flag in FLAGS:
        raw: Any = args.get(flag.attr)
        if raw is None:
            continue
        items = raw if flag.kind in ("list", "floats") else [raw]
        converted = []
        for item in items:
            try:
                converted.append(convert(flag, item))
            except OptionError as exc:
                raise OptionError(f'invalid value "{item}" for flag -{flag.name}: {exc}') from None
        if flag.kind == "floats":  # the flag's Set sorts (descending); a file keeps its order
            opts.values[flag.attr] = sorted((x for xs in converted for x in xs), reverse=True)
        elif flag.kind == "list":
            opts.values[flag.attr] = [x for values in converted for x in values]
        else:
            opts.values[flag.attr] = converted[0]
    opts.finalize()
    return opts


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = resolve(argv)
    except (OptionError, OSError) as exc:  # resolve() words a bad config file as OptionError
        print(f"nsqd: {exc}", file=sys.stderr)
        return 1
    if opts.version:
        print(BUILD)
        return 0
    setup(opts.log_level, opts.log_prefix)
    log.info("%s", BUILD)  # nsqd's first two lines
    if opts.workers > 1 or _group_folder(opts):  # nsqd.group only then
        from .group import identity

        me = identity.from_environment(opts)
        if me is None:  # the process started by the user: settles --data-path, then runs
            from .group import resize

            refused = resize.settle(opts)
            if refused:
                log.critical("%s", refused)
                return 1
            if opts.workers > 1:  # the workers' supervisor
                from .group import supervisor

                return supervisor.run(argv, opts)
        else:
            identity.become(me, opts)
    log.info("ID: %d", opts.node_id)
    from .daemon import NSQD

    # Millions of queued message records make the cyclic collector's passes costly, and the
    # engine keeps no garbage cycles on its hot path: collect rarely, never the start-up heap.
    # Frozen as it is, with no full pass first (~6 ms of a start): the collector's own passes
    # during the imports left ~60 KiB of cycles, frozen with the rest. (Turning it off during
    # the imports saved ~5 ms more but left ~0.9 MiB of import garbage resident.)
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    malloc.tune()
    import trio  # here, not at the top: a group's supervisor runs no trio (~45 ms of its start)

    from .storage.metadata import MetadataError

    try:
        trio.run(NSQD(opts).run)
    except BaseException as exc:
        refusal = _refusal(exc, (OSError, MetadataError, OptionError))
        if refusal is None:
            raise
        if isinstance(refusal, MetadataError):
            log.critical("%s", refusal)
        else:  # nsqd's words for what stops New()/Main(): lock, listen, TLS
            text = refusal.strerror if isinstance(refusal, OSError) else None
            log.critical("failed to instantiate nsqd - %s", text or refusal)
        return 1
    return 0


def _group_folder(opts: Options) -> bool:
    """Whether this is a group's worker, or --data-path holds a group's partitions (a lookup
    and two stats of one nsqd's start)."""
    if os.environ.get(WORKER_ENV):
        return True
    top = opts.data_path or os.getcwd()
    return any(os.path.isdir(os.path.join(top, f"worker-{k}")) for k in (0, 1))


def _refusal(exc: BaseException, kinds: tuple[type[Exception], ...]) -> BaseException | None:
    """The error that refused the start, out of the task tree's exception groups."""
    if isinstance(exc, kinds):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _refusal(inner, kinds)
            if found is not None:
                return found
    return None


if __name__ == "__main__":
    sys.exit(main())
