"""Command line for Patel's workloads and the policy comparison
(:mod:`hetsched.reproduce.patel`)::

    python -m hetsched.reproduce.patel_cli compare [--scale quick] [--task N ...]
    python -m hetsched.reproduce.patel_cli scenario N [--policy P] [--scale S] [--priorities K]

``compare`` prints every Patel agent and today's Linux policies on Tasks 1-4
(performance, energy, power, performance per watt, time x watt);
``scenario`` prints Task N as a scenario file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .patel import PRIORITIES, comparison, comparison_table, scenario_toml


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    ap = argparse.ArgumentParser(
        prog="python -m hetsched.reproduce.patel_cli",
        description="Patel's agents vs today's Linux policies on Tasks 1-4",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    cmp_ = sub.add_parser("compare", help="print the comparison table")
    cmp_.add_argument("--scale", choices=("full", "quick"), default="full")
    cmp_.add_argument("--task", type=int, action="append", choices=(1, 2, 3, 4))
    scn = sub.add_parser("scenario", help="print Task N as a scenario file")
    scn.add_argument("task", type=int, choices=(1, 2, 3, 4))
    scn.add_argument(
        "--policy",
        default="1",
        choices=("control", "1", "2", "3", "4", "cfs+schedutil", "capacity-aware", "eas"),
    )
    scn.add_argument("--scale", choices=("full", "quick"), default="full")
    scn.add_argument("--priorities", choices=tuple(PRIORITIES))
    args = ap.parse_args(argv)
    if args.cmd == "scenario":
        sys.stdout.write(scenario_toml(args.task, args.scale, args.policy, args.priorities))
        return 0
    rows = comparison(args.scale, args.task or (1, 2, 3, 4))
    print(comparison_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
