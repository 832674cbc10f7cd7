"""`python -m parity`: the CLI; a Ctrl-C that lands before `main` takes over still exits 130."""

try:
    from .cli import main

    code = main()
except KeyboardInterrupt:  # during start-up (imports), before main's own handler exists
    import sys

    print("parity: interrupted", file=sys.stderr)
    exec("pass")  # clears CPython's mark of an unhandled interrupt (parity.errors.forget_interrupt)
    code = 130
raise SystemExit(code)
