import sys

from libs.cli.main import main

sys.exit(main())
