"""Placeholder until helper H1's estimates land (issue 25): --dry-run and the long-job line."""

import click

dry_run_option = click.option("--dry-run", is_flag=True,
                              help="Print the runs to compute, how many are in the memo, and the estimated time, "
                                   "memory and disk; compute nothing.")


def estimate_for(command, ws, **kw):
    return None


def show_plan(est, json_path=None):
    raise click.UsageError("--dry-run is not available yet")


def announce(est):
    return None
