from ddppo.cli import main

raise SystemExit(main())
