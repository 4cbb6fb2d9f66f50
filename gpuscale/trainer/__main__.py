from gpuscale.trainer.worker import main

raise SystemExit(main())
