from rltui.cli import main

raise SystemExit(main())
