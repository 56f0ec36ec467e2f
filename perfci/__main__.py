from perfci.cli import main

raise SystemExit(main())
