"""`python -m gateway.cli`: the `prisma` command where the project is on the path but not installed."""

from gateway.cli import app

app(prog_name="prisma")
