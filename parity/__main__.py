"""`python -m parity`: the command as the console script runs it (parity.entry, which takes over
Ctrl-C and SIGTERM before the CLI is imported)."""

try:
    from .entry import main
except KeyboardInterrupt:  # the milliseconds before parity.entry takes over (it imports parity.errors)
    import sys

    print("parity: interrupted", file=sys.stderr)
    exec("pass")  # clears CPython's mark of an unhandled interrupt (parity.errors.forget_interrupt)
    raise SystemExit(130) from None
raise SystemExit(main())
