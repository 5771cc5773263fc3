"""Placement heuristics without bank choice: ExecuTorch's greedy (byte-exact), best-fit and the skyline
placement, with the orders they try and the indexes of live and free bytes they share."""
