"""Where the planned bytes live: a memory map's banks (`bank_maps`), one arena set per device
(`devices`), and the bytes the emitted instructions move through each arena (`instruction_traffic`)."""
