from explomemo.cli import main

raise SystemExit(main())
