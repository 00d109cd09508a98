// The GCRA script against the in-process store (written next).
