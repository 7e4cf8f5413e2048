from ..cli.repro import main

if __name__ == "__main__":  # not in a --jobs worker that re-imports the main module
    raise SystemExit(main())
