from explomemo.cli.main import main

raise SystemExit(main())
