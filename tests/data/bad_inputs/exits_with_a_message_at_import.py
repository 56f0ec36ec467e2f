# A kernel module that refuses to import without a GPU by raising SystemExit with a message.
raise SystemExit("kernels need a GPU")
