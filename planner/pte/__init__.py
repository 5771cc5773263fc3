"""Built `.pte` programs: read one and its memory layout (`program`), check its structure
(`structure`), and plan it again (`replan`)."""
