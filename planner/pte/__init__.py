"""Built `.pte` programs: read one (`program`) into per-method layouts (`layout`): each method's
instructions scanned for accesses and lifetimes (`accesses`), its problem derived (`method_problem`);
its structure checked (`structure`), and the program planned again (`replan`)."""
