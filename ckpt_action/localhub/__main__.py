"""``python -m ckpt_action.localhub --data-dir D [--host H] [--port P] [--port-file F]
[--access-log L] [--faults J] [--token T]``: run the local Hub until SIGTERM/SIGINT.

The first stdout line is the base URL. The token may also come from ``LOCAL_HUB_TOKEN``
so it stays out of process listings.
"""

from __future__ import annotations

import argparse
import os
import sys

from .faults import FaultFileError
from .server import run_server
from .storage import StorageError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ckpt_action.localhub", description=__doc__)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file")
    parser.add_argument("--access-log")
    parser.add_argument("--faults")
    parser.add_argument("--token", default=os.environ.get("LOCAL_HUB_TOKEN") or None)
    args = parser.parse_args(argv)
    try:
        run_server(args.data_dir, host=args.host, port=args.port, port_file=args.port_file,
                   access_log=args.access_log, faults=args.faults, token=args.token)
    except (FaultFileError, StorageError) as exc:
        print(f"local-hub: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"local-hub: error: cannot serve on {args.host}:{args.port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
