"""Heuristics that choose a bank for every buffer of a memory map (ExecuTorch's `BankedGreedy` and a
banked best-fit), and the exact scaling of bank traffic costs the bank-choosing solvers weigh."""
