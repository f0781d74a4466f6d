import sys

from bert_keras.cli import main

sys.exit(main())
