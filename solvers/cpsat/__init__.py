"""Exact planning with OR-Tools CP-SAT: the entry point (`driver.solve_cpsat`), its parameters, the
placement model, the searches over it, the reproducible mode, the bank-choosing model and the
window lower bounds CP-SAT probes prove."""
