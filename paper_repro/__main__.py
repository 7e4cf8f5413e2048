from bandsolve.paper_repro.repro import main

raise SystemExit(main())
