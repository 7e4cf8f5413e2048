from .repro import main

raise SystemExit(main())
