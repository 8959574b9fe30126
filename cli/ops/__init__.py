"""cli.ops: the commands that run and measure the machinery: serve, plan, check, bench, docs.

Each module declares a command's options and makes one call into the library; cli/app.py
registers them."""
from esc_eval.cli.ops import bench, check, docs, plan, serve

__all__ = ['bench', 'check', 'docs', 'plan', 'serve']
