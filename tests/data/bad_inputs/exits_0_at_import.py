# A kernel module that ends the process while importing: perfci must say so (exit 2), not exit 0.
import sys

sys.exit(0)
