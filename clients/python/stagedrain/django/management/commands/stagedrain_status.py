"""manage.py stagedrain_status: the relay's `stagedrain status --json`, summed up, with its exit status."""
import json
import os
import shutil
import subprocess
import sys

from django.core.management.base import BaseCommand, CommandError

# status's own exit statuses: 0 healthy, 1 needs attention, 2 bad usage.
USAGE = 2


def relay_binary():
    """STAGEDRAIN_BIN, else `stagedrain` on PATH; CommandError if neither."""
    path = os.environ.get("STAGEDRAIN_BIN") or shutil.which("stagedrain")
    if not path:
        raise CommandError(
            "the stagedrain relay binary was not found: set STAGEDRAIN_BIN to its path, or put stagedrain "
            "on PATH (make install does)",
            returncode=USAGE,
        )
    return path


def _count(n, one, many):
    return "%s %s" % (format(n, ","), one if n == 1 else many)


def summary(status):
    """The lines printed for status --json's object."""
    backlog, dead = status.get("backlog"), status.get("dead")
    if backlog is None:
        staged = "unknown"
    else:
        staged = ("about " if backlog.get("estimated") else "") + format(backlog["staged"], ",") + " staged"
        if backlog.get("held"):
            staged += ", %s held" % format(backlog["held"], ",")
    lines = [
        "backlog   " + staged,
        "dead      " + ("unknown" if dead is None else _count(dead["rows"], "row", "rows")),
    ]
    if status.get("healthy"):
        lines.append("healthy")
    else:
        lines.append("needs attention:")
        lines.extend("  - " + p for p in status.get("problems") or ["(no reason given)"])
    return lines


class Command(BaseCommand):
    help = (
        "Runs the relay's `stagedrain status --json` in this environment (STAGEDRAIN_PG_URL or DATABASE_URL, "
        "STAGEDRAIN_REDIS_URL or REDIS_URL, ...), prints its verdict, backlog and dead rows, and exits as it "
        "does: 0 healthy, 1 needs attention, 2 bad usage. Arguments after -- go to `stagedrain status`, e.g. "
        "-- --max-age 15min."
    )
    # It only runs the relay's binary: no database access of its own.
    requires_system_checks = []
    requires_migrations_checks = False

    def add_arguments(self, parser):
        # As dbshell takes its client's arguments: manage.py stagedrain_status -- --max-age 1h
        relay = parser.add_argument_group("stagedrain status arguments", prefix_chars="--")
        relay.add_argument("relay_args", nargs="*", metavar="ARG")

    def handle(self, *args, relay_args=(), **options):
        argv = [relay_binary(), "status", "--json", *relay_args]
        try:
            # The environment passes through; status's stderr (a usage error) goes to ours.
            proc = subprocess.run(argv, stdout=subprocess.PIPE, text=True)
        except OSError as exc:
            raise CommandError("could not run %s: %s" % (argv[0], exc), returncode=USAGE) from exc
        if proc.returncode < 0:
            raise CommandError("%s status was killed by signal %d" % (argv[0], -proc.returncode))
        if proc.returncode not in (0, 1):
            sys.exit(proc.returncode)
        try:
            status = json.loads(proc.stdout)
        except ValueError:
            raise CommandError(
                "%s status --json exited %d without printing JSON: %r" % (argv[0], proc.returncode, proc.stdout[:200]),
                returncode=proc.returncode or USAGE,
            ) from None
        for line in summary(status):
            self.stdout.write(line)
        # As migrate --check and makemigrations --check report theirs.
        if proc.returncode:
            sys.exit(proc.returncode)
