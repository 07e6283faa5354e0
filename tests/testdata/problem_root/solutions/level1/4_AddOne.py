# A solution whose process dies at import time (as a crashing extension would).
import os

os._exit(3)
