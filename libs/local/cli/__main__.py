import sys

from echo_memory.libs.local.cli.main import main

sys.exit(main())
